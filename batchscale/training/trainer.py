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

from batchscale.core.goals import first_step_reaching
from batchscale.core.names import effective_learning_rate
from batchscale.core.spec import StudySpec, TrialSpec
from batchscale.core.trial_state import is_finished, keeps_checkpoint
from batchscale.store.checkpoints import delete_checkpoint, read_checkpoint, write_checkpoint
from batchscale.store.crossings import CrossingBoard
from batchscale.store.layout import StudyStore
from batchscale.training.evaluation_grid import evaluation_steps
from batchscale.training.keras_setup import hardware, make_loss, seed_keras, select_backend, training_scope
from batchscale.training.live_curves import TrialCurves
from batchscale.training.signals import Stopped
from batchscale.training.stop_rule import raced, trial_outcome  # noqa: F401  (raced: tests import it here)
from batchscale.workloads import build_model, get_dataset
from batchscale.workloads.data_order import EpochPermutations
from batchscale.workloads.dataset_registry import open_pipeline

FLUSH_SECONDS = 5.0  # how often measurements reach the store while a trial runs
CHUNK_SECONDS = 2.0  # about how long one fit call trains: how soon a stop is noticed


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


def trial_metadata(spec: StudySpec, trial: TrialSpec, params: dict, max_steps: int,
                   replicas: int, trainer: str) -> dict:
    """A trial's metadata.json as it starts (INCOMPLETE): the one form both trainers write."""
    metadata = {
        "trial_id": trial.trial_id, "batch_size": trial.batch_size, "parameters": trial.parameters,
        "effective_learning_rate": effective_learning_rate(params["learning_rate"],
                                                           params.get("momentum", 0.0)),
        "status": "INCOMPLETE",
        "steps": 0, "max_steps": max_steps, "backend": spec.backend,
        "precision": spec.workload.precision, "replicas": replicas, "trainer": trainer,
        # the fit trainer trains one trial at a time; a vmapped group sets its width
        "trained_together": 1, **hardware(replicas),
    }
    if params != trial.parameters:
        metadata["trainer_parameters"] = params  # e.g. decay_steps from decay_fraction
    return metadata


def crossing_board(store: StudyStore, spec: StudySpec, batch_size: int) -> CrossingBoard | None:
    """Where trials of ``batch_size`` publish and learn goal crossings (a protocol that
    ``races`` only)."""
    return CrossingBoard(store.fs, spec.name, batch_size) if spec.protocol.races else None


def finish_trial(store: StudyStore, spec: StudySpec, trial: TrialSpec, metadata: dict,
                 rows: list[dict], outcome: tuple[str, str], step: int, num_train_examples: int,
                 train_seconds: float, wall_time: float, log, board: CrossingBoard | None = None,
                 curves: TrialCurves | None = None, **extra) -> dict:
    """Record a finished trial: its measurements, then its final metadata (written last: it
    marks the trial done) with the measurements' record (rows and SHA-256 of the bytes
    written, so a reader can tell a damaged measurements.csv), then the removal of its
    checkpoint; a COMPLETE trial then publishes its goal crossings on ``board``. ``curves``:
    the trial's TensorBoard run, which gets its last rows and the outcome."""
    examples = step * trial.batch_size
    metadata.update(
        status=outcome[0], stop_reason=outcome[1], steps=step,
        epochs=examples / num_train_examples,
        examples_per_second=examples / train_seconds if train_seconds else None,
        train_seconds=train_seconds,  # training steps only: no compilation, no evaluation
        **extra, wall_time=wall_time,
    )
    metadata["measurements"] = store.write_measurements(spec, trial, rows)
    store.write_metadata(spec, trial, metadata)
    if curves is not None:
        curves.finish(rows, outcome[0])
    if not keeps_checkpoint(outcome[1]):  # a budget-stopped trial keeps it: a larger budget
        delete_checkpoint(store, spec, trial)  # continues the trial from there
    if board is not None and outcome[0] == "COMPLETE":
        board.publish(trial.trial_id, {i: s for i, goal in enumerate(spec.goals)
                                       if (s := first_step_reaching(rows, goal)) is not None})
    log(f"trial {trial.batch_size}/{trial.trial_id}: {outcome[0]} ({outcome[1]}) after {step} "
        f"steps, {wall_time:.1f}s")
    return metadata


def run_trial(spec: StudySpec, trial: TrialSpec, store: StudyStore, log=print, stop=None) -> dict:
    """Train ``trial`` unless the store holds it finished (``core.trial_state``: COMPLETE
    or INFEASIBLE, and not stopped at a budget since raised); return its metadata.

    Resumes from the trial's checkpoint when it has one, and keeps one while it trains
    (every ``spec.checkpoint_seconds``); ``stop`` (a ``signals.StopRequest``, set by
    SIGTERM) makes it checkpoint and raise ``Stopped`` at the end of the current fit call.
    """
    existing = store.read_metadata(spec, trial)
    if is_finished(existing, spec.max_steps[trial.batch_size]):
        log(f"trial {trial.batch_size}/{trial.trial_id}: already {existing['status']}, re-used")
        if not keeps_checkpoint(existing.get("stop_reason", "")):
            delete_checkpoint(store, spec, trial)  # killed between its last two writes
        return existing

    select_backend(spec.backend)
    from batchscale.training.evaluator import Evaluator
    from batchscale.training.optimizer import make_optimizer
    from batchscale.training.schedules import make_keras_schedule

    pipeline = open_pipeline(store, get_dataset(spec.workload.dataset), spec.workload.options)
    seed = trial_seed(spec, trial)
    max_steps = spec.max_steps[trial.batch_size]
    params = resolve_parameters(trial.parameters, max_steps)
    label = f"trial {trial.batch_size}/{trial.trial_id}"

    seed_keras(seed, spec.backend)
    with training_scope(spec.backend, spec.workload.precision, trial.batch_size, log) as replicas:
        model = build_model(spec.workload.model, pipeline.input_shape, pipeline.num_outputs,
                            task=pipeline.task)
        optimizer = make_optimizer(spec.workload.optimizer, make_keras_schedule(spec.schedule, params),
                                   params.get("momentum", 0.0), params.get("l2_penalty", 0.0))
        model.compile(optimizer=optimizer, loss=make_loss(pipeline.task, params.get("label_smoothing", 0.0)))
        evaluate = Evaluator(model, pipeline, spec.evaluation.train_examples, seed, replicas)
        train = _Trainer(model, pipeline, trial.batch_size, seed)

        metadata = trial_metadata(spec, trial, params, max_steps, replicas, "fit")
        watched = f"val/{spec.goals[0].metric}"
        grid = evaluation_steps(max_steps, spec.evaluation.resolution)
        board = crossing_board(store, spec, trial.batch_size)
        curves = TrialCurves(store.fs, spec, trial, params, log)

        started = last_flush = last_checkpoint = time.time()
        train_seconds, rows, step, finite, outcome = 0.0, [], 0, True, None
        checkpoint = read_checkpoint(store, spec, trial, log)
        if checkpoint is not None:
            state = checkpoint.state
            step, rows = int(state["step"]), list(state["rows"])
            train_seconds, finite = float(state["train_seconds"]), bool(state["finite"])
            _restore(model, optimizer, checkpoint.arrays)
            train.restore(state["order"], checkpoint.arrays.get("order"), step)
            log(f"{label}: resumed from its checkpoint at step {step}")
            store.write_metadata(spec, trial, {**metadata, "steps": step})  # INCOMPLETE again
        else:
            store.write_metadata(spec, trial, metadata)
            log(f"{label}: starts at step 0")
            rows.append(evaluate(0, started))

        def save() -> None:
            order_state, order = train.state()
            arrays = {**_variables(model, optimizer), **({"order": order} if order is not None else {})}
            write_checkpoint(store, spec, trial, arrays, {
                "step": step, "rows": rows, "train_seconds": train_seconds, "finite": finite,
                "order": order_state})
            store.write_measurements(spec, trial, rows)
            store.write_metadata(spec, trial, {**metadata, "steps": step})
            curves.update(rows)

        for target in grid[1:]:
            if target < step or (target == step and rows[-1]["step"] == step):
                continue  # resumed past this evaluation
            while step < target:
                tick = time.time()
                n = train.steps_for(target - step)
                finite = math.isfinite(train(n)) and finite
                train_seconds += time.time() - tick
                step += n
                if stop is not None and stop.requested:
                    save()
                    log(f"{label}: stopped at step {step} and checkpointed; run it again to resume")
                    raise Stopped(f"stopped at step {step}")
                if time.time() - last_checkpoint >= spec.checkpoint_seconds:
                    save()
                    last_checkpoint = time.time()
            rows.append(evaluate(step, started))
            outcome = trial_outcome(spec, rows, finite, step, max_steps, board)
            if outcome is not None:
                break
            if time.time() - last_flush > FLUSH_SECONDS:
                store.write_measurements(spec, trial, rows)
                metadata["steps"] = step
                store.write_metadata(spec, trial, metadata)
                curves.update(rows)
                last_flush = time.time()
                log(f"{label}: step {step}/{max_steps} {watched} {rows[-1][watched]:.4f}")

        if keeps_checkpoint(outcome[1]):  # a larger budget continues it from here
            save()
    return finish_trial(store, spec, trial, metadata, rows, outcome, step,
                        pipeline.num_train_examples, train_seconds, time.time() - started, log,
                        board, curves)


def _variables(model, optimizer) -> dict[str, np.ndarray]:
    """The model's variables (dropout seed states included) and the optimizer's (slots,
    iteration count), named for a checkpoint."""
    out = {f"model/{i}": np.asarray(v) for i, v in enumerate(model.variables)}
    out.update({f"optimizer/{i}": np.asarray(v) for i, v in enumerate(optimizer.variables)})
    return out


def _restore(model, optimizer, arrays: dict) -> None:
    optimizer.build(model.trainable_variables)  # its slots exist only after the first step
    for i, variable in enumerate(model.variables):
        variable.assign(arrays[f"model/{i}"])
    for i, variable in enumerate(optimizer.variables):
        variable.assign(arrays[f"optimizer/{i}"])


class _Trainer:
    """``train(steps) -> mean training loss`` takes ``steps`` optimizer steps with ``fit``.

    In-memory data: the batches of those steps are sliced from the arrays by the trial's
    ``EpochPermutations`` and fed to one ``fit`` call. Streamed data: ``fit`` pulls the
    batches from the pipeline's endless iterator, which persists across calls (a resumed
    trial skips the batches it had taken). Each call is cut to about ``CHUNK_SECONDS`` of
    steps, so a stop request is noticed soon; every step is the same compiled train step
    however the calls are cut.
    """

    def __init__(self, model, pipeline, batch_size: int, seed: int):
        self.model, self.pipeline, self.batch_size = model, pipeline, batch_size
        self.seconds_per_step = None
        # One-hot rows for softmax labels, made once per trial (never for a 32k vocabulary).
        self.eye = (np.eye(pipeline.num_outputs, dtype=np.float32)
                    if pipeline.task == "classification" else None)
        self.arrays = pipeline.in_memory and pipeline.task == "classification"
        if self.arrays:
            self.x, y = pipeline.arrays("train")
            self.one_hot = self.eye[y]
            self.order = EpochPermutations(len(self.x), batch_size, seed)
        else:
            self.batches = pipeline.train_batches(batch_size, seed)
            self.length = getattr(pipeline, "train_length", None)

    def steps_for(self, remaining: int) -> int:
        if self.seconds_per_step is None:
            return min(remaining, 1)  # the first call compiles
        return int(max(1, min(remaining, CHUNK_SECONDS / max(self.seconds_per_step, 1e-6))))

    def __call__(self, steps: int) -> float:
        tick = time.perf_counter()
        if self.arrays:
            indices = self.order.take(steps)
            history = self.model.fit(self.x[indices], self.one_hot[indices],
                                     batch_size=self.batch_size, epochs=1, shuffle=False, verbose=0)
        else:
            feed = (_model_batch(b, self.pipeline.task, self.eye, self.length)
                    for b in itertools.islice(self.batches, steps))
            history = self.model.fit(feed, steps_per_epoch=steps, epochs=1, shuffle=False, verbose=0)
        seconds = (time.perf_counter() - tick) / steps
        if self.seconds_per_step is not None or steps > 1:
            self.seconds_per_step = seconds
        else:
            self.seconds_per_step = seconds / 10  # the compiling call: a guess, refined next call
        return history.history["loss"][-1]

    def state(self) -> tuple[dict, np.ndarray | None]:
        """Where the data order stands (JSON-able) and the epoch's permutation (arrays only)."""
        if self.arrays:
            return self.order.state()
        return {"streamed": True}, None

    def restore(self, state: dict, order: np.ndarray | None, step: int) -> None:
        if self.arrays:
            self.order.restore(state, order)
        else:  # the stream is deterministic from the seed: skip what was trained on
            for _ in itertools.islice(self.batches, step):
                pass


def _model_batch(batch: tuple, task: str, eye: np.ndarray | None, length: int | None) -> tuple:
    """A pipeline batch as the loss wants it: one-hot labels for softmax classification;
    token batches padded to the training length, so the model sees one shape."""
    if task == "classification":
        return batch[0], eye[batch[1]]
    if task == "language_model" and length and batch[0].shape[1] < length:
        pad = ((0, 0), (0, length - batch[0].shape[1]))
        return tuple(np.pad(part, pad) for part in batch)
    return batch
