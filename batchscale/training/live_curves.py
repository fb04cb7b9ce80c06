"""A trial's live curves in TensorBoard: every evaluated metric and the learning rate,
written into the store each time the trial's measurements are (every few seconds while
it trains, at checkpoints, at its end), with its metaparameters for the HParams dashboard.

The event files are a view of measurements.csv, never a source of truth: nothing reads
them back, and a failure to write them is logged once and retried at the next update,
never a failed trial. Format and layout: ``batchscale.store.event_files``.
"""

from __future__ import annotations

import time

from batchscale.core.spec import StudySpec, TrialSpec
from batchscale.store import event_files
from batchscale.training.schedules import learning_rate_at

LEARNING_RATE_TAG = "learning_rate"  # the rate the update after each evaluated step uses


class TrialCurves:
    """The TensorBoard run of one trial as this process trains it (one segment)."""

    def __init__(self, fs, spec: StudySpec, trial: TrialSpec, params: dict, log=print):
        self.fs, self.spec, self.trial, self.params, self.log = fs, spec, trial, params, log
        self.started = time.time()
        self.path = (f"{event_files.run_dir(spec.name, trial.batch_size, trial.trial_id)}/"
                     f"{event_files.segment_name(self.started)}")
        self.stream = None
        self.written = 0  # rows already framed as events
        self.stamps: dict[int, float] = {}  # step -> when this process first saw it
        self.failed = False

    def update(self, rows: list[dict]) -> None:
        """Add the rows not written yet and store the file; never raises."""
        self._guarded(lambda: self._add_rows(rows))

    def finish(self, rows: list[dict], status: str) -> None:
        """The last rows and the trial's outcome (COMPLETE or INFEASIBLE)."""
        def add():
            self._add_rows(rows, flush=False)
            self.stream.add(event_files.session_end_event(status, time.time()))
            self.stream.flush()
        self._guarded(add)

    def _guarded(self, write) -> None:
        try:
            write()
        except Exception as err:  # a view of measurements.csv: never fail the trial for it
            if not self.failed:
                self.log(f"trial {self.trial.batch_size}/{self.trial.trial_id}: could not write "
                         f"its TensorBoard events to {self.fs.url(self.path)} ({err}); "
                         "retrying at its next update")
            self.failed = True
        else:
            self.failed = False

    def _add_rows(self, rows: list[dict], flush: bool = True) -> None:
        if self.stream is None:
            self._open(rows[0]["step"] if rows else 0)
        for row in rows[self.written:]:
            step = int(row["step"])
            wall = self.stamps.setdefault(step, time.time())
            values = {k: v for k, v in row.items() if k not in ("step", "wall_time")}
            values[LEARNING_RATE_TAG] = learning_rate_at(step, self.spec.schedule, self.params)
            self.stream.add(event_files.scalars_event(step, wall, values))
        self.written = max(self.written, len(rows))
        if flush:
            self.stream.flush()

    def _open(self, first_step: int) -> None:
        stream = event_files.EventStream(self.fs, self.path)
        stream.add(event_files.file_version_event(self.started))
        stream.add(event_files.start_event(first_step, self.started))
        hparams = {"batch_size": self.trial.batch_size, **self.trial.parameters}
        stream.add(event_files.hparams_event(
            hparams, event_files.run_name(self.trial.batch_size, self.trial.trial_id), self.started))
        self.stream = stream
