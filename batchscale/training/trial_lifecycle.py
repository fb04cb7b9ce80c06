"""One trial's durable life in the store, the same whichever engine trains it.

Two engines train trials: ``trainer.run_trial`` (Keras ``fit``, one trial at a time) and
``pack_loop`` (a pack's trials vmapped together). They differ in how they train; what a
trial leaves in the store must not differ at all, so it is written here and only here.
The engines never import ``batchscale.store`` (``tests/unit/test_training_layers.py``):
they drive a ``TrialLife`` and hand it what only they know (evaluation rows, model and
data-order arrays for a checkpoint).

A trial's life, in the order its writes happen:

* ``start``: its checkpoint, if it has one and it is this trial's (``read_checkpoint``
  compares the identity it carries; another trial's, study's or larger budget's is named
  in one line and ignored), restores step, rows, training time and finiteness (the engine
  restores its arrays from what ``start`` returns); then its metadata.json says
  INCOMPLETE, before any other write: a budget-stopped trial that continues must not
  keep a finished record that its growing files contradict.
* ``trained`` / ``record``: progress and evaluation rows, in memory.
* ``flush`` (every ``FLUSH_SECONDS``, engine's clock) and ``checkpoint`` (every
  ``spec.checkpoint_seconds`` and on a stop request): measurements.csv, the INCOMPLETE
  metadata with its steps, and the TensorBoard live curves; a checkpoint is written first.
* ``outcome``: the one stopping rule (``stop_rule.trial_outcome``), with the crossings
  of its batch size under a protocol that races. Once an engine has nothing left to
  train (``outcome(final=True)``) an outcome is due: a trial without one raises
  ``StuckTrial`` naming it and its checkpoint, so no run ends with a trial that the next
  run would resume to the same place.
* ``finish``: a budget-stopped trial's checkpoint (a larger budget continues from it),
  the final measurements, its goal crossings (a COMPLETE trial under a protocol that
  races), then the final metadata with the measurements' integrity record: the one
  commit point. Only then is a spent checkpoint removed.

A crash right after any of these writes leaves the trial finished, or INCOMPLETE and
resumable to the result an uninterrupted run records: before the commit the trial
resumes from its last checkpoint (one at its budget, evaluated there, finishes at once:
its engine has nothing left to train; its measurements and crossings are written again,
the same), after it
the trial is re-used (``finished_trial``, which removes a checkpoint it no longer
needs). tests/integration/test_faults_commit.py crashes a trial after each write.

Several processes may train one trial (a multi-host trial, ``distributed``): each has a
``TrialLife`` with the same progress, rows and decisions, taken from the writer's where
they could differ (``Team``: rows, outcome, a resumed step), and only the writer's
writes: the others read the trial's checkpoint to resume from it and write nothing.

``TrialLeases``: which trials a pack trains, under the store's leases.
"""

from __future__ import annotations

from collections.abc import Callable

from batchscale.core.goals import first_step_reaching
from batchscale.core.names import effective_learning_rate
from batchscale.core.protocols import STOP_BUDGET, STOP_DIVERGED, STOP_GOAL, STOP_RACE
from batchscale.core.spec import StudySpec, TrialSpec
from batchscale.core.trial_state import continues, is_finished, keeps_checkpoint
from batchscale.store.checkpoints import (
    Checkpoint,
    checkpoint_path,
    delete_checkpoint,
    read_checkpoint,
    write_checkpoint,
)
from batchscale.store.crossings import CrossingBoard, checked_board
from batchscale.store.layout import StudyStore
from batchscale.store.leases import LEASE_SECONDS, Holding, Leases, lease_dir
from batchscale.training.distributed import Team
from batchscale.training.keras_setup import hardware
from batchscale.training.live_curves import TrialCurves
from batchscale.training.stop_rule import trial_outcome

FLUSH_SECONDS = 5.0  # how often an engine flushes a trial's progress to the store
# an outcome as a small integer, for processes to agree on (``Team.same_code``)
_OUTCOMES = (None, ("INFEASIBLE", STOP_DIVERGED), ("COMPLETE", STOP_GOAL),
             ("COMPLETE", STOP_BUDGET), ("COMPLETE", STOP_RACE))

# What an engine saves of a trial beside its progress: (named arrays, JSON-able state).
Snapshot = Callable[[], tuple[dict, dict]]


class StuckTrial(RuntimeError):
    """An engine has nothing left to train for a trial that has no outcome: running the
    study again would resume it to the same place, so the run fails naming it instead."""


class TrialLife:
    """One trial as one process trains it: its progress and every write it makes.

    ``metadata``: the INCOMPLETE metadata.json (``trial_metadata``), kept up to date and
    finally completed. ``rows``, ``step``, ``train_seconds``, ``finite``: its progress.
    ``team``: the processes training it together (default: this one); a process that is
    not its ``writer`` keeps the same progress and writes nothing.
    """

    def __init__(self, store: StudyStore, spec: StudySpec, trial: TrialSpec, params: dict,
                 metadata: dict, log, board: CrossingBoard | None = None,
                 team: Team | None = None):
        self.store, self.spec, self.trial, self.metadata, self.log = store, spec, trial, metadata, log
        self.board = board
        self.team = team or Team.solo()
        self.writes = self.team.writer
        self.max_steps = spec.max_steps[trial.batch_size]
        self.curves = TrialCurves(store.fs, spec, trial, params, log) if self.writes else None
        self.rows: list[dict] = []
        self.step, self.train_seconds, self.finite = 0, 0.0, True
        self._held = None  # (arrays, state, progress) at its last evaluation: ``hold``

    @property
    def label(self) -> str:
        return f"trial {self.trial.batch_size}/{self.trial.trial_id}"

    def start(self) -> Checkpoint | None:
        """Resume from the trial's checkpoint (returned, for the engine's arrays) or start
        at step 0 (None); either way the store says INCOMPLETE from here on."""
        checkpoint = read_checkpoint(self.store, self.spec, self.trial, self.log)
        if checkpoint is not None:
            state = checkpoint.state
            self.step, self.rows = int(state["step"]), list(state["rows"])
            self.train_seconds = float(state.get("train_seconds", 0.0))
            self.finite = bool(state.get("finite", True))
            at_budget = (", its budget: it finishes from there" if self.step >= self.max_steps
                         else "")  # killed before its final metadata, or its folder deleted
            self.log(f"{self.label}: resumed from its checkpoint at step {self.step}{at_budget}")
        else:
            self.log(f"{self.label}: starts at step 0")
        self.team.check_same(self.step, f"{self.label}'s step to resume from")
        if self.writes:
            self.metadata["steps"] = self.step
            self.store.write_metadata(self.spec, self.trial, self.metadata)
        return checkpoint

    def trained(self, step: int, seconds: float, finite: bool) -> None:
        """The engine trained up to ``step`` in ``seconds``; ``finite``: every loss was."""
        self.step = step
        self.train_seconds += seconds
        self.finite = self.finite and finite

    def record(self, row: dict) -> None:
        """An evaluation's row (at ``self.step``): the writer's, where several processes
        evaluated it."""
        self.rows.append(self.team.same_row(row))

    def evaluated(self) -> bool:
        """Whether the trial's latest row is an evaluation at its current step."""
        return bool(self.rows) and self.rows[-1]["step"] == self.step

    def outcome(self, final: bool = False) -> tuple[str, str] | None:
        """``(status, stop_reason)`` if its latest evaluation ends it (``trial_outcome``);
        ``final``: the engine has trained and evaluated all it will, so an outcome is due
        (``StuckTrial`` if there is none)."""
        outcome = trial_outcome(self.spec, self.rows, self.finite, self.step, self.max_steps,
                                self.board) if self.rows else None
        outcome = self.team.same_choice(outcome, _OUTCOMES)  # the writer's
        if outcome is None and final:
            raise StuckTrial(
                f"{self.label}: nothing left to train at step {self.step} of {self.max_steps}, "
                f"yet unfinished (last evaluated at step "
                f"{self.rows[-1]['step'] if self.rows else None}); its checkpoint "
                f"{self.store.url(checkpoint_path(self.spec, self.trial))} cannot finish it: "
                "delete that file and run the same study again")
        return outcome

    def flush(self) -> None:
        """Measurements, INCOMPLETE metadata at its step, live curves: progress a reader sees."""
        if not self.writes:
            return
        self.metadata["steps"] = self.step
        self.store.write_measurements(self.spec, self.trial, self.rows)
        self.store.write_metadata(self.spec, self.trial, self.metadata)
        self.curves.update(self.rows)

    def checkpoint(self, snapshot: Snapshot) -> None:
        """A checkpoint to resume from exactly here, then a ``flush``."""
        if not self.writes:
            return
        self._write_checkpoint(snapshot)
        self.flush()

    def hold(self, snapshot: Snapshot) -> None:
        """Keep a copy of the trial as it is now, just evaluated, in memory: what
        ``write_held`` checkpoints when a stop cannot wait for the engine
        (``signals.StopRequest``'s deadline). The arrays are copied: an engine's buffers
        are reused (donated) by the steps that follow. A process that does not write
        holds nothing."""
        if not self.writes:
            return
        import json

        import numpy as np

        arrays, state = snapshot()
        self._held = ({k: np.array(v, copy=True) for k, v in arrays.items()},
                      json.loads(json.dumps(state)),
                      {"step": self.step, "rows": [dict(r) for r in self.rows],
                       "train_seconds": self.train_seconds, "finite": self.finite})

    def write_held(self) -> None:
        """Checkpoint what ``hold`` kept (nothing when it kept nothing): the trial resumes
        from its last evaluation, at most one evaluation interval back."""
        if self._held is not None:
            arrays, state, progress = self._held
            write_checkpoint(self.store, self.spec, self.trial, arrays, {**progress, **state})
            self.log(f"{self.label}: checkpointed at step {progress['step']}, its last evaluation")

    def finish(self, outcome: tuple[str, str], num_train_examples: int, wall_time: float,
               snapshot: Snapshot, **extra) -> dict:
        """Record the trial finished with ``outcome`` (see ``finish_trial``), a budget-stopped
        one keeping a checkpoint here first; ``extra``: engine-specific metadata. A process
        that does not write returns the metadata the writer's would begin with."""
        if not self.writes:
            return {**self.metadata, "status": outcome[0], "stop_reason": outcome[1],
                    "steps": self.step}
        if keeps_checkpoint(outcome[1]):  # a larger budget continues it from here
            self._write_checkpoint(snapshot)
        return finish_trial(self.store, self.spec, self.trial, self.metadata, self.rows, outcome,
                            self.step, num_train_examples, self.train_seconds, wall_time,
                            self.log, self.board, self.curves, **extra)

    def _write_checkpoint(self, snapshot: Snapshot) -> None:
        arrays, state = snapshot()
        write_checkpoint(self.store, self.spec, self.trial, arrays, {
            "step": self.step, "rows": self.rows, "train_seconds": self.train_seconds,
            "finite": self.finite, **state})


def trial_metadata(spec: StudySpec, trial: TrialSpec, params: dict, max_steps: int,
                   replicas: int, trainer: str, processes: int = 1) -> dict:
    """A trial's metadata.json as it starts (INCOMPLETE): the one form both trainers write.
    ``processes``: how many processes (hosts) shared its devices, recorded when several."""
    metadata = {
        "trial_id": trial.trial_id, "batch_size": trial.batch_size, "parameters": trial.parameters,
        "effective_learning_rate": effective_learning_rate(params["learning_rate"],
                                                           params.get("momentum", 0.0),
                                                           spec.workload.optimizer),
        "status": "INCOMPLETE",
        "steps": 0, "max_steps": max_steps, "backend": spec.backend,
        "precision": spec.workload.precision, "replicas": replicas, "trainer": trainer,
        # the fit trainer trains one trial at a time; a vmapped group sets its width
        "trained_together": 1, **hardware(replicas),
    }
    if processes > 1:
        metadata["processes"] = processes
    if params != trial.parameters:
        metadata["trainer_parameters"] = params  # e.g. decay_steps from decay_fraction
    return metadata


def crossing_board(store: StudyStore, spec: StudySpec, batch_size: int) -> CrossingBoard | None:
    """Where trials of ``batch_size`` publish and learn goal crossings (a protocol that
    ``races`` only); a pack shares one between its trials. It believes another process's
    crossing only once checked against that trial's record (``crossings.checked_board``)."""
    return checked_board(store, spec, batch_size) if spec.protocol.races else None


def finish_trial(store: StudyStore, spec: StudySpec, trial: TrialSpec, metadata: dict,
                 rows: list[dict], outcome: tuple[str, str], step: int, num_train_examples: int,
                 train_seconds: float, wall_time: float, log, board: CrossingBoard | None = None,
                 curves: TrialCurves | None = None, **extra) -> dict:
    """Record a finished trial: its measurements; a COMPLETE trial's goal crossings on
    ``board``; then its final metadata (written last: it marks the trial done) with the
    measurements' record (rows and SHA-256 of the bytes written, so a reader can tell a
    damaged measurements.csv); then the removal of its checkpoint. A crash before the
    metadata leaves the trial INCOMPLETE, and its resumed run writes the same crossings
    again: a crossing is never missing from a finished trial. ``curves``: the trial's
    TensorBoard run, which gets its last rows and the outcome."""
    examples = step * trial.batch_size
    metadata.update(
        status=outcome[0], stop_reason=outcome[1], steps=step,
        epochs=examples / num_train_examples,
        examples_per_second=examples / train_seconds if train_seconds else None,
        train_seconds=train_seconds,  # training steps only: no compilation, no evaluation
        **extra, wall_time=wall_time,
    )
    metadata["measurements"] = store.write_measurements(spec, trial, rows)
    if board is not None and outcome[0] == "COMPLETE":  # before the commit: a crash between
        board.publish(trial.trial_id, {i: s for i, goal in enumerate(spec.goals)  # them
                                       if (s := first_step_reaching(rows, goal)) is not None})
    store.write_metadata(spec, trial, metadata)  # the commit point
    if curves is not None:
        curves.finish(rows, outcome[0])
    if not keeps_checkpoint(outcome[1]):  # a budget-stopped trial keeps it: a larger budget
        delete_checkpoint(store, spec, trial)  # continues the trial from there
    log(f"trial {trial.batch_size}/{trial.trial_id}: {outcome[0]} ({outcome[1]}) after {step} "
        f"steps, {wall_time:.1f}s")
    return metadata


def finished_trial(store: StudyStore, spec: StudySpec, trial: TrialSpec, log,
                   say_continues: bool = True) -> dict | None:
    """The trial's metadata if it is finished under the spec's budget (re-used: never
    trained again), else None; ``say_continues``: log that a budget-stopped trial goes on
    to a raised budget. Removes the checkpoint of a finished trial killed between its
    final metadata and that removal (a budget-stopped one keeps it)."""
    meta = store.read_metadata(spec, trial)
    max_steps = spec.max_steps[trial.batch_size]
    if not is_finished(meta, max_steps):
        if say_continues and continues(meta, max_steps):
            log(f"trial {trial.batch_size}/{trial.trial_id}: stopped at its budget of "
                f"{meta['max_steps']} steps; continues to {max_steps}")
        return None
    log(f"trial {trial.batch_size}/{trial.trial_id}: already {meta['status']}, re-used")
    if not keeps_checkpoint(meta.get("stop_reason", "")):
        delete_checkpoint(store, spec, trial)
    return meta


def team_finished_trial(store: StudyStore, spec: StudySpec, trial: TrialSpec, log,
                        team: Team) -> dict | None:
    """``finished_trial`` as the writer of ``team`` finds it (it alone may remove a spent
    checkpoint), agreed by every process; another process returns the trial's metadata as
    read, without writing."""
    if team.size == 1:
        return finished_trial(store, spec, trial, log, say_continues=False)
    meta = finished_trial(store, spec, trial, log, say_continues=False) if team.writer else None
    if not team.same_code(int(meta is not None)):
        return None
    return meta if team.writer else (store.read_metadata(spec, trial) or {})


class TrialLeases:
    """A pack's leases on its trials (``batchscale.store.leases``): a trial trains only
    under its lease, so two writers never train one trial at once. ``lease_seconds``:
    how long a lease binds without renewal (tests shorten it)."""

    def __init__(self, store: StudyStore, spec: StudySpec, log, lease_seconds: float | None = None):
        self.leases = Leases(store.fs, log, lease_seconds or LEASE_SECONDS)
        self.spec = spec

    def _dir(self, trial: TrialSpec) -> str:
        return lease_dir(self.spec.name, trial.batch_size, trial.trial_id)

    def claim(self, store: StudyStore, trial: TrialSpec, log) -> dict | None:
        """The trial's metadata if it is finished (re-used, ``finished_trial``), else None:
        then this writer holds its lease (``holds``: train it) or another live writer does
        (wait for it). Looks again once the lease is taken: finished just before?"""
        meta = finished_trial(store, self.spec, trial, log)
        if meta is None and self.acquire(trial):
            meta = finished_trial(store, self.spec, trial, _quiet)
            if meta is not None:
                self.release(trial)
        return meta

    def acquire(self, trial: TrialSpec) -> bool:
        return self.leases.acquire(self._dir(trial), f"trial {trial.batch_size}/{trial.trial_id}")

    def holds(self, trial: TrialSpec) -> bool:
        return self._dir(trial) in self.leases.held

    def holding(self, trial: TrialSpec) -> Holding | None:
        """Another live writer's lease on the trial and until when at the latest (None:
        nobody else's binds)."""
        return self.leases.holding(self._dir(trial))

    def release(self, trial: TrialSpec) -> None:
        self.leases.release(self._dir(trial))

    def release_all(self) -> None:
        self.leases.release_all()


def _quiet(*_) -> None:
    """A log that says nothing (a second look at a trial already reported)."""
