"""Train a pack of trials in one process: ``run_pack``.

A pack pays imports, data loading and compilation once for all its trials. On the JAX
backend, with in-memory classification or regression data on one device, its trials train together
in one jitted step vmapped over them (``pack_loop``); otherwise (TensorFlow backend, a
trial spread data-parallel over several devices, streamed data, other tasks)
they train one after another in this process with the per-trial trainer.

A pack may hold trials of several batch sizes (the planner groups small ones): they train
as one mixed-batch pack, each group's batch padded to its largest batch size and each
trial's loss masked to its own rows (``mixed_step``), when they can be mixed (``mixable``)
and a timed probe cached in the study's profile says it pays (``mixed_probe``); otherwise
each batch size's trials train as a pack of their own, one batch size after another.

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
from dataclasses import replace

from batchscale.core.spec import StudySpec, TrialSpec
from batchscale.training.signals import Stopped, stop_on_sigterm
from batchscale.training.trial_lifecycle import TrialLeases

WAIT_POLL_SECONDS = 5.0  # how often a pack looks again at trials another writer trains
WAIT_REPEAT_SECONDS = 60.0  # how often it says again that it still waits (new deadline)


def run_pack(spec: StudySpec, trials: list[TrialSpec], store, log=print,
             width: int | None = None, lease_seconds: float | None = None) -> list[dict]:
    """Train (or re-use, or resume) every trial of a pack; return each trial's metadata,
    in the order given. Divergence is a status (INFEASIBLE), never an exception; a
    SIGTERM checkpoints the unfinished trials and raises ``Stopped``. ``width``: how many
    trials train vmapped at once (default: measured, ``pack_mode``: all of them, up to the
    workload's ``pack_capacity``, where a probe finds that faster than taking turns, else
    one at a time; a mixed-batch group at least one per batch size); benchmarks and
    tests set it. ``trials`` may be of several batch sizes (``_train_sizes``).

    A trial trains only under its lease (``trial_lifecycle.TrialLeases``): a trial another
    live writer is training is left to it, and re-used once it is finished (or taken over
    once that writer's lease expires; ``lease_seconds``: how long a lease binds without
    renewal, default ``store.leases.LEASE_SECONDS``). ``store``: the study's store, which
    this module hands on (to the lifecycle and the input pipeline) and never reads itself."""
    from batchscale.training.pack_mode import forced_mode

    forced_mode()  # a value BATCHSCALE_PACK_MODE does not allow: refused before any write
    results: dict[tuple[int, int], dict] = {}  # by (batch size, trial id): a mixed pack's ids repeat
    pending = list(trials)
    leases = TrialLeases(store, spec, log, lease_seconds)
    notice = WaitNotice(log)
    with stop_on_sigterm() as stop:
        try:
            while pending:
                todo, waiting = [], []
                for trial in pending:
                    meta = leases.claim(store, trial, log)
                    if meta is not None:
                        results[trial.batch_size, trial.trial_id] = meta
                    elif leases.holds(trial):
                        todo.append(trial)
                    else:
                        waiting.append(trial)
                if todo:
                    for meta in _train_sizes(spec, todo, store, log, stop, width):
                        results[meta["batch_size"], meta["trial_id"]] = meta
                    for trial in todo:
                        leases.release(trial)
                pending = waiting
                if pending:
                    _wait_for_others(pending, leases, notice, stop)
            if stop.requested:  # came after the loops' last look (re-use, a trial's finish)
                raise Stopped("stopped: the pack's trials are finished or checkpointed; "
                              "its task ends here")
        finally:
            leases.release_all()  # a stopped pack's trials are free for the next run at once
    return [results[trial.batch_size, trial.trial_id] for trial in trials]


def quiet(*_) -> None:
    """A log that says nothing (a second look at a trial already reported)."""


class WaitNotice:
    """What a pack says about the trials it waits for: one line per other writer, naming
    its trials (``B/ID``), the writer and the time by which its lease is taken over at
    the latest (``lease: trials 16/1, 16/2 wait on another writer (HOST:PID:ID); taken
    over by 14:05:09 unless it renews its lease``; ``run --local``'s console reads it).
    Said when the trials or writers waited for change, and again every
    ``WAIT_REPEAT_SECONDS`` while they do not (a live writer's renewals move the time)."""

    def __init__(self, log):
        self.log, self.said, self.at = log, None, -WAIT_REPEAT_SECONDS

    def say(self, holdings: list) -> None:
        """``holdings``: (trial, ``store.leases.Holding`` of another writer) pairs."""
        by_owner: dict[str, list] = {}
        for trial, holding in holdings:
            by_owner.setdefault(holding.owner, []).append((f"{trial.batch_size}/{trial.trial_id}",
                                                           holding.until))
        said = sorted((owner, [name for name, _ in waits]) for owner, waits in by_owner.items())
        if said == self.said and time.monotonic() - self.at < WAIT_REPEAT_SECONDS:
            return
        self.said, self.at = said, time.monotonic()
        for owner, waits in by_owner.items():
            until = time.strftime("%H:%M:%S", time.localtime(max(u for _, u in waits)))
            many = len(waits) > 1
            self.log(f"lease: trial{'s' if many else ''} {', '.join(n for n, _ in waits)} "
                     f"wait{'' if many else 's'} on another writer ({owner}); "
                     f"taken over by {until} unless it renews its lease")


def _wait_for_others(trials: list[TrialSpec], leases: TrialLeases, notice: WaitNotice,
                     stop) -> None:
    """Wait while other writers hold these trials' leases (until one is given back or
    expires, or a stop is requested), saying so (``WaitNotice``)."""
    deadline = time.monotonic() + WAIT_POLL_SECONDS
    while True:
        if stop.requested:
            raise Stopped(f"stopped while waiting for {len(trials)} trial(s) of another writer")
        holdings = [(t, leases.holding(t)) for t in trials]
        if any(h is None for _, h in holdings) or time.monotonic() >= deadline:
            return
        notice.say(holdings)
        time.sleep(1.0)


def _train_sizes(spec: StudySpec, trials: list[TrialSpec], store, log, stop,
                 width: int | None) -> list[dict]:
    """Train a pack's trials of one or several batch sizes: several as one mixed-batch
    pack when they can be mixed (``mixable``) and the study's pack-mode record (or a
    probe now: ``mixed_probe.mixed_chosen``) says it pays, else each batch size's trials
    as a pack of its own, one batch size after another. A pack of one small batch size
    (``mixed_step.SMALL_BATCH``) in a study with other small batch sizes probes them once
    (``_probe_small``), so the planner can mix them at later stages: only where its own
    trials trained vmapped (``pack_mode``). A mixed group is a vmapped step padded to the
    largest batch, so where vmapping the smallest batch size's trials did not pay its
    margin against turns, mixing it with larger ones cannot: the probe would cost a study
    seconds (3.5-20 s on 2 CPU cores) to learn nothing."""
    from batchscale.training.mixed_probe import mixed_chosen

    sizes = list(dict.fromkeys(trial.batch_size for trial in trials))
    if len(sizes) > 1:
        pipeline = _open(spec, store)
        w = mixed_width(spec, sizes, width)
        if mixable(spec, pipeline, trials, log) and mixed_chosen(spec, store, pipeline, sizes, w, log):
            return _train_mixed(spec, trials, store, pipeline, log, stop, w)
    out = []
    for size in sizes:
        out += _train(spec, [t for t in trials if t.batch_size == size], store, log, stop, width)
    if len(sizes) == 1 and any(meta.get("pack_mode") == "vmapped" for meta in out):
        _probe_small(spec, trials, store, log, width)
    return out


def _open(spec: StudySpec, store):
    """The study's input pipeline, on its backend."""
    from batchscale.training.keras_setup import select_backend
    from batchscale.workloads.dataset_registry import dataset_for, open_pipeline

    select_backend(spec.backend)
    return open_pipeline(store, dataset_for(spec.workload), spec.workload.options)


def _train_mixed(spec: StudySpec, trials: list[TrialSpec], store, pipeline, log, stop,
                 w: int) -> list[dict]:
    """One mixed-batch pack, ``w`` slots a group: its trials ordered by (trial id, batch
    size), so each group holds the batch sizes in turn, and a pack run again after a stop
    puts its fresh trials into the groups they had; then a step-time probe per batch size
    (its trials shared each step: none timed one run alone)."""
    from batchscale.training.pack_loop import train_together
    from batchscale.training.step_timing import profile_pack

    ordered = sorted(trials, key=lambda t: (t.trial_id, t.batch_size))
    done = train_together(spec, ordered, store, pipeline, log, stop, w)
    for size in sorted({t.batch_size for t in trials}):
        profile_pack(spec, store, pipeline, size, w, log)
    return done


def mixed_width(spec: StudySpec, batch_sizes, width: int | None) -> int:
    """Slots of a mixed-batch group: ``width`` (default ``mixed_probe.separate_width``), and
    at least one per batch size (a CPU's width of one would mix nothing)."""
    from batchscale.training.mixed_probe import separate_width

    return max(width or separate_width(spec), len(set(batch_sizes)))


def mixable(spec: StudySpec, pipeline, trials: list[TrialSpec], log=print) -> bool:
    """Whether ``trials`` (of several batch sizes) can train in mixed-batch groups with
    each trial's update exactly its own batch's: the vmapped engine applies to every
    batch size (``vmappable``), they share one model (a user's model function with
    differing model parameters does not), and the model's rows do not see each other in
    training (``mixed_step.exact_under_padding``: no batch normalisation; dropout only
    where its draws are per element), checked by running the model once."""
    from batchscale.training.keras_setup import training_scope
    from batchscale.training.mixed_step import exact_under_padding
    from batchscale.training.pack_loop import _model_key
    from batchscale.workloads import build_model

    sizes = {t.batch_size for t in trials}
    if len(sizes) < 2 or not all(vmappable(spec, pipeline, size) for size in sizes):
        return False
    if len({_model_key(t) for t in trials}) > 1:
        return False
    with training_scope(spec.backend, spec.workload.precision, 1, log):
        model = build_model(spec.workload.model, pipeline.input_shape, pipeline.num_outputs,
                            task=pipeline.task, parameters=trials[0].parameters)
        exact = exact_under_padding(model, pipeline.arrays("train")[0][:4])
    if not exact:
        log(f"model {spec.workload.model}: its rows see each other in training (batch "
            "normalisation, or random draws that depend on the batch's shape): "
            "batch sizes train in packs of their own, not mixed")
    return exact


def _probe_small(spec: StudySpec, trials: list[TrialSpec], store, log, width) -> None:
    """After a pack of the study's smallest batch size: probe once whether its small batch
    sizes (``mixed_step.SMALL_BATCH`` or less) train faster mixed (``mixed_chosen``
    writes the record the planner reads); nothing when there is a record already, fewer
    than two small batch sizes, or they cannot be mixed."""
    from batchscale.training.mixed_probe import mixed_chosen, pack_mode_record
    from batchscale.training.mixed_step import SMALL_BATCH

    small = sorted(b for b in spec.batch_sizes if b <= SMALL_BATCH)
    if len(small) < 2 or trials[0].batch_size != small[0]:
        return  # only the smallest's pack probes: packs running at once probe once
    w = mixed_width(spec, small, width)
    if pack_mode_record(spec, store, small, w) is not None:
        return
    pipeline = _open(spec, store)
    if mixable(spec, pipeline, [replace(trials[0], batch_size=b) for b in small], quiet):
        mixed_chosen(spec, store, pipeline, small, w, log)


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
