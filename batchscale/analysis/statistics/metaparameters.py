"""How the best metaparameters move with batch size, and whether the search was wide enough.

Shallue et al. (2019) tune learning rate and momentum anew at every batch size and then
look at the winners (Section 4.7, Figures 8, 21, 22): the optimal effective learning rate
η/(1−γ) tends to grow with batch size but follows neither the linear nor the square-root
rule of thumb. They also check every search space by eye (Figures 13, 14) and re-search
when the best trial sits on a boundary: a best trial at the edge means the optimum may lie
outside the space, so the measured steps to result is only an upper bound. These helpers
give the tables behind those checks; the figures are in ``plots_metaparameters``.

Inputs: ``trials`` has one row per trial (batch_size, trial_id, status, one column per
metaparameter, a boolean ``reached`` column and, under an early-stopping protocol, a
boolean ``stopped_early``: stopped without reaching the goal, see ``censoring``);
``summary`` is steps to result per batch size for one goal (see
``steps.SUMMARY_COLUMNS``); ``search_space`` maps a batch size to the paper's study.json
``parameter_configs``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from batchscale.core.edges import edge_margin, search_edge
from batchscale.core.names import ADAM_FAMILY, ALL_OPTIMIZER_PARAMETERS, effective_learning_rate

HEURISTIC_PARAMETERS = ("learning_rate", "effective_learning_rate")
OPTIMAL_COLUMNS = [
    "batch_size", "best_trial", "steps_to_result", "learning_rate", "momentum",
    "effective_learning_rate",
] + [f"{rule}_{p}" for p in HEURISTIC_PARAMETERS for rule in ("linear", "sqrt")]
COUNT_COLUMNS = [
    "batch_size", "trials", "complete", "incomplete", "infeasible", "reached",
    "reached_fraction", "diverged_fraction",
]


def _missing(value) -> bool:
    """None, NaN and pandas' NA all mean 'no value' (best_trial is None or NaN by origin)."""
    return value is None or (not isinstance(value, str) and bool(pd.isna(value)))


def optimal_metaparameters(summary: pd.DataFrame, optimizer: str | None = None) -> pd.DataFrame:
    """The best trial's metaparameters per batch size, with the scaling heuristics.

    Only batch sizes with a best trial appear. Momentum is 0 where missing (plain SGD;
    NaN for the Adam family, which has none, and whose own metaparameters the summary
    carries, ``steps.optimizer_columns``, follow it) and the effective learning rate is
    recomputed, ``optimizer``'s (η/(1−γ) for momentum and ``None``, η otherwise). The
    heuristics are anchored at the smallest such batch size B0 with value p0:
    ``linear_<p> = p0·B/B0`` and ``sqrt_<p> = p0·sqrt(B/B0)`` for the learning rate and
    the effective learning rate (the two rules of thumb Figures 8 and 21 test).
    """
    if summary is None or summary.empty:
        return pd.DataFrame(columns=OPTIMAL_COLUMNS)
    if "best_trial" in summary:
        has_best = summary["best_trial"].map(lambda v: not _missing(v))
    else:
        has_best = summary["steps_to_result"].notna()
    rows = summary[has_best.astype(bool)].sort_values("batch_size")
    if rows["batch_size"].duplicated().any():
        raise ValueError("summary has several rows for one batch size: pass a single goal's rows")
    out = pd.DataFrame({"batch_size": rows["batch_size"].astype(int).to_numpy()})
    for column in ("best_trial", "steps_to_result"):
        out[column] = rows[column].to_numpy() if column in rows else np.nan
    out["learning_rate"] = pd.to_numeric(rows["learning_rate"], errors="coerce").to_numpy(float)
    none = math.nan if optimizer in ADAM_FAMILY else 0.0
    momentum = rows["momentum"] if "momentum" in rows else pd.Series(none, index=rows.index)
    out["momentum"] = pd.to_numeric(momentum, errors="coerce").fillna(none).to_numpy(float)
    out["effective_learning_rate"] = effective_learning_rate(out["learning_rate"], out["momentum"],
                                                             optimizer)
    own = [n for n in ALL_OPTIMIZER_PARAMETERS if n != "momentum" and n in rows]
    ratio = out["batch_size"] / out["batch_size"].iloc[0] if len(out) else out["batch_size"]
    for p in HEURISTIC_PARAMETERS:
        p0 = out[p].iloc[0] if len(out) else math.nan
        out[f"linear_{p}"] = p0 * ratio
        out[f"sqrt_{p}"] = p0 * np.sqrt(ratio)
    for name in own:
        out[name] = pd.to_numeric(rows[name], errors="coerce").to_numpy(float)
    columns = [*OPTIMAL_COLUMNS[:5], *own, *OPTIMAL_COLUMNS[5:]]  # after momentum
    return out[columns].reset_index(drop=True)


def _status(trials: pd.DataFrame) -> pd.Series:
    return trials["status"] if "status" in trials else pd.Series("", index=trials.index)


def reached_mask(trials: pd.DataFrame) -> pd.Series:
    """True for COMPLETE trials whose ``reached`` is true (missing column: none reached)."""
    if "reached" not in trials:
        return pd.Series(False, index=trials.index)
    reached = trials["reached"].map(lambda v: False if _missing(v) else bool(v))
    return reached.astype(bool) & (_status(trials) == "COMPLETE")


def _flag(trials: pd.DataFrame, column: str) -> pd.Series:
    if column not in trials:
        return pd.Series(False, index=trials.index)
    return trials[column].map(lambda v: False if _missing(v) else bool(v)).astype(bool)


def trial_outcomes(trials: pd.DataFrame) -> pd.Series:
    """'reached', 'not reached' (complete or incomplete: ran to its budget without
    reaching the goal), 'stopped early' (stopped by the protocol before it could reach
    it: unknown, not "not reached") or 'infeasible' per trial."""
    outcome = pd.Series("not reached", index=trials.index, dtype=object)
    outcome[_flag(trials, "stopped_early")] = "stopped early"
    outcome[reached_mask(trials)] = "reached"
    outcome[_status(trials) == "INFEASIBLE"] = "infeasible"
    return outcome


def trial_counts(trials: pd.DataFrame) -> pd.DataFrame:
    """Per batch size: how many trials ran, finished, diverged and reached the goal.

    ``reached`` counts COMPLETE trials only; ``reached_fraction`` is reached/complete (NaN
    with no complete trial) and ``diverged_fraction`` infeasible/trials. A search space
    where few trials reach the goal, or many diverge, deserves a second look (Section 5).
    Without a ``reached`` column, reached and reached_fraction are NaN (unknown, not 0).
    """
    if trials is None or trials.empty:
        return pd.DataFrame(columns=COUNT_COLUMNS)
    known = "reached" in trials
    table = trials.assign(_reached=reached_mask(trials))
    rows = []
    for batch_size, group in table.groupby("batch_size", sort=True):
        status = group["status"]
        complete = int((status == "COMPLETE").sum())
        infeasible = int((status == "INFEASIBLE").sum())
        reached = int(group["_reached"].sum()) if known else math.nan
        rows.append({
            "batch_size": int(batch_size), "trials": len(group), "complete": complete,
            "incomplete": int((status == "INCOMPLETE").sum()), "infeasible": infeasible,
            "reached": reached, "reached_fraction": reached / complete if complete else math.nan,
            "diverged_fraction": infeasible / len(group),
        })
    return pd.DataFrame.from_records(rows, columns=COUNT_COLUMNS)


def parameter_configs(search_space: dict | None, batch_size) -> dict:
    """One batch size's parameter_configs; keys may be ints or (from JSON) strings."""
    if not search_space:
        return {}
    for key in (batch_size, int(batch_size), str(int(batch_size))):
        if key in search_space:
            return search_space[key] or {}
    return {}


def _trials_at(trials: pd.DataFrame | None, batch_size) -> int:
    """How many trials searched this batch size's ranges (every status)."""
    if trials is None or trials.empty or "batch_size" not in trials:
        return 0
    return int((trials["batch_size"] == batch_size).sum())


def _best_values(trials: pd.DataFrame, row: pd.Series) -> dict:
    """The best trial's metaparameters: its trials row, else the summary row itself."""
    if trials is not None and not trials.empty:
        match = trials[(trials["batch_size"] == row["batch_size"])
                       & (trials["trial_id"] == row["best_trial"])]
        if len(match):
            return match.iloc[0].to_dict()
    return row.to_dict()


def fmt_value(value) -> str:
    """Short, but with enough digits near 1 to tell 0.999 from 0.9999 (momentum)."""
    if not isinstance(value, (int, float, np.number)) or isinstance(value, bool):
        return str(value)
    if 0.9 <= value < 1:
        return f"{value:.{min(int(-math.log10(1 - value)) + 2, 12)}f}".rstrip("0")
    return f"{value:.3g}"


def edge_warnings(trials: pd.DataFrame, summary: pd.DataFrame, search_space: dict | None,
                  margin: float | None = None) -> list[dict]:
    """Best trials within ``margin`` of a searched range's end (the paper's Figure 13 check);
    by default the margin the round planner re-searches by, ``core.edges.edge_margin`` of
    the batch size's number of trials (5% from 20 trials on, up to 20% for few trials).

    Continuous parameters (DOUBLE/INTEGER with min and max) warn when their position in
    the range, in the scale's own unit, is ≤ margin ("min") or ≥ 1 − margin ("max").
    DISCRETE parameters warn at the smallest or largest feasible point only when there are
    at least 3 points (with 2, every value is an end). Parameters missing from the search
    space, and batch sizes without a best trial or a known space, are skipped silently.
    """
    warnings: list[dict] = []
    if summary is None or summary.empty or "best_trial" not in summary:
        return warnings
    for _, row in summary.sort_values("batch_size").iterrows():
        if _missing(row["best_trial"]):
            continue
        configs = parameter_configs(search_space, row["batch_size"])
        values = _best_values(trials, row)
        for name, config in configs.items():
            value = values.get(name)
            if _missing(value):
                continue
            found = search_edge(value, config or {}, margin if margin is not None else
                                edge_margin(_trials_at(trials, batch_size=row["batch_size"])))
            if found is None:
                continue
            edge, bounds, where = found
            batch = int(row["batch_size"])
            warnings.append({
                "batch_size": batch, "parameter": name, "value": value, "edge": edge,
                "range": bounds,
                "message": (f"batch {batch}: best trial's {name} {fmt_value(value)} is {where} "
                            f"[{fmt_value(bounds[0])}, {fmt_value(bounds[1])}]; the paper re-searched "
                            "with a wider range in this case"),
            })
    return warnings


