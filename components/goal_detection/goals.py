"""Pure goal detection, shared by the trainer's early stop and the detect_goals step.

A trial reaches a goal at the first evaluated step whose metric strictly beats the
goal value (strictly below when minimizing, strictly above when maximizing), as the
paper's released analysis does. Measurement rows are dicts with a ``step`` key and
``<split>/<metric>`` columns (split ``train`` or ``val``).
"""

from __future__ import annotations

import math

from components.spec import Goal

SPLITS = ("val", "train")


def beats(value: float, goal: Goal) -> bool:
    if value is None or not math.isfinite(value):
        return False
    return value < goal.value if goal.direction == "minimize" else value > goal.value


def first_step_reaching(rows: list[dict], goal: Goal, split: str = "val") -> int | None:
    """The first evaluated step whose ``<split>/<metric>`` beats the goal, else None."""
    column = f"{split}/{goal.metric}"
    for row in sorted(rows, key=lambda r: r["step"]):
        if beats(row.get(column), goal):
            return int(row["step"])
    return None


def all_goals_reached(rows: list[dict], goals, split: str = "val") -> bool:
    """True once every goal has been beaten at some evaluation (the trainer's stop rule)."""
    return all(first_step_reaching(rows, goal, split) is not None for goal in goals)


def detect_trial_goals(rows: list[dict], goals) -> list[dict]:
    """One record per (goal, split): the step the trial first reached it, or None."""
    return [
        {"goal": goal.label, "metric": goal.metric, "value": goal.value,
         "direction": goal.direction, "split": split,
         "step": first_step_reaching(rows, goal, split)}
        for goal in goals
        for split in SPLITS
    ]
