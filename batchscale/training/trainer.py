"""Train one trial with Keras ``fit`` (the fit engine): the study's optimizer and schedule,
evaluation on a geometric grid, stopped by the one stopping rule (``stop_rule``),
divergence recorded as data (status INFEASIBLE). What the trial writes to the store, and
when, is its ``trial_lifecycle.TrialLife``'s, the same as under the pack engine
(``pack_loop``); this module never imports the store.

Written against Keras 3's backend-agnostic API, so the same code runs on the JAX and
TensorFlow backends, on one device or data-parallel over a pod's accelerators (see
``keras_setup``). Every data set arrives through an input pipeline
(``batchscale.workloads.inputs``): in-memory ones are trained many steps per ``fit``
call from arrays (no TensorFlow needed on JAX), streamed ones from their batch iterator.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
import zlib

import numpy as np

from batchscale.core.names import OPTIMIZER_DEFAULTS, OPTIMIZER_PARAMETERS
from batchscale.core.spec import StudySpec, TrialSpec
from batchscale.training.distributed import Team
from batchscale.training.evaluation_grid import evaluation_steps
from batchscale.training.keras_setup import (
    make_loss,
    process_rows,
    seed_keras,
    select_backend,
    training_scope,
)
from batchscale.training.signals import Stopped
from batchscale.training.task_losses import VMAPPED_TASKS, loss_targets
from batchscale.training.trial_lifecycle import (
    FLUSH_SECONDS,
    TrialLife,
    crossing_board,
    team_finished_trial,
    trial_metadata,
)
from batchscale.workloads import build_model
from batchscale.workloads.data_order import EpochPermutations
from batchscale.workloads.dataset_registry import dataset_for, open_pipeline

CHUNK_SECONDS = 2.0  # about how long one fit call trains: how soon a stop is noticed


def trial_seed(spec: StudySpec, trial: TrialSpec) -> int:
    """A stable per-trial seed: initialisation, dropout and data order depend on it."""
    return zlib.crc32(f"{spec.seed}/{trial.batch_size}/{trial.trial_id}".encode()) & 0x7FFFFFFF


def resolve_parameters(parameters: dict, max_steps: int, optimizer: str | None = None) -> dict:
    """The trial's metaparameters as the trainer uses them: ``decay_fraction`` (a search
    space that transfers across batch sizes) becomes ``decay_steps`` of this budget, and
    every metaparameter ``optimizer`` reads that the spec neither searched nor fixed takes
    its default (``OPTIMIZER_DEFAULTS``), so metadata.json records each value a trial used."""
    params = {**OPTIMIZER_DEFAULTS.get(optimizer, {}), **parameters}
    if "decay_fraction" in params:
        params["decay_steps"] = max(1, round(params.pop("decay_fraction") * max_steps))
    return params


def run_trial(spec: StudySpec, trial: TrialSpec, store, log=print, stop=None,
              team: Team | None = None) -> dict:
    """Train ``trial`` unless the store holds it finished (``core.trial_state``: COMPLETE
    or INFEASIBLE, and not stopped at a budget since raised); return its metadata.

    Resumes from the trial's checkpoint when it has one, and keeps one while it trains
    (every ``spec.checkpoint_seconds``); ``stop`` (a ``signals.StopRequest``, set by
    SIGTERM) makes it checkpoint and raise ``Stopped`` at the end of the current fit call.
    What it writes, and when, is its ``TrialLife``'s (``store``: the study's store, which
    only the lifecycle and the input pipeline read).

    ``team``: the processes that train the trial together (``distributed``; default this
    one alone). Each feeds its rows of every global batch, the writer (process 0) writes,
    and after each chunk they agree on its length, on finiteness and on a stop
    (``Team.chunk``), so all stop at one step.
    """
    team = team or Team.solo()
    existing = team_finished_trial(store, spec, trial, log, team)
    if existing is not None:
        return existing

    select_backend(spec.backend)
    from batchscale.training.evaluator import Evaluator
    from batchscale.training.optimizer import make_optimizer
    from batchscale.training.schedules import make_keras_schedule

    pipeline = open_pipeline(store, dataset_for(spec.workload), spec.workload.options)
    seed = trial_seed(spec, trial)
    max_steps = spec.max_steps[trial.batch_size]
    params = resolve_parameters(trial.parameters, max_steps, spec.workload.optimizer)

    seed_keras(seed, spec.backend)
    with training_scope(spec.backend, spec.workload.precision, trial.batch_size, log) as replicas:
        model = build_model(spec.workload.model, pipeline.input_shape, pipeline.num_outputs,
                            task=pipeline.task, parameters=params)
        settings = {k: params[k] for k in OPTIMIZER_PARAMETERS[spec.workload.optimizer]
                    if k != "momentum" and k in params}  # the Adam family's
        optimizer = make_optimizer(spec.workload.optimizer, make_keras_schedule(spec.schedule, params),
                                   params.get("momentum", 0.0), params.get("l2_penalty", 0.0),
                                   **settings)
        model.compile(optimizer=optimizer, loss=make_loss(pipeline.task, params.get("label_smoothing", 0.0)))
        evaluate = Evaluator(model, pipeline, spec.evaluation.train_examples, seed, replicas)
        train = _Trainer(model, pipeline, trial.batch_size, seed, process_rows(trial.batch_size))

        life = TrialLife(store, spec, trial, params,
                         trial_metadata(spec, trial, params, max_steps, replicas, "fit",
                                        processes=team.size), log,
                         crossing_board(store, spec, trial.batch_size), team)
        watched = f"val/{spec.goals[0].metric}"
        grid = evaluation_steps(max_steps, spec.evaluation.resolution)

        started = time.time()
        checkpoint = life.start()
        if checkpoint is not None:
            _restore(model, optimizer, checkpoint.arrays)
            train.restore(checkpoint.state["order"], checkpoint.arrays.get("order"), life.step)
        else:
            life.record(evaluate(0, started))

        def snapshot() -> tuple[dict, dict]:
            order_state, order = train.state()
            arrays = {**_variables(model, optimizer), **({"order": order} if order is not None else {})}
            return arrays, {"order": order_state}

        life.hold(snapshot)
        deadline = stop.on_deadline(life.write_held) if stop is not None else None
        try:
            outcome = _train_to_outcome(spec, life, train, evaluate, snapshot, grid, stop, log,
                                        started, watched, max_steps, team)
            if outcome is None:  # e.g. resumed at its budget, evaluated: nothing left to train
                outcome = life.outcome(final=True)
            # a deadline that falls in the finish waits for its commit point
            with stop.committing() if stop is not None else contextlib.nullcontext():
                return life.finish(outcome, pipeline.num_train_examples, time.time() - started,
                                   snapshot)
        finally:
            if deadline is not None:
                stop.forget(deadline)


def _train_to_outcome(spec, life, train, evaluate, snapshot, grid, stop, log, started, watched,
                      max_steps, team: Team):
    """Train and evaluate along ``grid`` until the trial has an outcome (None: nothing
    left to train); a stop request checkpoints here and raises ``Stopped``, before an
    evaluation too (one may outlast the notice: the resumed trial evaluates there).
    Several processes (``team``) agree on each chunk and on each stop (``Team``)."""
    last_flush = last_checkpoint = time.time()
    for target in grid[1:]:
        if target < life.step or (target == life.step and life.evaluated()):
            continue  # resumed past this evaluation
        while life.step < target:
            tick = time.time()
            n = train.steps_for(target - life.step)
            finite, stopping, train.seconds_per_step = team.chunk(
                math.isfinite(train(n)), _requested(stop), train.seconds_per_step)
            life.trained(life.step + n, time.time() - tick, finite)
            if stopping:
                _stop(life, snapshot, stop, log, team)
            if time.time() - last_checkpoint >= spec.checkpoint_seconds:
                life.checkpoint(snapshot)
                last_checkpoint = time.time()
        if team.stop(_requested(stop)):
            _stop(life, snapshot, stop, log, team)
        life.record(evaluate(life.step, started))
        outcome = life.outcome()
        if outcome is not None:
            return outcome
        life.hold(snapshot)
        if time.time() - last_flush > FLUSH_SECONDS:
            life.flush()
            last_flush = time.time()
            log(f"{life.label}: step {life.step}/{max_steps} {watched} {life.rows[-1][watched]:.4f}")
    return None


def _requested(stop) -> bool:
    return stop is not None and stop.requested


def _stop(life, snapshot, stop, log, team: Team) -> None:
    """Checkpoint (the writer) and raise ``Stopped``: this process, or another of its
    team, was asked to stop."""
    with stop.final_checkpoint() if stop is not None else contextlib.nullcontext():
        life.checkpoint(snapshot)
    done = "checkpointed" if team.writer else "left to process 0 to checkpoint"
    log(f"{life.label}: stopped at step {life.step} and {done}; run it again to resume")
    raise Stopped(f"stopped at step {life.step}")


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

    ``rows``: this process's rows of every global batch (``keras_setup.process_rows``):
    several processes draw the same batches and each feeds its share to ``fit``.
    """

    def __init__(self, model, pipeline, batch_size: int, seed: int, rows: slice = slice(None)):
        self.model, self.pipeline, self.batch_size, self.rows = model, pipeline, batch_size, rows
        self.share = len(range(batch_size)[rows])
        self.seconds_per_step = None
        # One-hot rows for softmax labels, made once per trial (never for a 32k vocabulary).
        self.eye = (np.eye(pipeline.num_outputs, dtype=np.float32)
                    if pipeline.task == "classification" else None)
        self.arrays = pipeline.in_memory and pipeline.task in VMAPPED_TASKS
        if self.arrays:
            self.x, y = pipeline.arrays("train")
            self.targets = loss_targets(pipeline.task, y, pipeline.num_outputs)
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
            indices = self.order.take(steps).reshape(steps, self.batch_size)[:, self.rows].ravel()
            history = self.model.fit(self.x[indices], self.targets[indices],
                                     batch_size=self.share, epochs=1, shuffle=False, verbose=0)
        else:
            feed = (_model_batch(tuple(part[self.rows] for part in b), self.pipeline.task,
                                 self.eye, self.length)
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
    regression targets as (B, k); token batches padded to the training length, so the
    model sees one shape."""
    if task == "classification":
        return batch[0], eye[batch[1]]
    if task == "regression":
        return batch[0], loss_targets(task, batch[1], 0), *batch[2:]
    if task == "language_model" and length and batch[0].shape[1] < length:
        pad = ((0, 0), (0, length - batch[0].shape[1]))
        return tuple(np.pad(part, pad) for part in batch)
    return batch
