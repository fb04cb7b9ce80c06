"""How far a study has got, read from its store (for progress lines while it runs)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from batchscale.analysis.goal_steps import goal_steps_table
from batchscale.core.names import DONE_STATUSES
from batchscale.core.spec import StudySpec
from batchscale.search.trials import make_trials
from batchscale.store.layout import trial_record


@dataclass
class Progress:
    done: int
    total: int
    infeasible: int
    best_steps: dict[int, int | None]  # first goal, validation; None = not reached yet

    def line(self) -> str:
        best = " ".join(f"{b}:{'-' if s is None else s}" for b, s in self.best_steps.items())
        extra = f", {self.infeasible} diverged" if self.infeasible else ""
        return f"trials {self.done}/{self.total} done{extra} | best steps per batch size {best}"


class ProgressTracker:
    """Polls the store for the spec's trials; a finished trial is read and its goals
    detected once, then only its goal rows are kept.

    Each poll reads only the metadata of trials not yet finished, so polling stays cheap
    for studies of hundreds of trials on gs://.
    """

    def __init__(self, spec: StudySpec, store):
        self.spec, self.store = spec, store
        self.pending = make_trials(spec)
        self.goal_tables: list[pd.DataFrame] = []  # one per finished trial
        self.infeasible = 0

    def poll(self) -> Progress:
        still = []
        for trial in self.pending:
            meta = self.store.read_metadata(self.spec, trial)
            if meta and meta.get("status") in DONE_STATUSES:
                rows = self.store.read_measurements(self.spec, trial)
                record = trial_record(trial.batch_size, trial.trial_id, meta, rows)
                self.goal_tables.append(goal_steps_table(self.spec, [record]))
                self.infeasible += meta["status"] == "INFEASIBLE"
            else:
                still.append(trial)
        self.pending = still
        return self.progress()

    def progress(self) -> Progress:
        spec = self.spec
        best: dict[int, int | None] = dict.fromkeys(spec.batch_sizes)
        if self.goal_tables:
            table = pd.concat(self.goal_tables, ignore_index=True)
            reached = table[(table["split"] == "val") & (table["goal"] == spec.goals[0].label)
                            & (table["status"] == "COMPLETE")].dropna(subset=["step"])
            for batch_size, step in reached.groupby("batch_size")["step"].min().items():
                best[int(batch_size)] = int(step)  # steps to result so far
        done = len(self.goal_tables)
        return Progress(done, done + len(self.pending), self.infeasible, best)
