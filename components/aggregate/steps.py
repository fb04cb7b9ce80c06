"""Steps to result per batch size, as the paper's released analysis computes it.

For a batch size: over its COMPLETE trials, the earliest evaluation step at which any
trial strictly beat the goal; ties go to the lower trial id (that is the best trial).
"""

from __future__ import annotations

import math

import pandas as pd

SUMMARY_COLUMNS = [
    "goal", "split", "batch_size", "trials", "complete", "infeasible", "reached",
    "steps_to_result", "examples_to_result", "best_trial", "learning_rate", "momentum",
    "effective_learning_rate",
]


def steps_to_result(goal_steps: pd.DataFrame, split: str = "val") -> pd.DataFrame:
    """One row per (goal, batch size) from a detect_goals table (see SUMMARY_COLUMNS)."""
    rows = []
    table = goal_steps[goal_steps["split"] == split]
    for (goal, batch_size), group in table.groupby(["goal", "batch_size"], sort=True):
        complete = group[group["status"] == "COMPLETE"]
        reached = complete.dropna(subset=["step"]).sort_values(["step", "trial_id"])
        row = {
            "goal": goal, "split": split, "batch_size": int(batch_size),
            "trials": len(group), "complete": len(complete),
            "infeasible": int((group["status"] == "INFEASIBLE").sum()),
            "reached": len(reached), "steps_to_result": math.nan,
            "examples_to_result": math.nan, "best_trial": None, "learning_rate": math.nan,
            "momentum": math.nan, "effective_learning_rate": math.nan,
        }
        if len(reached):
            best = reached.iloc[0]
            row.update(
                steps_to_result=int(best["step"]),
                examples_to_result=int(best["step"]) * int(batch_size),
                best_trial=int(best["trial_id"]), learning_rate=best["learning_rate"],
                momentum=best["momentum"], effective_learning_rate=best["effective_learning_rate"],
            )
        rows.append(row)
    return pd.DataFrame.from_records(rows, columns=SUMMARY_COLUMNS)


def scaling_factor(summary: pd.DataFrame, goal: str) -> float | None:
    """Steps to result at the smallest batch size over that at the largest (both reached)."""
    reached = summary[(summary["goal"] == goal)].dropna(subset=["steps_to_result"])
    if len(reached) < 2:
        return None
    ordered = reached.sort_values("batch_size")
    return float(ordered["steps_to_result"].iloc[0] / ordered["steps_to_result"].iloc[-1])
