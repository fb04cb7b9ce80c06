"""How robustly each batch size reaches the goal: the k-th best trial and the share that reach it.

Steps to result is the best trial's (``steps.steps_to_result``): the earliest step at
which *any* trial beat the goal. The paper's own limits (§5.1) ask how robust that is: a
batch size whose best trial is a lucky one among ten misses looks as good as one where
every trial reaches the goal. ``robustness_table`` gives, per batch size, the k-th
smallest per-trial first crossing (``steps.crossings``: the one goal rule,
``Goal.beats``) for k = 1 .. K (k = 1 is steps to result) and the share of trials that
beat the goal at all, with a Wilson score interval (shares over ten trials are rough).

Early stopping (``reading.censoring``): a trial the protocol stopped before it beat the
goal (``trial_censoring``'s ``censored``) might have beaten it later, at a step after its
last evaluation. So the share that reached is then a lower bound (``share_censored``
"lower bound"; its interval runs from the Wilson low end of the trials that reached to
the Wilson high end of those plus every censored one), and the k-th best is an upper
bound (``censored_k<k>`` "upper bound") when a censored trial stopped before it, or
unknown ("stopped early", NaN) when fewer than k reached but enough stopped early that k
could have; it stays exact ("") when every censored trial stopped at or after it (its
crossing would come later), and NaN with "" when not even every censored trial
reaching would make k. The same words as the steps table's ``censored``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from batchscale.analysis.reading.censoring import EXACT, STOPPED_EARLY, UPPER_BOUND, trial_censoring
from batchscale.analysis.statistics.steps import crossings
from batchscale.core.goals import Goal

LOWER_BOUND = "lower bound"  # share_censored: censored trials might still have reached
WILSON_Z = 1.959963984540054  # two-sided 95%
BASE_COLUMNS = ["goal", "split", "batch_size", "trials", "complete", "reached", "stopped_early",
                "share_reached", "share_low", "share_high", "share_reached_complete",
                "share_censored"]
ROBUSTNESS_FILE = "robustness.csv"


def steps_column(k: int) -> str:
    return f"steps_k{k}"


def censored_column(k: int) -> str:
    return f"censored_k{k}"


def robustness_columns(k: int) -> list[str]:
    """``BASE_COLUMNS`` then steps_k1 .. steps_k<k>, then censored_k1 .. censored_k<k>."""
    return [*BASE_COLUMNS, *(steps_column(j) for j in range(1, k + 1)),
            *(censored_column(j) for j in range(1, k + 1))]


def wilson_interval(successes: int, n: int, z: float = WILSON_Z) -> tuple[float, float]:
    """The Wilson score interval of a share ``successes / n`` (NaN, NaN for n = 0): unlike
    the normal approximation it stays inside [0, 1] and is not empty at 0 or n of n."""
    if n <= 0:
        return math.nan, math.nan
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low = 0.0 if successes <= 0 else max(0.0, centre - half)  # exact ends, not 1 - 1e-16
    return low, 1.0 if successes >= n else min(1.0, centre + half)


def robustness_table(study, goal: Goal, split: str = "val", k: int = 3) -> pd.DataFrame:
    """One row per batch size of the study (``robustness_columns(k)``):

    ``trials``: the counted trials (``study.counted``, COMPLETE by default) and the
    diverged (INFEASIBLE) ones; ``complete``: the counted ones; ``reached``: those whose
    curve beat the goal; ``stopped_early``: counted trials the protocol stopped before
    they beat it (censored); ``share_reached`` = reached / trials with its Wilson 95%
    interval ``share_low``, ``share_high`` (widened to reached + stopped_early when some
    were censored); ``share_reached_complete`` = reached / complete; ``share_censored``:
    "" or "lower bound". ``steps_k<j>``: the j-th smallest first crossing step among the
    trials (ties count once each; NaN where fewer than j reached); ``censored_k<j>``: ""
    exact, "upper bound" or "stopped early" (module docstring).
    """
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k: {k!r} must be a whole number of trials, 1 or more")
    k = int(k)
    crossed = crossings(study, goal, split)
    censoring = trial_censoring(study, goal, split)
    censoring = censoring[censoring["censored"] & censoring["status"].isin(study.counted)]
    records = []
    for batch_size in study.batch_sizes:
        group = study.trials[study.trials["batch_size"] == batch_size]
        status = group["status"]
        complete = int(status.isin(study.counted).sum())
        trials = complete + int(((status == "INFEASIBLE") & ~status.isin(study.counted)).sum())
        steps = np.sort(crossed.loc[crossed["batch_size"] == batch_size, "step"].dropna()
                        .to_numpy(dtype=float))
        stopped = censoring.loc[censoring["batch_size"] == batch_size, "last_step"].to_numpy(dtype=float)
        reached = len(steps)
        low, _ = wilson_interval(reached, trials)
        _, high = wilson_interval(reached + len(stopped), trials)
        row = {"goal": goal.label, "split": split, "batch_size": int(batch_size), "trials": trials,
               "complete": complete, "reached": reached, "stopped_early": len(stopped),
               "share_reached": reached / trials if trials else math.nan,
               "share_low": low, "share_high": high,
               "share_reached_complete": reached / complete if complete else math.nan,
               "share_censored": LOWER_BOUND if len(stopped) else EXACT}
        for j in range(1, k + 1):
            row[steps_column(j)], row[censored_column(j)] = _kth(steps, stopped, j)
        records.append(row)
    return pd.DataFrame.from_records(records, columns=robustness_columns(k))


def _kth(steps: np.ndarray, stopped: np.ndarray, j: int) -> tuple[float, str]:
    """The j-th best step and what early stopping leaves unknown of it: censored trials
    could only add crossings after their last step, so the measured j-th best is exact
    when none stopped before it and an upper bound otherwise; with fewer than j reached
    it is unknown when enough censored trials could make up the difference."""
    if len(steps) >= j:
        value = float(steps[j - 1])
        return value, UPPER_BOUND if (stopped < value).any() else EXACT
    return math.nan, STOPPED_EARLY if len(steps) + len(stopped) >= j else EXACT


def all_robustness(study, k: int = 3, split: str = "val") -> pd.DataFrame:
    """``robustness_table`` of every goal of the study on ``split``, stacked (robustness.csv)."""
    tables = [robustness_table(study, goal, split, k) for goal in study.goals]
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(
        columns=robustness_columns(k))


def share_text(row) -> str:
    """``60% [31%, 83%]``, with ``≥`` before the share when it is a lower bound; ``—``
    without trials."""
    share = row["share_reached"]
    if share is None or pd.isna(share):
        return "—"
    low, high = row["share_low"], row["share_high"]
    at_least = "≥ " if row["share_censored"] == LOWER_BOUND else ""
    return f"{at_least}{share:.0%} [{low:.0%}, {high:.0%}]"


def step_text(value, censored: str) -> str:
    """A k-th best step as the report shows it: ``120``, ``≤ 150`` (upper bound), ``—``
    (not reached) or ``stopped early`` (unknown)."""
    if value is None or pd.isna(value):
        return STOPPED_EARLY if censored == STOPPED_EARLY else "—"
    shown = f"{float(value):.0f}"
    return f"≤ {shown}" if censored == UPPER_BOUND else shown
