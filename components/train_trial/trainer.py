"""Train one trial: the paper's optimizer and schedule, evaluation on a geometric grid,
early stop at the goals, divergence recorded as data (status INFEASIBLE).

Written against Keras 3's backend-agnostic API, so the same code runs on the JAX and
TensorFlow backends. Small data sets are fed from in-memory arrays: training on them
needs no TensorFlow at all on the JAX backend.
"""

from __future__ import annotations

import math
import os
import sys
import time
import zlib

import numpy as np

from components.goal_detection.goals import all_goals_reached
from components.spec import StudySpec, TrialSpec
from components.store import StudyStore
from components.train_trial.evaluation import (
    EpochPermutations,
    classification_metrics,
    evaluation_steps,
)
from components.workloads import build_model, get_dataset

FLUSH_SECONDS = 5.0  # how often measurements reach the store while a trial runs


def select_backend(backend: str) -> None:
    """Make ``backend`` Keras' backend; it cannot change once keras is imported."""
    if "keras" in sys.modules:
        import keras

        if keras.backend.backend() != backend:
            raise RuntimeError(
                f"keras already imported with backend {keras.backend.backend()!r}; "
                f"run the trial in a fresh process to use {backend!r}"
            )
        return
    os.environ["KERAS_BACKEND"] = backend


def seed_keras(seed: int, backend: str) -> None:
    """Seed Python, NumPy and Keras' global seed generator.

    ``keras.utils.set_random_seed`` also imports TensorFlow to seed it whenever TF is
    installed, which costs seconds per trial on the JAX backend for nothing; there we
    do its Keras part directly and fall back to it if Keras' internals move.
    """
    import keras

    if backend != "jax":
        keras.utils.set_random_seed(seed)
        return
    try:
        import random

        from keras.src.backend.common import global_state
        from keras.src.random import seed_generator
        from keras.src.utils import rng_utils

        global_state.set_global_attribute(rng_utils.GLOBAL_RANDOM_SEED, seed)
        global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, None)
        random.seed(seed)
        np.random.seed(seed)
    except (ImportError, AttributeError):
        keras.utils.set_random_seed(seed)


def trial_seed(spec: StudySpec, trial: TrialSpec) -> int:
    """A stable per-trial seed: initialisation, dropout and data order depend on it."""
    return zlib.crc32(f"{spec.seed}/{trial.batch_size}/{trial.trial_id}".encode()) & 0x7FFFFFFF


def effective_learning_rate(parameters: dict) -> float:
    """η/(1−γ), the paper's effective learning rate (γ = 0 for plain SGD)."""
    return parameters["learning_rate"] / (1.0 - parameters.get("momentum", 0.0))


def run_trial(spec: StudySpec, trial: TrialSpec, store: StudyStore, log=print) -> dict:
    """Train ``trial`` unless the store holds it COMPLETE or INFEASIBLE; return its metadata."""
    existing = store.read_metadata(spec, trial)
    if existing and existing.get("status") in ("COMPLETE", "INFEASIBLE"):
        log(f"trial {trial.batch_size}/{trial.trial_id}: already {existing['status']}, re-used")
        return existing

    select_backend(spec.backend)
    import keras

    from components.train_trial.optimizer import make_optimizer
    from components.train_trial.schedules import make_keras_schedule

    dataset = get_dataset(spec.workload.dataset)
    x_train, y_train = _load(store, dataset, "train")
    x_val, y_val = _load(store, dataset, "validation")
    seed = trial_seed(spec, trial)
    subset = _train_eval_subset(len(x_train), spec.evaluation.train_examples, seed)
    params = trial.parameters
    max_steps = spec.max_steps[trial.batch_size]

    seed_keras(seed, spec.backend)
    model = build_model(spec.workload.model, dataset.image_shape, dataset.num_classes)
    schedule = make_keras_schedule(
        spec.schedule, params["learning_rate"],
        params.get("end_learning_rate_factor", 1.0), int(params.get("decay_steps", 1)),
    )
    model.compile(
        optimizer=make_optimizer(spec.workload.optimizer, schedule, params.get("momentum", 0.0)),
        loss=keras.losses.CategoricalCrossentropy(
            from_logits=True, label_smoothing=params.get("label_smoothing", 0.0)),
    )
    one_hot = np.eye(dataset.num_classes, dtype=np.float32)[y_train]
    batches = EpochPermutations(len(x_train), trial.batch_size, seed)

    metadata = {
        "trial_id": trial.trial_id, "batch_size": trial.batch_size, "parameters": params,
        "effective_learning_rate": effective_learning_rate(params), "status": "INCOMPLETE",
        "steps": 0, "max_steps": max_steps, "backend": spec.backend,
    }
    store.write_metadata(spec, trial, metadata)

    eval_sets = {"train": (x_train[subset], y_train[subset]), "val": (x_val, y_val)}

    def evaluate(step: int, started: float) -> dict:
        row = {"step": step}
        for split, (x, y) in eval_sets.items():
            for name, value in classification_metrics(_logits(model, x), y).items():
                row[f"{split}/{name}"] = value
        row["wall_time"] = time.time() - started
        return row

    started = last_flush = time.time()
    train_seconds, rows, status, reason, step = 0.0, [], "COMPLETE", "budget", 0
    rows.append(evaluate(0, started))
    initial_loss = rows[0]["train/cross_entropy_error"]
    for target in evaluation_steps(max_steps, spec.evaluation.resolution)[1:]:
        indices = batches.take(target - step)
        tick = time.time()
        history = model.fit(x_train[indices], one_hot[indices], batch_size=trial.batch_size,
                            epochs=1, shuffle=False, verbose=0)
        train_seconds += time.time() - tick
        step = target
        rows.append(evaluate(step, started))
        loss = rows[-1]["train/cross_entropy_error"]
        if (not math.isfinite(history.history["loss"][-1]) or not math.isfinite(loss)
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
                f"val error {rows[-1]['val/classification_error']:.4f}")

    metadata.update(
        status=status, stop_reason=reason, steps=step,
        epochs=step * trial.batch_size / len(x_train),
        examples_per_second=step * trial.batch_size / train_seconds if train_seconds else None,
        wall_time=time.time() - started,
    )
    store.write_measurements(spec, trial, rows)
    store.write_metadata(spec, trial, metadata)  # written last: marks the trial done
    log(f"trial {trial.batch_size}/{trial.trial_id}: {status} ({reason}) after {step} steps, "
        f"{metadata['wall_time']:.1f}s")
    return metadata


def _load(store: StudyStore, dataset, split: str):
    images, labels = store.read_split(dataset.name, split)
    return (images.astype(np.float32) / dataset.pixel_max), labels


def _train_eval_subset(num_examples: int, size: int, seed: int) -> np.ndarray:
    """Fixed examples on which training metrics are measured (all when ``size`` is 0)."""
    if size == 0 or size >= num_examples:
        return np.arange(num_examples)
    return np.sort(np.random.default_rng(seed).choice(num_examples, size, replace=False))


def _logits(model, x: np.ndarray, chunk: int = 2048) -> np.ndarray:
    return np.concatenate([np.asarray(model.predict_on_batch(x[i:i + chunk]))
                           for i in range(0, len(x), chunk)])
