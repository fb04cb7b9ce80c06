"""How far a study has got, read from its store (for progress lines while it runs)."""

from __future__ import annotations

from dataclasses import dataclass

from components.aggregate.steps import steps_to_result
from components.goal_detection.detect import goal_steps_table
from components.spec import StudySpec
from components.store import DONE_STATUSES, load_trials


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


def study_progress(spec: StudySpec, store) -> Progress:
    """Count the spec's finished trials and the best steps to the first goal so far."""
    wanted = {(b, t) for b in spec.batch_sizes for t in range(1, spec.trials_per_batch_size + 1)}
    trials = [t for t in load_trials(store.fs, spec.name)
              if (t["batch_size"], t["trial_id"]) in wanted]
    done = [t for t in trials if t["status"] in DONE_STATUSES]
    best: dict[int, int | None] = dict.fromkeys(spec.batch_sizes)
    if done:
        summary = steps_to_result(goal_steps_table(spec, done), "val")
        for row in summary[summary["goal"] == spec.goals[0].label].itertuples():
            if row.steps_to_result == row.steps_to_result:  # not NaN
                best[row.batch_size] = int(row.steps_to_result)
    return Progress(len(done), len(wanted),
                    sum(t["status"] == "INFEASIBLE" for t in done), best)
