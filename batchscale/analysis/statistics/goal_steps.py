"""The per-trial goal table: for every trial, goal and split, the first step that beats the goal.

Computed from the one study reader (``study_reader.load_study``) with the one goal rule
(``Goal.beats``, through ``steps.first_crossings``), over every loaded trial whatever its
status, so a reader sees which trials got there and when, diverged ones included. Under
an early-stopping protocol a trial that stopped before it could beat a goal is
``censored`` for it (``censoring.trial_censoring``): its empty step means unknown, not
never. The report writes it as ``goal_steps.csv``; the results API serves it as
``goal_steps()``.
"""

from __future__ import annotations

import math

import pandas as pd

from batchscale.analysis.reading.censoring import stop_table, trial_censoring
from batchscale.analysis.reading.study_reader import KEYS, Study
from batchscale.analysis.statistics.steps import first_crossings
from batchscale.core.names import ADAM_FAMILY, METRIC_SPLITS, effective_learning_rate

GOAL_STEPS_FILE = "goal_steps.csv"  # in the report folder, <study>/report/
GOAL_STEP_COLUMNS = ["batch_size", "trial_id", "status", "goal", "metric", "value", "direction",
                     "split", "step", "steps_run", "stop_reason", "censored", "learning_rate",
                     "momentum", "effective_learning_rate", "parameters"]


def goal_steps_table(study: Study) -> pd.DataFrame:
    """One row per (trial, goal, split), trials in (batch size, id) order: status, the goal,
    the step (NaN if never reached), the steps the trial ran, why it stopped, whether it is
    censored for the goal (stopped early before beating it), its learning rate, momentum
    (0 without one; NaN for the Adam family, which has none), effective learning rate (the
    optimizer's: η/(1−γ) for momentum, η for SGD and the Adam family) and all its
    metaparameters as a dict (beta_1, ... for the Adam family)."""
    trials = study.trials
    stops = stop_table(study)
    hits = []
    for g, goal in enumerate(study.goals):
        for s, split in enumerate(METRIC_SPLITS):
            hit = first_crossings(trials, study.measurements, goal, split)[[*KEYS, "step"]]
            censored = trial_censoring(study, goal, split, stops)[[*KEYS, "censored"]]
            hit = hit.merge(censored, on=KEYS, how="left")
            hits.append(hit.assign(_order=g * len(METRIC_SPLITS) + s, goal=goal.label,
                                   metric=goal.metric, value=goal.value,
                                   direction=goal.direction, split=split))
    if not hits or trials.empty:
        return pd.DataFrame(columns=GOAL_STEP_COLUMNS)
    info = trials[[*KEYS, "status"]].assign(
        steps_run=trials["steps"], stop_reason=stops["stop_reason"].to_numpy(),
        learning_rate=_column(trials, "learning_rate", math.nan),
        momentum=_column(trials, "momentum", math.nan if study.optimizer in ADAM_FAMILY else 0.0),
        parameters=_parameters(trials, study.metaparameters))
    info["effective_learning_rate"] = effective_learning_rate(info["learning_rate"], info["momentum"],
                                                              study.optimizer)
    table = info.merge(pd.concat(hits, ignore_index=True), on=KEYS)
    return table.sort_values([*KEYS, "_order"], ignore_index=True)[GOAL_STEP_COLUMNS]


def _column(trials: pd.DataFrame, name: str, missing: float) -> pd.Series:
    if name not in trials:
        return pd.Series(missing, index=trials.index, dtype=float)
    return pd.to_numeric(trials[name], errors="coerce").fillna(missing)


def _parameters(trials: pd.DataFrame, names: list[str]) -> list[dict]:
    """Each trial's metaparameters as metadata.json holds them (missing ones left out)."""
    out = []
    for row in trials[names].itertuples(index=False):
        values = {n: v.item() if hasattr(v, "item") else v for n, v in zip(names, row)}
        out.append({n: v for n, v in values.items() if not (isinstance(v, float) and math.isnan(v))})
    return out
