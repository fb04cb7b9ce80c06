"""Goals: the one goal type, its one syntax and its one rule.

A trial *reaches* a goal at the first evaluated step whose metric strictly beats the goal
value: strictly below when minimising, strictly above when maximising, as the paper's
released analysis does; a non-finite value (a diverged evaluation) never beats it. The
trainer's early stop, the per-trial goal table and steps to result all use ``Goal.beats``.

Every command writes a goal the same way: ``METRIC<VALUE`` (minimise) or ``METRIC>VALUE``
(maximise), optionally prefixed by the split, ``val/`` or ``train/``. A goal names a metric
the workload measures (``TASK_METRICS``) and points the way that metric improves.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from batchscale.core.errors import SpecError
from batchscale.core.names import METRIC_DIRECTIONS, METRIC_RANGES, METRIC_SPLITS

GOAL_SYNTAX = "METRIC<VALUE or METRIC>VALUE, optionally val/ or train/ first"
GOAL_EXAMPLES = "e.g. classification_error<0.08, val/cross_entropy_error<3.9, average_precision>0.31"
_GOAL = re.compile(r"^\s*(?:(?P<split>[A-Za-z_]+)/)?(?P<metric>[A-Za-z_]\w*)\s*(?P<op><|>|=)\s*"
                   r"(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")


@dataclass(frozen=True)
class Goal:
    """A target a trial reaches at the first evaluation that strictly beats ``value``."""

    metric: str
    value: float
    direction: str = "minimize"

    @property
    def label(self) -> str:
        return f"{self.metric}{'<' if self.direction == 'minimize' else '>'}{self.value:g}"

    def beats(self, values):
        """Whether ``values`` (a number, None, or an array / pandas Series) strictly beat
        the goal; NaN, ±inf and None never do. Arrays give a boolean array."""
        v = np.asarray(np.nan if values is None else values, dtype=float)
        with np.errstate(invalid="ignore"):
            better = v < self.value if self.direction == "minimize" else v > self.value
        out = better & np.isfinite(v)
        return bool(out) if out.ndim == 0 else out


def parse_goal(text: str, metrics: Iterable[str] | None = None,
               where: str = "goal") -> tuple[Goal, str | None]:
    """``(Goal, split)`` from ``[SPLIT/]METRIC<VALUE`` or ``[SPLIT/]METRIC>VALUE``; split is
    ``val``, ``train`` or None when not written.

    ``metrics``: the metrics this workload or these data measure (default: every metric
    batchscale knows). Refuses, with one line naming ``where`` and what is allowed: another
    syntax (``METRIC=VALUE`` included), an unknown split, a metric not in ``metrics``, and a
    goal pointing the wrong way (``classification_error>0.1``).
    """
    match = _GOAL.match(text or "")
    if not match or match["op"] == "=":
        hint = " ('=' is not a direction: use < to minimise or > to maximise)" if match else ""
        raise SpecError(f"{where}: {text!r} must look like {GOAL_SYNTAX} ({GOAL_EXAMPLES}){hint}")
    split = match["split"]
    if split is not None and split not in METRIC_SPLITS:
        raise SpecError(f"{where}: {text!r} has split {split!r}; allowed: {', '.join(METRIC_SPLITS)}")
    direction = "minimize" if match["op"] == "<" else "maximize"
    goal = Goal(match["metric"], float(match["value"]), direction)
    check_goal(goal, metrics, where)
    return goal, split


def check_goal(goal: Goal, metrics: Iterable[str] | None = None, where: str = "goal") -> Goal:
    """``goal`` if its metric is measured (``metrics``, default every known metric), its
    value finite and within the metric's range (``check_goal_range``) and its direction
    the metric's; else a one-line SpecError."""
    allowed = tuple(metrics) if metrics is not None else tuple(METRIC_DIRECTIONS)
    if goal.metric not in allowed:
        raise SpecError(f"{where}: metric {goal.metric!r} is not measured here; allowed: "
                        f"{', '.join(allowed) or 'none (no measurements)'}")
    if not math.isfinite(goal.value):
        raise SpecError(f"{where}: value {goal.value!r} of {goal.metric} is not a finite number")
    natural = METRIC_DIRECTIONS.get(goal.metric)
    if natural and goal.direction != natural:
        op = "<" if natural == "minimize" else ">"
        raise SpecError(f"{where}: {goal.metric} improves by {'falling' if op == '<' else 'rising'}; "
                        f"write {goal.metric}{op}VALUE (direction {natural})")
    check_goal_range(goal, where)
    return goal


def check_goal_range(goal: Goal, where: str = "goal") -> None:
    """Refuse a goal value outside what its metric can take (``METRIC_RANGES``).

    The end every value beats (``classification_error<1.5``, or ``<1``, which the first
    evaluation already beats) is refused: every trial would reach it at step 0, and steps
    to result would be meaningless. The end no value beats (``classification_error<0``,
    ``average_precision>1``) is allowed: an unreachable goal runs every trial to its
    budget, which benchmarks and tests rely on. Metrics without a known range pass."""
    if goal.metric not in METRIC_RANGES:
        return
    lo, hi = METRIC_RANGES[goal.metric]
    minimize = goal.direction == "minimize"
    if (lo <= goal.value < hi) if minimize else (lo < goal.value <= hi):
        return
    finite = math.isfinite(hi)
    span = f"[{lo:g}, {hi:g}]" if finite else f"[{lo:g}, inf)"
    inside = f"{lo:g} < VALUE" + (f" < {hi:g}" if finite else "")
    raise SpecError(f"{where}: {goal.label} is out of range for {goal.metric}, which lies in {span}; "
                    f"allowed: {goal.metric}{'<' if minimize else '>'}VALUE with {inside} (or "
                    f"{lo if minimize else hi:g}: never reached, every trial runs to its budget)")


def first_step_reaching(rows: list[dict], goal: Goal, split: str = "val") -> int | None:
    """The first evaluated step whose ``<split>/<metric>`` beats the goal, else None.
    ``rows`` are measurement dicts with a ``step`` key (as measurements.csv holds them)."""
    column = f"{split}/{goal.metric}"
    for row in sorted(rows, key=lambda r: r["step"]):
        if goal.beats(row.get(column)):
            return int(row["step"])
    return None


def all_goals_reached(rows: list[dict], goals, split: str = "val") -> bool:
    """True once every goal has been beaten at some evaluation (the trainer's stop rule)."""
    return all(first_step_reaching(rows, goal, split) is not None for goal in goals)
