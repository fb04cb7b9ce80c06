"""What a batch size's next search round adds, from what its finished trials showed.

The paper (Section 3, footnotes 13-14) tuned "with equal budgets of non-divergent trials"
and "if the optimal trial occurred near the boundary of the search space, or if the goal
validation error was not achieved within the search space, we repeated the search with a
new search space", by hand. ``next_round`` makes those calls:

- *re-search at an edge*: the best trial (fewest steps to the study's first goal) lies
  near an end of a parameter's searched range (the hull of every round's range, within
  ``core.edges.edge_margin`` of the batch size's trials, by ``core.edges.search_edge``):
  that parameter's new range is centred on the best value with twice the latest round's
  width, in the parameter's own scale (log for a learning rate); the other parameters
  keep the latest round's ranges. An edge that is a hard limit of the parameter
  (momentum cannot reach 1) is left alone.
- *re-search without a goal*: no trial reached the goal: every continuous range is
  centred on the trial that came closest, twice as wide.
- *top-up*: fewer than ``trials_per_batch_size`` non-divergent trials: more points of
  the latest space, enough for the divergence rate seen so far.
A re-search round samples ``trials_per_batch_size`` trials (or a top-up's count, if
larger). No round takes a batch size past ``spec.trial_cap`` trials. A batch size whose
round 1 searched a fitted box (``core.rounds.FittedFrom``) wants that round's count
instead of ``trials_per_batch_size`` (``core.rounds.wanted_trials``), in top-ups and
re-searches alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from batchscale.core.edges import edge_margin, from_scale, search_edge, to_scale
from batchscale.core.rounds import SearchRound, searched_configs, wanted_trials
from batchscale.core.spec import PARAMETER_BOUNDS, Parameter, StudySpec

SCALE_NAMES = {"linear": "LINEAR_SCALE", "log": "LOG_SCALE", "reverse_log": "REVERSE_LOG_SCALE"}
# Where a re-searched range must stop: a parameter's bounds (core.spec.PARAMETER_BOUNDS),
# with open ends pulled in (momentum, label smoothing and the Adam family's betas stay below 1).
OPEN_END = 1e-4
OPEN_BELOW_ONE = ("momentum", "label_smoothing", "beta_1", "beta_2")  # bounded by 1, never 1
LOWEST_DIVERGENCE_SURVIVAL = 0.25  # a top-up assumes at least this share will not diverge


@dataclass(frozen=True)
class TrialResult:
    """What the planner needs of one finished trial."""

    trial_id: int
    parameters: dict
    diverged: bool
    goal_step: int | None  # first step beating the study's first goal (None: not reached)
    best_value: float | None  # its best value of that goal's validation metric


def next_round(spec: StudySpec, rounds: list[SearchRound], results: list[TrialResult],
               number: int) -> SearchRound | None:
    """Round ``number`` for one batch size whose recorded trials are all finished, or
    None when nothing needs adding (or the trial cap leaves no room)."""
    room = spec.trial_cap - rounds[-1].last
    if room <= 0:
        return None
    wanted = wanted_trials(spec, rounds)
    alive = [r for r in results if not r.diverged]
    top_up = max(wanted - len(alive), 0)
    latest = rounds[-1].space
    best = best_trial(results)
    if best is not None:
        moved, why = _moved_at_edges(latest, searched_configs(rounds), best.parameters,
                                     edge_margin(len(results)))
        if moved:
            return _round(number, rounds, replace_space(latest, moved), max(wanted, top_up), room,
                          f"re-search: best trial {best.trial_id}'s {why}")
    elif alive and any(r.best_value is not None for r in alive):
        goal = spec.goals[0]
        sign = 1 if goal.direction == "minimize" else -1
        closest = min((r for r in alive if r.best_value is not None),
                      key=lambda r: (sign * r.best_value, r.trial_id))
        moved = {p.name: widened for p in latest
                 if (widened := recentred(p, closest.parameters.get(p.name))) is not None}
        if moved:
            return _round(number, rounds, replace_space(latest, moved), max(wanted, top_up), room,
                          f"re-search: no trial reached {goal.label}; ranges widened around "
                          f"trial {closest.trial_id}, the closest")
    if top_up:
        return _round(number, rounds, latest, _scaled(top_up, len(alive), len(results)), room,
                      f"top-up: {len(alive)} of {wanted} trials non-divergent")
    return None


def best_trial(results: list[TrialResult]) -> TrialResult | None:
    """The batch size's best trial: fewest steps to the study's first goal, ties to the
    lower id (None: no non-divergent trial reached it)."""
    reached = [r for r in results if not r.diverged and r.goal_step is not None]
    return min(reached, key=lambda r: (r.goal_step, r.trial_id)) if reached else None


def recentred(p: Parameter, value) -> Parameter | None:
    """``p``'s range centred on ``value`` (in its scale) and twice as wide, within the
    parameter's limits; None for a discrete parameter or a missing value."""
    if p.values is not None or value is None or p.min is None or p.max is None:
        return None
    scale = SCALE_NAMES[p.scale]
    low, high = parameter_limits(p)
    half = to_scale(p.max, scale) - to_scale(p.min, scale)
    centre = to_scale(min(max(float(value), low), high), scale)
    lo = max(from_scale(centre - half, scale), low)
    hi = min(from_scale(centre + half, scale), high)
    if p.integer:
        lo, hi = max(math.floor(lo), math.ceil(low)), max(math.ceil(hi), math.ceil(low))
    return replace(p, min=lo, max=hi) if hi > lo else None


def replace_space(space: tuple[Parameter, ...], moved: dict[str, Parameter]) -> tuple[Parameter, ...]:
    return tuple(moved.get(p.name, p) for p in space)


def _moved_at_edges(space, hull: dict, best: dict,
                    margin: float) -> tuple[dict[str, Parameter], str]:
    """The parameters whose best value sits at an edge of the hull, re-centred, when the
    new range reaches past that edge; and the words for why."""
    moved, why = {}, []
    for p in space:
        value = best.get(p.name)
        found = search_edge(value, hull.get(p.name) or {}, margin) if value is not None else None
        if found is None:
            continue
        edge, bounds, where = found
        new = recentred(p, value)
        if new is None or (new.max <= bounds[1] if edge == "max" else new.min >= bounds[0]):
            continue  # a hard limit: nothing beyond this edge to search
        moved[p.name] = new
        why.append(f"{p.name} {value:.3g} is {where} [{bounds[0]:.3g}, {bounds[1]:.3g}]")
    return moved, "; ".join(why)


def parameter_limits(p: Parameter) -> tuple[float, float]:
    """The lowest and highest value a range of ``p`` may reach: its bounds
    (core.spec.PARAMETER_BOUNDS), above 0 on a log scale, below 1 by OPEN_END where 1 is
    an open end (also the fitted box's limits, search.metaparameter_laws)."""
    low, high, _ = PARAMETER_BOUNDS.get(p.name, (-math.inf, math.inf, ""))
    if p.scale == "log":
        low = max(low, math.ulp(0.0))  # a log scale stays above 0
    if p.scale == "reverse_log" or p.name in OPEN_BELOW_ONE:
        high = min(high, 1.0 - OPEN_END)
    return low, high


def _scaled(deficit: int, alive: int, total: int) -> int:
    """Trials to add so that ``deficit`` more survive, at the survival rate seen so far."""
    survival = max(alive / total if total else 1.0, LOWEST_DIVERGENCE_SURVIVAL)
    return math.ceil(deficit / survival)


def _round(number, rounds, space, count, room, reason) -> SearchRound:
    first = rounds[-1].last + 1
    return SearchRound(number, first, first + min(count, room) - 1, space, reason)
