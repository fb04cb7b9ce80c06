"""Steps to result and best-under-budget, exactly as the paper's released analysis computes them.

Steps to result, per batch size: take every evaluation row of the counted (by default
COMPLETE) trials, keep the rows whose metric strictly beats the goal (below when
minimising, above when maximising), sort by (step, trial_id) and take the first. So it is
the earliest evaluation step at which any trial beat the goal, ties to the lower trial id
(the best trial). A step budget keeps rows with step <= budget; an example budget keeps
rows with batch_size * step <= budget (Figure 11). The best value under a budget is the
best metric value among the kept rows (ties to the earlier step, then the lower id).

Under an early-stopping protocol (``goal``, ``race``) some curves end early; each value
says whether that could have hidden a better one (``censoring``): steps to result's
``censored`` is "" (exact), "upper bound" or "stopped early" (no trial beat the goal but
some stopped before they could), with ``stopped_early`` the trials behind it; a best
value under a budget is ``censored`` when a trial there stopped early inside the budget.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from batchscale.analysis.reading.censoring import budget_censored, qualifiers, stop_table
from batchscale.core.goals import Goal
from batchscale.core.names import ADAM_FAMILY, OPTIMIZER_PARAMETERS, effective_learning_rate
from batchscale.core.names import METRIC_SPLITS as SPLITS

SUMMARY_COLUMNS = [
    "goal", "split", "batch_size", "trials", "complete", "incomplete", "infeasible", "reached",
    "steps_to_result", "examples_to_result", "best_trial", "learning_rate", "momentum",
    "effective_learning_rate", "censored", "stopped_early",
]
# then, for an optimizer of the Adam family, the best trial's own metaparameters
# (``optimizer_columns``: beta_1, ... as its trials hold them); its momentum is NaN (none)
BUDGET_COLUMNS = ["kind", "budget", "batch_size", "best_value", "trial_id", "step", "censored"]


def optimizer_columns(study) -> list[str]:
    """The metaparameters besides learning rate and momentum that the study's optimizer
    reads and its trials hold (searched or fixed): the Adam family's beta_1, beta_2,
    epsilon, weight_decay; none for the paper's optimizers, whose tables stay as they were."""
    names = [n for n in OPTIMIZER_PARAMETERS.get(study.optimizer, ()) if n != "momentum"]
    return [n for n in names if n in study.trials]


def goal_column(goal: Goal, split: str) -> str:
    return f"{split}/{goal.metric}"


def _budgeted(rows: pd.DataFrame, step_budget=None, example_budget=None) -> pd.DataFrame:
    if step_budget is not None:
        rows = rows[rows["step"] <= step_budget]
    if example_budget is not None:
        rows = rows[rows["step"] * rows["batch_size"] <= example_budget]
    return rows


def first_crossings(trials: pd.DataFrame, measurements: pd.DataFrame, goal: Goal,
                    split: str = "val") -> pd.DataFrame:
    """One row per trial of ``trials`` (batch_size, trial_id), in its order: the first
    evaluated step whose ``<split>/<metric>`` beats the goal (``Goal.beats``; NaN if never)
    and the evaluation step before it (NaN if it was the first): the crossing lies between."""
    keys = trials[["batch_size", "trial_id"]]
    column = goal_column(goal, split)
    if column not in measurements.columns or measurements.empty:
        return keys.assign(step=math.nan, previous_step=math.nan).reset_index(drop=True)
    rows = measurements.sort_values(["batch_size", "trial_id", "step"])
    rows = rows.assign(previous_step=rows.groupby(["batch_size", "trial_id"])["step"].shift(1))
    first = rows[goal.beats(rows[column])].groupby(["batch_size", "trial_id"]).head(1)
    out = keys.merge(first[["batch_size", "trial_id", "step", "previous_step"]],
                     on=["batch_size", "trial_id"], how="left")
    return out.astype({"step": "float64", "previous_step": "float64"})


def crossings(study, goal: Goal, split: str = "val") -> pd.DataFrame:
    """``first_crossings`` of the counted trials (what steps to result and the regime fit see)."""
    return first_crossings(study.counted_trials(), study.counted_measurements(), goal, split)


def steps_to_result(study, goal: Goal, split: str = "val", step_budget=None,
                    example_budget=None) -> pd.DataFrame:
    """One row per batch size of the study (see SUMMARY_COLUMNS); NaN where no trial reached.
    ``censored``/``stopped_early``: what early stopping leaves unknown (``censoring.qualifiers``)."""
    column = goal_column(goal, split)
    rows = _budgeted(study.counted_measurements(), step_budget, example_budget)
    if column in rows.columns:
        good = rows[goal.beats(rows[column])].sort_values(["batch_size", "step", "trial_id"])
    else:
        good = rows.iloc[0:0]
    first = good.groupby("batch_size").head(1).set_index("batch_size")
    reached = good.groupby("batch_size")["trial_id"].nunique()
    params = study.trials.set_index(["batch_size", "trial_id"])
    own = optimizer_columns(study)
    records = []
    for batch_size, group in study.trials.groupby("batch_size", sort=True):
        status = group["status"]
        row = {"goal": goal.label, "split": split, "batch_size": int(batch_size),
               "trials": len(group), "complete": int((status == "COMPLETE").sum()),
               "incomplete": int((status == "INCOMPLETE").sum()),
               "infeasible": int((status == "INFEASIBLE").sum()),
               "reached": int(reached.get(batch_size, 0)), "steps_to_result": math.nan,
               "examples_to_result": math.nan, "best_trial": None, "learning_rate": math.nan,
               "momentum": math.nan, "effective_learning_rate": math.nan,
               **dict.fromkeys(own, math.nan)}
        if batch_size in first.index:
            best = first.loc[batch_size]
            trial_id = int(best["trial_id"])
            lr, momentum = _metaparameters(params, batch_size, trial_id, study.optimizer)
            row.update(steps_to_result=int(best["step"]),
                       examples_to_result=int(best["step"]) * int(batch_size), best_trial=trial_id,
                       learning_rate=lr, momentum=momentum,
                       effective_learning_rate=effective_learning_rate(lr, momentum, study.optimizer),
                       **{n: _number(params.loc[(batch_size, trial_id)], n) for n in own})
        records.append(row)
    found = {r["batch_size"]: r["steps_to_result"] for r in records}
    marks = qualifiers(study, goal, split, found, step_budget=step_budget,
                       example_budget=example_budget)
    for row in records:
        row["censored"], row["stopped_early"] = marks.get(row["batch_size"], ("", 0))
    return pd.DataFrame.from_records(records, columns=[*SUMMARY_COLUMNS, *own])


def _metaparameters(params: pd.DataFrame, batch_size: int, trial_id: int,
                    optimizer: str) -> tuple[float, float]:
    """The best trial's learning rate and momentum: 0 where missing (plain SGD), NaN for
    the Adam family (no momentum)."""
    row = params.loc[(batch_size, trial_id)]
    lr = _number(row, "learning_rate")
    none = math.nan if optimizer in ADAM_FAMILY else 0.0
    momentum = row["momentum"] if "momentum" in row else none
    return lr, none if pd.isna(momentum) else float(momentum)


def _number(row: pd.Series, name: str) -> float:
    value = row[name] if name in row else math.nan
    return math.nan if pd.isna(value) else float(value)


def all_steps_to_result(study, splits=SPLITS) -> pd.DataFrame:
    """steps_to_result for every goal of the study and every split, stacked."""
    tables = [steps_to_result(study, goal, split) for split in splits for goal in study.goals]
    return pd.concat(tables, ignore_index=True)


def best_under_budget(study, metric: str, budgets, kind: str = "steps", split: str = "val",
                      direction: str = "minimize") -> pd.DataFrame:
    """Best ``<split>/<metric>`` per batch size among rows within each budget (Figure 11).

    ``kind`` "steps" (step <= budget) or "examples" (batch_size * step <= budget). Columns:
    kind, budget, batch_size, best_value (NaN when no finite row fits), trial_id, step,
    censored (a trial of that batch size stopped early inside the budget: its later values
    are unknown, so the true best could be better; ``censoring.budget_censored``).
    """
    if kind not in ("steps", "examples"):
        raise ValueError(f"budget kind: {kind!r} must be 'steps' or 'examples'")
    column = f"{split}/{metric}"
    rows = study.counted_measurements()
    stops = stop_table(study)
    records = []
    for budget in budgets:
        censored = budget_censored(study, kind, budget, stops)
        kept = _budgeted(rows, **{"step_budget" if kind == "steps" else "example_budget": budget})
        if column in kept.columns:
            kept = kept[np.isfinite(kept[column].astype(float))]
            ordered = kept.assign(_key=kept[column] * (1 if direction == "minimize" else -1))
            best = ordered.sort_values(["batch_size", "_key", "step", "trial_id"]).groupby(
                "batch_size").head(1).set_index("batch_size")
        else:
            best = pd.DataFrame()
        for batch_size in study.batch_sizes:
            hit = batch_size in best.index
            records.append({"kind": kind, "budget": budget, "batch_size": batch_size,
                            "best_value": float(best.loc[batch_size, column]) if hit else math.nan,
                            "trial_id": int(best.loc[batch_size, "trial_id"]) if hit else None,
                            "step": int(best.loc[batch_size, "step"]) if hit else None,
                            "censored": batch_size in censored})
    return pd.DataFrame.from_records(records, columns=BUDGET_COLUMNS)


def default_budgets(study, kind: str, count: int = 3) -> list[int]:
    """Powers of two, a factor 4 apart, ending at the largest the study can fill: for steps
    the largest evaluated step; for examples the median over batch sizes of B * last step."""
    rows = study.counted_measurements()
    if rows.empty:
        return []
    last = rows.groupby("batch_size")["step"].max()
    top = last.max() if kind == "steps" else float(np.median(last.index.to_numpy() * last.to_numpy()))
    if top < 1:
        return []
    exponent = int(math.floor(math.log2(top)))
    return sorted({2 ** (exponent - 2 * k) for k in range(count) if exponent - 2 * k >= 0})
