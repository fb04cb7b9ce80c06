"""How far a study has got, read from its store (for the console while it runs)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from batchscale.core.goals import first_step_reaching
from batchscale.core.spec import StudySpec
from batchscale.core.trial_state import is_finished
from batchscale.rounds.expected import later_round_trials
from batchscale.rounds.planner import trial_result
from batchscale.search.trials import batch_trials

MIN_FINISHED_FOR_ETA = 2  # trials finished in this run before a rate is worth quoting


@dataclass
class Progress:
    done: int
    total: int
    infeasible: int
    best_steps: dict[int, int | None]  # first goal, validation; None = not reached yet
    added: int = 0  # trials later search rounds added (top-ups, re-searches)
    running: int = 0  # in progress: taken up by a pack (metadata written), not finished
    eta_seconds: float | None = None  # for the trials known and ``later``; None: no rate measured yet
    later: float = 0.0  # trials later search rounds will likely add (``rounds.expected``)
    reused: int = 0  # finished before this run: found done at its first poll
    resumed: int = 0  # resumed from their checkpoints in this run (the task log says so)
    waiting: int = 0  # left to another writer that holds their leases (the task log says so)
    waiting_until: str = ""  # HH:MM:SS by which the last of those is taken over at the latest

    def line(self) -> str:
        """The counts and best steps: what changes when something happened (no clock)."""
        return f"trials {self.counts()} | best steps per batch size {self.best()}"

    def counts(self) -> str:
        """``100/115 done (12 re-used), 9 diverged, 15 added by later rounds, 5 resumed from
        checkpoints, 2 in progress, 1 waiting on another writer until 14:05:09``."""
        extra = f" ({self.reused} re-used)" if self.reused else ""
        extra += f", {self.infeasible} diverged" if self.infeasible else ""
        extra += f", {self.added} added by later rounds" if self.added else ""
        extra += f", {self.resumed} resumed from checkpoints" if self.resumed else ""
        extra += f", {self.running} in progress" if self.running else ""
        extra += (f", {self.waiting} waiting on another writer until {self.waiting_until}"
                  if self.waiting else "")
        return f"{self.done}/{self.total} done{extra}"

    def best(self) -> str:
        """Each batch size's fewest steps to the first goal so far (``-``: not reached)."""
        return " ".join(f"{b}:{'-' if s is None else s}" for b, s in self.best_steps.items())

    def eta(self) -> str:
        """``ETA 2m10s (incl. ~8 trials later rounds may add)``, or "" while too few trials
        finished to measure a rate."""
        time, later = self.eta_time(), self.eta_later()
        return f"{time} ({later})" if time and later else time

    def eta_time(self) -> str:
        """``ETA 2m10s``, or "" while too few trials finished to measure a rate."""
        return "" if self.eta_seconds is None else f"ETA {duration(self.eta_seconds)}"

    def eta_later(self) -> str:
        """``incl. ~8 trials later rounds may add``: what the ETA counts beyond the trials
        planned so far ("" when nothing, or no ETA)."""
        later = round(self.later)
        if self.eta_seconds is None or not later:
            return ""
        return f"incl. ~{later} trial{'s' if later != 1 else ''} later rounds may add"


def duration(seconds: float) -> str:
    """``45s``, ``2m10s``, ``3h05m``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class ProgressTracker:
    """Polls the store for the spec's trials; a finished trial is read once and only its
    first validation step beating the study's first goal is kept (``core.goals``' rule,
    the one steps to result uses).

    The ETA is the rate measured in this run: trials finished (not those re-used from an
    earlier run) per second since the first trial was seen training, over every pack at
    once, for the trials known so far and those later search rounds will likely add
    (``rounds.expected``: exactly what the planner will add to a batch size whose trials
    are all finished, an estimate for the rest).

    Each poll reads only the metadata of trials not yet finished, and the study.json of
    each batch size with none (the planner adds a search round only to a batch size whose
    trials have all finished), so polling stays cheap for studies of hundreds of trials
    on gs://.
    """

    def __init__(self, spec: StudySpec, store, clock=time.monotonic):
        self.spec, self.store, self.clock = spec, store, clock
        self.pending = []
        self.known: set[tuple[int, int]] = set()
        self.done = 0
        self.infeasible = 0
        self.best: dict[int, int | None] = dict.fromkeys(spec.batch_sizes)  # steps to result so far
        self.running = 0
        self.baseline: int | None = None  # trials found done at the first poll (re-used)
        self.rounds: dict[int, list] = {}  # each batch size's recorded search rounds
        self.results: dict[int, dict] = {b: {} for b in spec.batch_sizes}  # finished: TrialResult
        self.since: float | None = None  # when this run's first trial was seen training

    def poll(self) -> Progress:
        busy = {trial.batch_size for trial in self.pending}
        for batch_size in (b for b in self.spec.batch_sizes if b not in busy):
            rounds = self.rounds[batch_size] = self.store.read_rounds(self.spec, batch_size)
            for trial in batch_trials(self.spec, batch_size, rounds):
                if (trial.batch_size, trial.trial_id) in self.known:
                    continue
                self.known.add((trial.batch_size, trial.trial_id))
                self.pending.append(trial)
        still, running = [], 0
        for trial in self.pending:
            meta = self.store.read_metadata(self.spec, trial)
            if is_finished(meta, self.spec.max_steps[trial.batch_size]):
                self.done += 1
                diverged = meta["status"] == "INFEASIBLE"
                self.infeasible += diverged
                rows = [] if diverged else self.store.read_measurements(self.spec, trial)
                if meta["status"] == "COMPLETE":  # only COMPLETE trials count toward a goal
                    self._reached(trial.batch_size, rows)
                result = trial_result(self.spec, trial, diverged, rows)
                self.results[trial.batch_size][trial.trial_id] = result
            else:
                still.append(trial)
                running += meta is not None
        self.pending, self.running = still, running
        if self.baseline is None:
            self.baseline = self.done
        if self.since is None and (running or self.done > self.baseline):
            self.since = self.clock()
        return self.progress()

    def _reached(self, batch_size: int, rows: list[dict]) -> None:
        step = first_step_reaching(rows, self.spec.goals[0], "val")
        best = self.best.get(batch_size)
        if step is not None and (best is None or step < best):
            self.best[batch_size] = step

    def progress(self) -> Progress:
        later = self._later()
        return Progress(self.done, self.done + len(self.pending), self.infeasible, dict(self.best),
                        self._added(), self.running, self._eta(later), later,
                        self.baseline or 0)

    def _added(self) -> int:
        """Trials the rounds after round 1 hold, over the batch sizes read so far (a round 1
        that searched a fitted box is shorter than ``trials_per_batch_size``, so counting
        from that would miss its later rounds)."""
        return sum(len(r.trial_ids) for rounds in self.rounds.values() for r in rounds[1:])

    def _later(self) -> float:
        """Trials later rounds will likely add (0 with one round, or before a poll)."""
        if self.spec.max_rounds <= 1 or len(self.rounds) < len(self.spec.batch_sizes):
            return 0.0
        busy = {trial.batch_size for trial in self.pending}
        finished = {b: None if b in busy else list(self.results[b].values()) for b in self.rounds}
        return later_round_trials(self.spec, self.rounds, finished)

    def _eta(self, later: float) -> float | None:
        finished = self.done - (self.baseline or 0)
        left = len(self.pending) + later
        if self.since is None or left <= 0 or finished < MIN_FINISHED_FOR_ETA:
            return None
        return left * (self.clock() - self.since) / finished


@dataclass
class ExperimentProgress(Progress):
    """An experiment's progress: the counts over its studies, and each study's best steps
    per batch size (``studies``: label -> that study's Progress)."""

    studies: dict | None = None

    def best(self) -> str:
        return " | ".join(f"{label} {p.best()}" for label, p in (self.studies or {}).items())


class ExperimentTracker:
    """One ``ProgressTracker`` per study of an experiment, read as one: trials summed over
    the studies, each study's best steps per batch size, and one ETA from the rate of all
    the trials finished in this run (the studies' packs share one pool)."""

    def __init__(self, experiment, stores: dict, clock=time.monotonic):
        self.clock = clock
        self.trackers = {s.label: ProgressTracker(s.spec, stores[s.label], clock)
                         for s in experiment.studies}

    @property
    def results(self) -> dict[int, dict]:
        """Finished trials by batch size, over the studies (the console's lease waits)."""
        merged: dict[int, dict] = {}
        for tracker in self.trackers.values():
            for batch_size, done in tracker.results.items():
                merged.setdefault(batch_size, {}).update(done)
        return merged

    def poll(self) -> ExperimentProgress:
        for tracker in self.trackers.values():
            tracker.poll()
        return self.progress()

    def progress(self) -> ExperimentProgress:
        parts = {label: t.progress() for label, t in self.trackers.items()}
        later = sum(p.later for p in parts.values())
        total = sum(p.total for p in parts.values())
        done = sum(p.done for p in parts.values())
        baseline = sum(t.baseline or 0 for t in self.trackers.values())
        starts = [t.since for t in self.trackers.values() if t.since is not None]
        eta = None
        if starts and done - baseline >= MIN_FINISHED_FOR_ETA and total - done + later > 0:
            eta = (total - done + later) * (self.clock() - min(starts)) / (done - baseline)
        return ExperimentProgress(
            done, total, sum(p.infeasible for p in parts.values()), {},
            sum(p.added for p in parts.values()), sum(p.running for p in parts.values()), eta,
            later, baseline, studies=parts)
