"""Train a pack of trials of one batch size in one process: ``run_pack``.

A pack pays imports, data loading and compilation once for all its trials. On the JAX
backend, with in-memory classification data on one device, its trials train together
in one jitted step vmapped over them (``pack_loop``); otherwise (TensorFlow backend, a
trial spread data-parallel over several devices, streamed or non-classification data)
they train one after another in this process with the per-trial trainer.

Either way each trial stays its own: its own seed, data order, metaparameters,
metadata.json and measurements.csv, in the same layout as a trial trained alone, and a
trial that is COMPLETE or INFEASIBLE in the store is re-used, never retrained.

SIGTERM (a spot node's preemption notice, ``batchscale run --local``'s Ctrl-C) asks the
pack to stop: at the end of the chunk it is training, every unfinished trial is
checkpointed and the process exits with status 143; running the pack again resumes
every trial from its checkpoint, step for step.
"""

from __future__ import annotations

from batchscale.core.names import DONE_STATUSES
from batchscale.core.spec import StudySpec, TrialSpec
from batchscale.store.checkpoints import delete_checkpoint
from batchscale.store.layout import StudyStore
from batchscale.training.stopping import Stopped, stop_on_sigterm


def run_pack(spec: StudySpec, trials: list[TrialSpec], store: StudyStore, log=print,
             width: int | None = None) -> list[dict]:
    """Train (or re-use, or resume) every trial of a pack; return each trial's metadata,
    in the order given. Divergence is a status (INFEASIBLE), never an exception; a
    SIGTERM checkpoints the unfinished trials and raises ``Stopped``. ``width``: how many
    trials train vmapped at once (default ``pack_loop.vmap_width``: all on an accelerator,
    one on a CPU); benchmarks and tests set it."""
    results: dict[int, dict] = {}
    todo = []
    for trial in trials:
        meta = store.read_metadata(spec, trial)
        if meta and meta.get("status") in DONE_STATUSES:
            log(f"trial {trial.batch_size}/{trial.trial_id}: already {meta['status']}, re-used")
            # a pack killed between a trial's final metadata and its checkpoint's removal
            delete_checkpoint(store, spec, trial)
            results[trial.trial_id] = meta
        else:
            todo.append(trial)
    if todo:
        with stop_on_sigterm() as stop:
            for meta in _train(spec, todo, store, log, stop, width):
                results[meta["trial_id"]] = meta
    return [results[trial.trial_id] for trial in trials]


def _train(spec: StudySpec, trials: list[TrialSpec], store: StudyStore, log, stop,
           width: int | None) -> list[dict]:
    from batchscale.training.keras_setup import select_backend
    from batchscale.workloads import get_dataset
    from batchscale.workloads.dataset_registry import open_pipeline

    select_backend(spec.backend)
    pipeline = open_pipeline(store, get_dataset(spec.workload.dataset), spec.workload.options)
    if vmappable(spec, pipeline, trials[0].batch_size):
        from batchscale.training.pack_loop import train_together

        return train_together(spec, trials, store, pipeline, log, stop, width)
    from batchscale.training.trainer import run_trial

    out = []
    for trial in trials:
        if stop.requested:
            raise Stopped(f"stopped before trial {trial.batch_size}/{trial.trial_id}")
        out.append(run_trial(spec, trial, store, log, stop))
    return out


def vmappable(spec: StudySpec, pipeline, batch_size: int) -> bool:
    """Whether the pack's trials can train vmapped together: the JAX backend, in-memory
    classification data, and one device per trial (a trial spread data-parallel over
    several devices trains alone)."""
    if spec.backend != "jax" or not pipeline.in_memory or pipeline.task != "classification":
        return False
    from batchscale.training.keras_setup import replicas_for, training_devices

    return replicas_for(batch_size, len(training_devices())) == 1
