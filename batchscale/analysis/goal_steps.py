"""detect_goals: for every trial of a study and every goal, the first step reaching it."""

from __future__ import annotations

import pandas as pd

from batchscale.core.goals import first_step_reaching
from batchscale.core.names import METRIC_SPLITS
from batchscale.core.spec import StudySpec
from batchscale.store.layout import StudyStore, load_trials

GOAL_STEPS_FILE = "report/goal_steps.csv"


def detect_trial_goals(rows: list[dict], goals) -> list[dict]:
    """One record per (goal, split): the step the trial first reached it, or None."""
    return [
        {"goal": goal.label, "metric": goal.metric, "value": goal.value,
         "direction": goal.direction, "split": split,
         "step": first_step_reaching(rows, goal, split)}
        for goal in goals
        for split in METRIC_SPLITS
    ]


def goal_steps_table(spec: StudySpec, trials: list[dict]) -> pd.DataFrame:
    """One row per (trial, goal, split): status, metaparameters and the step (NaN if never)."""
    records = []
    for trial in trials:
        params = trial["parameters"]
        for hit in detect_trial_goals(trial["measurements"], spec.goals):
            records.append({
                "batch_size": trial["batch_size"], "trial_id": trial["trial_id"],
                "status": trial["status"], **hit,
                "steps_run": trial["metadata"].get("steps"),
                "learning_rate": params.get("learning_rate"),
                "momentum": params.get("momentum", 0.0),
                "effective_learning_rate": trial["metadata"].get("effective_learning_rate"),
                "parameters": params,
            })
    columns = ["batch_size", "trial_id", "status", "goal", "metric", "value", "direction",
               "split", "step", "steps_run", "learning_rate", "momentum",
               "effective_learning_rate", "parameters"]
    return pd.DataFrame.from_records(records, columns=columns)


def detect_study_goals(spec: StudySpec, store: StudyStore) -> pd.DataFrame:
    """Read every trial of the study, detect its goals, write report/goal_steps.csv."""
    trials = load_trials(store.fs, spec.name)
    table = goal_steps_table(spec, trials)
    store.fs.write_text(f"{spec.name}/{GOAL_STEPS_FILE}", table.to_csv(index=False))
    return table
