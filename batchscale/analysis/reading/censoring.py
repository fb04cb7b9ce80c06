"""What a study's stopping protocol leaves unknown: the one place that says it.

Each batch size's stopping protocol is a record of ``core.protocols`` (never a name to
compare): under the paper's (``full``) every trial trains to its step budget, so every
curve is whole; a protocol that ``stops_at_goal`` stops a trial once it beats every goal of
the study; one that ``races`` also stops it once its evaluated step reaches the earliest
crossing another trial of its batch size made of each goal it has not beaten.
Neither changes steps to the study's goals (a minimum over trials), nor to a goal they
*imply* (same metric, no stricter) on the validation metric the trainer stops by: a
goal-stopped trial beat it, a race-stopped one stopped at or after the best crossing.

Any other goal (stricter, another metric, the training split) is another matter: a trial
that stopped early (a stop reason of ``protocols.early_stop_reasons()``) without beating it is *censored* at
its last step; when it would have beaten it is unknown. So steps to result among the
trials is exact when every censored trial stopped at or after the step found (its
crossing would come later), an upper bound when some stopped before it, and unknown
("stopped early", not "not reached") when no trial beat it and some stopped early. A best
value under a budget B is censored when some trial stopped early before B. A stricter
goal on a study where no trial ran to its budget cannot be measured at all: loading it
is refused (``refuse_unmeasurable``) rather than answering "no batch size reached".
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from batchscale.core import protocols as _protocols
from batchscale.core.errors import SpecError
from batchscale.core.goals import Goal
from batchscale.core.protocols import STOP_BUDGET, STOP_DIVERGED, StoppingProtocol
from batchscale.store.compatibility import STUDY_SPEC_KEY

STOP_SPLIT = "val"  # the split the trainer stops by (core.goals.all_goals_reached)
EXACT, UPPER_BOUND, STOPPED_EARLY = "", "upper bound", "stopped early"  # the qualifiers
KEYS = ["batch_size", "trial_id"]
STOP_COLUMNS = [*KEYS, "status", "stop_reason", "last_step"]


def study_json_goals(study_json: dict[int, dict]) -> tuple[Goal, ...]:
    """The goals our study.json files carry (the same at every batch size), or ()."""
    found = {json.dumps(s.get("goals"), sort_keys=True) for s in study_json.values()}
    if len(found) != 1:
        return ()
    try:
        return tuple(Goal(**g) for g in json.loads(found.pop()) or ())
    except (TypeError, ValueError):
        return ()


def written_by_batchscale(study_json: dict) -> bool:
    """Whether a study.json is ours (it carries our goals or the spec's copy)."""
    return isinstance(study_json.get("goals"), list) or STUDY_SPEC_KEY in study_json


def batch_protocol(study_json: dict, ours: bool) -> StoppingProtocol:
    """A batch size's protocol: the record study.json's ``protocol`` names; without one,
    ``protocols.LEGACY`` for our older stores (their trials stopped at the goals although
    they say early_stopping false) and ``protocols.PAPER`` for the paper's database (its
    early stopping ended trials as INCOMPLETE, which are not counted; COMPLETE trials ran
    to their budget). A name this process does not know (a plugin's, not loaded here) is
    kept, as ``protocols.unknown``'s stand-in: never read as another protocol."""
    name = study_json.get("protocol")
    found = _protocols.find(name)
    if found is not None:
        return found
    if isinstance(name, str) and name:
        return _protocols.unknown(name)
    return _protocols.LEGACY if ours or written_by_batchscale(study_json) else _protocols.PAPER


def protocols(study) -> dict[int, StoppingProtocol]:
    """batch size -> its protocol (``batch_protocol``)."""
    ours = study.layout == "batchscale"
    return {int(b): batch_protocol(s or {}, ours) for b, s in study.study_json.items()}


def study_protocol(study) -> tuple[StoppingProtocol, ...]:
    """The study's protocols in the table's order (one, unless it switched between
    protocols of one family); a study with no batch size yet: the paper's."""
    found = set(protocols(study).values())
    known = tuple(p for p in _protocols.all_protocols() if p in found)
    strangers = tuple(sorted(found - set(known), key=lambda p: p.name))  # ``protocols.unknown``
    return known + strangers or (_protocols.PAPER,)


def protocol_label(found: tuple[StoppingProtocol, ...]) -> str:
    """The protocols as the report and summary.json name them: "goal", "goal+race"."""
    return "+".join(p.name for p in found)


def from_label(label: str) -> tuple[StoppingProtocol, ...]:
    """The records a ``protocol_label`` names (a stored summary's); a name this process
    does not know stands as ``protocols.unknown``."""
    names = [n for n in str(label).split("+") if n]
    return tuple(_protocols.find(n) or _protocols.unknown(n) for n in names)


def early_stopping(found: tuple[StoppingProtocol, ...]) -> bool:
    """Whether any of the protocols stops a trial before its budget."""
    return any(p.early_stopping for p in found)


def stopping_goals(study) -> tuple[Goal, ...]:
    """The goals the trials were stopped at: the spec's, else those study.json carries."""
    if study.spec is not None:
        return tuple(study.spec.goals)
    return study_json_goals(study.study_json)


def implied(goal: Goal, goals, split: str = STOP_SPLIT) -> bool:
    """Whether beating every one of ``goals`` on the stop split means beating ``goal``:
    some goal has the same metric and direction and is at least as strict."""
    if split != STOP_SPLIT:
        return False
    for own in goals:
        if own.metric != goal.metric or own.direction != goal.direction:
            continue
        if (own.value <= goal.value) if goal.direction == "minimize" else (own.value >= goal.value):
            return True
    return False


def stop_table(study) -> pd.DataFrame:
    """One row per loaded trial: status, why it stopped and its last evaluated step.

    stop_reason is metadata.json's; a trial without one (hand-made or foreign data) gets
    "diverged" when INFEASIBLE, "" when not finished, else "budget" unless its protocol
    stops early and it trained fewer steps than its budget (the protocol's first stop
    reason: "goal" for goal and race)."""
    trials = study.trials[[*KEYS, "status", "steps"]]
    meta = study.metadata.reindex(columns=[*KEYS, "stop_reason", "max_steps"])
    table = trials.merge(meta, on=KEYS, how="left")
    last = study.measurements.groupby(KEYS)["step"].max().rename("_last").reset_index()
    table = table.merge(last, on=KEYS, how="left")
    steps = pd.to_numeric(table["steps"], errors="coerce")
    table["last_step"] = table["_last"].astype(float).fillna(steps)
    by_batch = protocols(study)
    budgets = {int(b): s.get("max_steps") for b, s in study.study_json.items()}
    reasons = []
    for row, step in zip(table.itertuples(index=False), steps):
        reason = row.stop_reason
        if isinstance(reason, str) and reason:
            reasons.append(reason)
            continue
        budget = _number(row.max_steps)
        budget = _number(budgets.get(int(row.batch_size))) if budget is None else budget
        protocol = by_batch.get(int(row.batch_size))
        early = (protocol is not None and protocol.early_stopping and budget is not None
                 and not math.isnan(step) and step < budget)
        reasons.append({"INFEASIBLE": STOP_DIVERGED,
                        "COMPLETE": protocol.stop_reasons[0] if early else STOP_BUDGET}
                       .get(row.status, ""))
    table["stop_reason"] = reasons
    return table[STOP_COLUMNS]


def _number(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def trial_censoring(study, goal: Goal, split: str = "val", stops=None) -> pd.DataFrame:
    """``stop_table`` plus ``beaten`` (the trial beat the goal at some evaluation) and
    ``censored`` (it stopped early without beating it: its curve ends at last_step)."""
    stops = stop_table(study) if stops is None else stops
    column = f"{split}/{goal.metric}"
    rows = study.measurements
    if column in rows.columns and not rows.empty:
        hit = rows.assign(_hit=goal.beats(rows[column])).groupby(KEYS)["_hit"].any()
        beaten = stops.merge(hit.rename("beaten").reset_index(), on=KEYS, how="left")["beaten"]
        beaten = beaten.astype("boolean").fillna(False).astype(bool).to_numpy()
    else:
        beaten = np.zeros(len(stops), dtype=bool)
    out = stops.assign(beaten=beaten)
    out["censored"] = out["stop_reason"].isin(_protocols.early_stop_reasons()).to_numpy() & ~beaten
    return out


def qualifiers(study, goal: Goal, split: str, found, stops=None, step_budget=None,
               example_budget=None) -> dict[int, tuple[str, int]]:
    """batch size -> (qualifier, stopped_early) for steps to result among the counted
    trials, ``found`` (batch size -> step, NaN if none) the value computed: EXACT, or
    UPPER_BOUND with the count of censored trials that stopped before it, or
    STOPPED_EARLY with the count of censored trials when none beat the goal. Under a
    budget only trials that stopped inside it count."""
    table = trial_censoring(study, goal, split, stops)
    table = table[table["censored"] & table["status"].isin(study.counted)]
    if step_budget is not None:
        table = table[table["last_step"] < step_budget]
    if example_budget is not None:
        table = table[table["last_step"] * table["batch_size"] < example_budget]
    out = {}
    for batch_size in study.batch_sizes:
        last = table.loc[table["batch_size"] == batch_size, "last_step"]
        step = found.get(batch_size, math.nan)
        if step is not None and not pd.isna(step):
            early = int((last < step).sum())
            out[batch_size] = (UPPER_BOUND if early else EXACT, early)
        else:
            out[batch_size] = (STOPPED_EARLY if len(last) else EXACT, int(len(last)))
    return out


def budget_censored(study, kind: str, budget, stops=None) -> set[int]:
    """Batch sizes whose best value under ``budget`` is censored: a counted trial there
    stopped early (goal or race) before the budget, so its later values are unknown."""
    stops = stop_table(study) if stops is None else stops
    early = stops[stops["stop_reason"].isin(_protocols.early_stop_reasons())
                  & stops["status"].isin(study.counted)]
    spent = early["last_step"] if kind == "steps" else early["last_step"] * early["batch_size"]
    return {int(b) for b in early.loc[spent < budget, "batch_size"]}


def refuse_unmeasurable(study) -> None:
    """Refuse (one-line SpecError) a goal of ``study.goals`` that the protocol made
    unmeasurable: not implied by the goals the trials stopped at, on a study where some
    trial stopped early and none, at any batch size, ran to its budget."""
    own = stopping_goals(study)
    stricter = [g for g in study.goals if not implied(g, own)]
    reasons = stop_table(study)["stop_reason"]
    if (not stricter or (reasons == STOP_BUDGET).any()
            or not reasons.isin(_protocols.early_stop_reasons()).any()):
        return
    goal = stricter[0]
    same_metric = any(g.metric == goal.metric for g in own)
    relation = "is stricter than" if same_metric else "is not implied by"
    goals = ", ".join(g.label for g in own) or "its goals"
    raise SpecError(f"goal {goal.label} {relation} the goals study {study.name!r} stopped its "
                    f"trials at ({goals}, protocol {protocol_label(study_protocol(study))}): "
                    "trials stopped once those were met, so steps to this goal cannot be "
                    f"measured; run a study with protocol: {_protocols.PAPER.name} or with this goal")
