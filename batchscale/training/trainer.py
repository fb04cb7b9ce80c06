"""Train one trial: the paper's optimizer and schedule, evaluation on a geometric grid,
early stop at the goals, divergence recorded as data (status INFEASIBLE).

Written against Keras 3's backend-agnostic API, so the same code runs on the JAX and
TensorFlow backends, on one device or data-parallel over a pod's accelerators (see
``keras_setup``). Every data set arrives through an input pipeline
(``batchscale.workloads.inputs``): in-memory ones are trained many steps per ``fit``
call from arrays (no TensorFlow needed on JAX), streamed ones from their batch iterator.
"""

from __future__ import annotations

import itertools
import math
import time
import zlib

import numpy as np

from batchscale.core.goals import all_goals_reached
from batchscale.core.names import effective_learning_rate
from batchscale.core.spec import StudySpec, TrialSpec
from batchscale.store.layout import StudyStore
from batchscale.training.evaluation_grid import evaluation_steps
from batchscale.training.keras_setup import make_loss, seed_keras, select_backend, training_scope
from batchscale.workloads import build_model, get_dataset
from batchscale.workloads.data_order import EpochPermutations
from batchscale.workloads.dataset_registry import open_pipeline

FLUSH_SECONDS = 5.0  # how often measurements reach the store while a trial runs


def trial_seed(spec: StudySpec, trial: TrialSpec) -> int:
    """A stable per-trial seed: initialisation, dropout and data order depend on it."""
    return zlib.crc32(f"{spec.seed}/{trial.batch_size}/{trial.trial_id}".encode()) & 0x7FFFFFFF


def resolve_parameters(parameters: dict, max_steps: int) -> dict:
    """The trial's metaparameters as the trainer uses them: ``decay_fraction`` (a search
    space that transfers across batch sizes) becomes ``decay_steps`` of this budget."""
    params = dict(parameters)
    if "decay_fraction" in params:
        params["decay_steps"] = max(1, round(params.pop("decay_fraction") * max_steps))
    return params


def run_trial(spec: StudySpec, trial: TrialSpec, store: StudyStore, log=print) -> dict:
    """Train ``trial`` unless the store holds it COMPLETE or INFEASIBLE; return its metadata."""
    existing = store.read_metadata(spec, trial)
    if existing and existing.get("status") in ("COMPLETE", "INFEASIBLE"):
        log(f"trial {trial.batch_size}/{trial.trial_id}: already {existing['status']}, re-used")
        return existing

    select_backend(spec.backend)
    from batchscale.training.evaluator import Evaluator
    from batchscale.training.optimizer import make_optimizer
    from batchscale.training.schedules import make_keras_schedule

    pipeline = open_pipeline(store, get_dataset(spec.workload.dataset), spec.workload.options)
    seed = trial_seed(spec, trial)
    max_steps = spec.max_steps[trial.batch_size]
    params = resolve_parameters(trial.parameters, max_steps)

    seed_keras(seed, spec.backend)
    with training_scope(spec.backend, spec.workload.precision, trial.batch_size, log) as replicas:
        model = build_model(spec.workload.model, pipeline.input_shape, pipeline.num_outputs,
                            task=pipeline.task)
        optimizer = make_optimizer(spec.workload.optimizer, make_keras_schedule(spec.schedule, params),
                                   params.get("momentum", 0.0), params.get("l2_penalty", 0.0))
        model.compile(optimizer=optimizer, loss=make_loss(pipeline.task, params.get("label_smoothing", 0.0)))
        evaluate = Evaluator(model, pipeline, spec.evaluation.train_examples, seed, replicas)
        train = _trainer(model, pipeline, trial.batch_size, seed)

        metadata = {
            "trial_id": trial.trial_id, "batch_size": trial.batch_size, "parameters": trial.parameters,
            "effective_learning_rate": effective_learning_rate(params["learning_rate"],
                                                               params.get("momentum", 0.0)),
            "status": "INCOMPLETE",
            "steps": 0, "max_steps": max_steps, "backend": spec.backend,
            "precision": spec.workload.precision, "replicas": replicas,
        }
        if params != trial.parameters:
            metadata["trainer_parameters"] = params  # e.g. decay_steps from decay_fraction
        store.write_metadata(spec, trial, metadata)
        watched = f"val/{spec.goals[0].metric}"

        started = last_flush = time.time()
        train_seconds, rows, status, reason, step = 0.0, [], "COMPLETE", "budget", 0
        rows.append(evaluate(0, started))
        initial_loss = rows[0]["train/cross_entropy_error"]
        for target in evaluation_steps(max_steps, spec.evaluation.resolution)[1:]:
            tick = time.time()
            last_loss = train(target - step)
            train_seconds += time.time() - tick
            step = target
            rows.append(evaluate(step, started))
            loss = rows[-1]["train/cross_entropy_error"]
            if (not math.isfinite(last_loss) or not math.isfinite(loss)
                    or loss > spec.evaluation.divergence_factor * initial_loss):
                status, reason = "INFEASIBLE", "diverged"
                break
            if all_goals_reached(rows, spec.goals):
                reason = "goal"
                break
            if time.time() - last_flush > FLUSH_SECONDS:
                store.write_measurements(spec, trial, rows)
                metadata["steps"] = step
                store.write_metadata(spec, trial, metadata)
                last_flush = time.time()
                log(f"trial {trial.batch_size}/{trial.trial_id}: step {step}/{max_steps} "
                    f"{watched} {rows[-1][watched]:.4f}")

    metadata.update(
        status=status, stop_reason=reason, steps=step,
        epochs=step * trial.batch_size / pipeline.num_train_examples,
        examples_per_second=step * trial.batch_size / train_seconds if train_seconds else None,
        wall_time=time.time() - started,
    )
    store.write_measurements(spec, trial, rows)
    store.write_metadata(spec, trial, metadata)  # written last: marks the trial done
    log(f"trial {trial.batch_size}/{trial.trial_id}: {status} ({reason}) after {step} steps, "
        f"{metadata['wall_time']:.1f}s")
    return metadata


def _trainer(model, pipeline, batch_size: int, seed: int):
    """A function ``train(steps) -> last training loss`` that takes ``steps`` optimizer steps.

    In-memory data: the batches of all those steps are sliced from the arrays and fed to
    one ``fit`` call (fast: no per-step Python). Streamed data: ``fit`` pulls exactly
    ``steps`` batches from the pipeline's endless iterator, which persists across calls.
    """
    # One-hot rows for softmax labels, made once per trial (never for a 32k vocabulary).
    eye = np.eye(pipeline.num_outputs, dtype=np.float32) if pipeline.task == "classification" else None
    if pipeline.in_memory and pipeline.task == "classification":
        x, y = pipeline.arrays("train")
        one_hot = eye[y]
        order = EpochPermutations(len(x), batch_size, seed)

        def train_arrays(steps: int) -> float:
            indices = order.take(steps)
            history = model.fit(x[indices], one_hot[indices], batch_size=batch_size, epochs=1,
                                shuffle=False, verbose=0)
            return history.history["loss"][-1]

        return train_arrays

    batches = pipeline.train_batches(batch_size, seed)
    length = getattr(pipeline, "train_length", None)

    def feed(steps: int):
        for batch in itertools.islice(batches, steps):
            yield _model_batch(batch, pipeline.task, eye, length)

    def train_stream(steps: int) -> float:
        history = model.fit(feed(steps), steps_per_epoch=steps, epochs=1, shuffle=False, verbose=0)
        return history.history["loss"][-1]

    return train_stream


def _model_batch(batch: tuple, task: str, eye: np.ndarray | None, length: int | None) -> tuple:
    """A pipeline batch as the loss wants it: one-hot labels for softmax classification;
    token batches padded to the training length, so the model sees one shape."""
    if task == "classification":
        return batch[0], eye[batch[1]]
    if task == "language_model" and length and batch[0].shape[1] < length:
        pad = ((0, 0), (0, length - batch[0].shape[1]))
        return tuple(np.pad(part, pad) for part in batch)
    return batch
