"""Train a pack of trials of one batch size in one process: ``run_pack``.

A pack pays imports, data loading and compilation once for all its trials. On the JAX
backend, with in-memory classification or regression data on one device, its trials train together
in one jitted step vmapped over them (``pack_loop``); otherwise (TensorFlow backend, a
trial spread data-parallel over several devices, streamed data, other tasks)
they train one after another in this process with the per-trial trainer.

Either way each trial stays its own: its own seed, data order, metaparameters,
metadata.json and measurements.csv, in the same layout as a trial trained alone, and a
trial that is COMPLETE or INFEASIBLE in the store is re-used, never retrained, unless it
stopped at a budget the study has since raised: it continues from the checkpoint it kept
(``batchscale.core.trial_state``).

SIGTERM (a spot node's preemption notice, ``batchscale run --local``'s Ctrl-C) asks the
pack to stop: at the end of the chunk it is training, every unfinished trial is
checkpointed and the process exits with status 143; running the pack again resumes
every trial from its checkpoint, step for step.
"""

from __future__ import annotations

import time

from batchscale.core.spec import StudySpec, TrialSpec
from batchscale.training.signals import Stopped, stop_on_sigterm
from batchscale.training.trial_lifecycle import TrialLeases, finished_trial

WAIT_POLL_SECONDS = 5.0  # how often a pack looks again at trials another writer trains


def run_pack(spec: StudySpec, trials: list[TrialSpec], store, log=print,
             width: int | None = None) -> list[dict]:
    """Train (or re-use, or resume) every trial of a pack; return each trial's metadata,
    in the order given. Divergence is a status (INFEASIBLE), never an exception; a
    SIGTERM checkpoints the unfinished trials and raises ``Stopped``. ``width``: how many
    trials train vmapped at once (default ``pack_loop.vmap_width``: all on an accelerator,
    one on a CPU); benchmarks and tests set it.

    A trial trains only under its lease (``trial_lifecycle.TrialLeases``): a trial another
    live writer is training is left to it, and re-used once it is finished (or taken over
    once that writer's lease expires). ``store``: the study's store, which this module
    hands on (to the lifecycle and the input pipeline) and never reads itself."""
    results: dict[int, dict] = {}
    pending = list(trials)
    leases = TrialLeases(store, spec, log)
    with stop_on_sigterm() as stop:
        try:
            while pending:
                todo, waiting = [], []
                for trial in pending:
                    meta = finished_trial(store, spec, trial, log)
                    if meta is None and leases.acquire(trial):
                        meta = finished_trial(store, spec, trial, quiet)  # finished just before?
                        if meta is not None:
                            leases.release(trial)
                    if meta is not None:
                        results[trial.trial_id] = meta
                    elif leases.holds(trial):
                        todo.append(trial)
                    else:
                        waiting.append(trial)
                if todo:
                    for meta in _train(spec, todo, store, log, stop, width):
                        results[meta["trial_id"]] = meta
                    for trial in todo:
                        leases.release(trial)
                pending = waiting
                if pending:
                    _wait_for_others(pending, leases, log, stop)
        finally:
            leases.release_all()  # a stopped pack's trials are free for the next run at once
    return [results[trial.trial_id] for trial in trials]


def quiet(*_) -> None:
    """A log that says nothing (a second look at a trial already reported)."""


def _wait_for_others(trials: list[TrialSpec], leases: TrialLeases, log, stop) -> None:
    """Wait while other writers hold these trials' leases (until one is given back or
    expires, or a stop is requested)."""
    holders = sorted({leases.holder(t) or "?" for t in trials})
    log(f"{len(trials)} trial(s) of this pack are being trained by another writer "
        f"({', '.join(holders)}); waiting for them")
    deadline = time.monotonic() + WAIT_POLL_SECONDS
    while time.monotonic() < deadline:
        if stop.requested:
            raise Stopped(f"stopped while waiting for {len(trials)} trial(s) of another writer")
        if any(leases.holder(t) is None for t in trials):
            return
        time.sleep(1.0)


def _train(spec: StudySpec, trials: list[TrialSpec], store, log, stop,
           width: int | None) -> list[dict]:
    from batchscale.training.keras_setup import select_backend
    from batchscale.workloads.dataset_registry import dataset_for, open_pipeline

    select_backend(spec.backend)
    pipeline = open_pipeline(store, dataset_for(spec.workload), spec.workload.options)
    if vmappable(spec, pipeline, trials[0].batch_size):
        from batchscale.training.pack_loop import train_together
        from batchscale.training.step_timing import profile_pack

        done = train_together(spec, trials, store, pipeline, log, stop, width)
        # trials that shared each step did not time one run alone: a probe does
        shared = max(meta.get("trained_together", 1) for meta in done)
        profile_pack(spec, store, pipeline, trials[0].batch_size, shared, log)
        return done
    from batchscale.training.step_timing import profile_devices
    from batchscale.training.trainer import run_trial

    out = []
    for trial in trials:
        if stop.requested:
            raise Stopped(f"stopped before trial {trial.batch_size}/{trial.trial_id}")
        out.append(run_trial(spec, trial, store, log, stop))
    # a data-parallel trial timed itself on its device count; the others are probed
    profile_devices(spec, store, pipeline, trials[0].batch_size,
                    max(meta.get("replicas", 1) for meta in out), log)
    return out


def vmappable(spec: StudySpec, pipeline, batch_size: int) -> bool:
    """Whether the pack's trials can train vmapped together: the JAX backend, in-memory
    classification or regression data (``task_losses.VMAPPED_TASKS``), and one device per
    trial (a trial spread data-parallel over several devices trains alone). Trials of a
    user's model whose model parameters differ train in separate vmapped groups
    (``pack_loop.train_together``)."""
    from batchscale.training.task_losses import VMAPPED_TASKS

    if spec.backend != "jax" or not pipeline.in_memory or pipeline.task not in VMAPPED_TASKS:
        return False
    from batchscale.training.keras_setup import replicas_for, training_devices

    return replicas_for(batch_size, len(training_devices())) == 1
