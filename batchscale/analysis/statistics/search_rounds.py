"""The report's "Search rounds": what each round of a batch size searched, and what it found.

The paper re-searched a batch size when its best trial sat at the edge of the searched
range, and ran more trials where many diverged (Section 3); batchscale's planner does the
same in rounds, recorded in each batch size's study.json (``search_rounds``, see
``batchscale.core.rounds``). A reader should see, per round, which trials it added and
why, how many did not diverge, what range it searched, the best trial found so far and
whether the edge warning was resolved, i.e. whether the best trial so far lies inside
the hull of every range searched up to then (``core.edges.search_edge``). A study.json
without rounds (older stores, the paper's database) is one round: every trial id, the
top-level ``parameter_configs``, "initial search". A batch size added to a grown study
may have started from the box the metaparameter laws fit (``core.new_batch_sizes``): its
round 1's reason says so, and a note names the trials it was fitted from and the count of
non-divergent trials it wants instead of trials_per_batch_size.
"""

from __future__ import annotations

import pandas as pd

from batchscale.analysis.reading.completeness import id_ranges
from batchscale.analysis.statistics.metaparameters import fmt_value
from batchscale.core.edges import edge_margin, hull_configs, search_edge
from batchscale.core.rounds import FITTED_KEY, FittedFrom, FittedSource

INITIAL = "initial search"
ROUND_COLUMNS = ["batch_size", "round", "trial_ids", "trials", "finished", "non_divergent",
                 "search_space", "reason", "best_trial", "steps_to_result", "at_edge",
                 "edge_warning"]
SCALE_WORDS = {"LOG_SCALE": "log", "REVERSE_LOG_SCALE": "reverse log", "LINEAR_SCALE": "linear"}


def batch_rounds(study_json: dict, trial_ids, wanted: int | None = None) -> list[dict]:
    """A batch size's rounds as dicts (round, first, last, reason, parameter_configs,
    fitted_from: the (batch size, trial id) sources of a round 1 that searched a fitted
    box, else empty). A lone round 1 grows with ``wanted`` (the spec's
    trials_per_batch_size), as the planner reads it, unless it searched a fitted box; no
    usable ``search_rounds``: one round holding ``trial_ids`` (and 1..wanted) as ``ids``."""
    rounds = []
    for raw in study_json.get("search_rounds") or []:
        try:
            first, last = (int(i) for i in raw["trial_ids"])
            rounds.append({"round": int(raw.get("round", len(rounds) + 1)), "first": first,
                           "last": last, "reason": str(raw.get("reason") or ""),
                           "parameter_configs": raw.get("parameter_configs") or {},
                           "fitted_from": fitted_sources(raw.get(FITTED_KEY))})
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    if not rounds:  # the ids themselves: the paper's are not contiguous
        ids = {int(i) for i in trial_ids} | set(range(1, (wanted or 0) + 1))
        return [{"round": 1, "first": min(ids, default=1), "last": max(ids, default=0),
                 "ids": ids, "reason": INITIAL, "fitted_from": [],
                 "parameter_configs": study_json.get("parameter_configs") or {}}]
    if wanted and len(rounds) == 1 and not rounds[0]["fitted_from"] and rounds[0]["last"] < wanted:
        rounds[0]["last"] = wanted  # a fitted round 1 keeps its count
    return sorted(rounds, key=lambda r: r["round"])


def fitted_sources(raw) -> list[FittedSource]:
    """The sources a fitted round 1 records (``core.rounds.FittedFrom``: each settled batch
    size's best and near-best trials); empty for any other round or a record that is not one."""
    try:
        return list(FittedFrom.from_dict(raw).sources) if raw is not None else []
    except (KeyError, TypeError, ValueError, AttributeError):
        return []


def wanted_of(rounds: list[dict], wanted: int) -> int:
    """The non-divergent trials a batch size wants (``core.rounds.wanted_trials``):
    ``wanted`` (trials_per_batch_size), or, where round 1 searched a fitted box, its count."""
    first = rounds[0] if rounds else {}
    return first["last"] - first["first"] + 1 if first.get("fitted_from") else wanted


def round_ids(one_round: dict) -> set[int]:
    """The trial ids of one round (``batch_rounds``' dicts)."""
    return set(one_round.get("ids") or range(one_round["first"], one_round["last"] + 1))


def planned_ids(rounds: list[dict]) -> set[int]:
    """Every trial id the rounds hold."""
    return set().union(*(round_ids(r) for r in rounds))


def space_text(configs: dict) -> str:
    """``"learning_rate [0.003, 0.03] log; momentum [0.8, 0.97] reverse log"``."""
    parts = []
    for name, config in (configs or {}).items():
        config = config or {}
        if config.get("type") == "DISCRETE":
            points = ", ".join(fmt_value(p) for p in config.get("feasible_points") or [])
            parts.append(f"{name} {{{points}}}")
            continue
        scale = SCALE_WORDS.get(config.get("scale", ""), "")
        text = f"{name} [{fmt_value(config.get('min_value'))}, {fmt_value(config.get('max_value'))}]"
        parts.append(f"{text} {scale}".rstrip())
    return "; ".join(parts)


def _hull(configs: list[dict]) -> dict:
    try:
        return hull_configs(configs)
    except (KeyError, TypeError):  # a round without a min or max: the last one's ranges
        return configs[-1] if configs else {}


def _edges(params: dict, configs: dict, trials: int) -> list[str]:
    """"learning_rate at the top of [0.003, 0.03]" per parameter at an edge of ``configs``."""
    found = []
    for name, config in configs.items():
        value = params.get(name)
        if value is None or pd.isna(value):
            continue
        edge = search_edge(value, config or {}, edge_margin(trials))
        if edge is not None:
            end = "top" if edge[0] == "max" else "bottom"
            found.append(f"{name} {fmt_value(value)} at the {end} of "
                         f"[{fmt_value(edge[1][0])}, {fmt_value(edge[1][1])}]")
    return found


def rounds_table(study, crossed: pd.DataFrame) -> pd.DataFrame:
    """One row per batch size and round (ROUND_COLUMNS). ``crossed``: the counted trials'
    first crossings of the primary goal (``steps.crossings``: batch_size, trial_id, step);
    the best trial after round r has the fewest steps among trials of rounds <= r (ties
    to the lower id). ``at_edge``: that trial sits at an edge of the hull of rounds <= r
    (None without a best trial); ``edge_warning`` says where, or "resolved" once a
    round's best is inside after an earlier one's was at an edge."""
    wanted = study.spec.trials_per_batch_size if study.spec is not None else None
    trials = study.trials
    rows = []
    for batch_size in study.batch_sizes:
        group = trials[trials["batch_size"] == batch_size]
        rounds = batch_rounds(study.study_json.get(batch_size) or {}, group["trial_id"], wanted)
        hits = crossed[(crossed["batch_size"] == batch_size) & crossed["step"].notna()]
        params = group.set_index("trial_id")
        earlier_edge, seen, configs = False, set(), []
        for r in rounds:
            ids = round_ids(r)
            seen |= ids
            configs.append(r["parameter_configs"])
            mine = group[group["trial_id"].isin(ids)]
            finished = mine[mine["status"].isin(("COMPLETE", "INFEASIBLE"))]
            best = hits[hits["trial_id"].isin(seen)].sort_values(["step", "trial_id"]).head(1)
            row = {"batch_size": batch_size, "round": r["round"],
                   "trial_ids": id_ranges(ids) if ids else "", "trials": len(ids),
                   "finished": len(finished),
                   "non_divergent": int((finished["status"] != "INFEASIBLE").sum()),
                   "search_space": space_text(r["parameter_configs"]), "reason": r["reason"],
                   "best_trial": None, "steps_to_result": None, "at_edge": None,
                   "edge_warning": ""}
            if len(best):
                trial_id = int(best["trial_id"].iloc[0])
                edges = _edges(params.loc[trial_id].to_dict() if trial_id in params.index else {},
                               _hull(configs), len(seen))
                row.update(best_trial=trial_id, steps_to_result=int(best["step"].iloc[0]),
                           at_edge=bool(edges),
                           edge_warning="; ".join(edges) or ("resolved" if earlier_edge else ""))
                earlier_edge = bool(edges)
            rows.append(row)
    return pd.DataFrame.from_records(rows, columns=ROUND_COLUMNS)


def fitted_note(batch_size: int, first: dict, per_batch_size: int) -> str:
    """What a batch size that started from a fitted box searched, and what it wants."""
    sources = ", ".join(f"{s.batch_size}/{s.trial_id}" for s in first["fitted_from"])
    near = sum(len(s.near_best) for s in first["fitted_from"])
    count = first["last"] - first["first"] + 1
    return (f"batch size {batch_size} started from a fitted box: round 1's {count} trials "
            f"searched the box the metaparameter laws fit to the best trials {sources} "
            f"(batch size/trial; and {near} near-best), and it wants {count} non-divergent "
            f"trials where the others want {per_batch_size}")


def trial_cap_notes(study) -> list[str]:
    """Per batch size (our studies only: the spec says how many are wanted): which started
    from a fitted box (``fitted_note``); whether it has the non-divergent trials it wants
    (trials_per_batch_size, or a fitted round's count), and if not why: the trial cap
    (max_trials_per_batch_size, 0 = 4 x trials_per_batch_size) or the round limit was
    reached, or trials are not finished yet."""
    spec = study.spec
    if spec is None:
        return []
    per_batch_size = int(spec.trials_per_batch_size)
    cap = int(getattr(spec, "max_trials_per_batch_size", 0) or 4 * per_batch_size)
    max_rounds = getattr(spec, "max_rounds", None)
    notes = []
    for batch_size in study.batch_sizes:
        group = study.trials[study.trials["batch_size"] == batch_size]
        rounds = batch_rounds(study.study_json.get(batch_size) or {}, group["trial_id"],
                              per_batch_size)
        planned = planned_ids(rounds)
        wanted = wanted_of(rounds, per_batch_size)
        if rounds[0]["fitted_from"]:
            notes.append(fitted_note(batch_size, rounds[0], per_batch_size))
        good = int((group["status"] == "COMPLETE").sum())
        if good >= wanted:
            notes.append(f"batch size {batch_size}: {good} non-divergent, the {wanted} wanted")
            continue
        head = f"batch size {batch_size}: {good} of {wanted} non-divergent"
        unfinished = len(planned - set(group.loc[group["status"].isin(("COMPLETE", "INFEASIBLE")),
                                                 "trial_id"]))
        if len(planned) >= cap:
            why = f"the trial cap ({cap}) was reached"
        elif max_rounds and len(rounds) >= max_rounds:
            why = f"the round limit ({max_rounds}) was reached ({len(planned)} of at most {cap} trials)"
        elif unfinished:
            why = f"{unfinished} trial(s) not finished yet"
        else:
            why = f"no further round was run ({len(planned)} of at most {cap} trials)"
        notes.append(f"{head}: {why}")
    return notes
