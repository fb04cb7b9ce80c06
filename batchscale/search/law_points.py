"""The points a metaparameter law is fitted to, and what a value must be to take part.

A point is ``(batch_size, best trial's parameters, near-best trials' parameters)``, one per
measured batch size (``search.metaparameter_laws``). ``validated`` checks and sorts them
(one-line ValueErrors); ``points_from_results`` makes them from the round planner's
finished trials. A value is fitted as log v, or log(1 − v) for a momentum-like parameter
(``y_of``); ``effective_learning_rate`` is derived, η/(1−γ) (``core.names``).
"""

from __future__ import annotations

import math

import numpy as np

from batchscale.core.names import effective_learning_rate
from batchscale.search.next_round import TrialResult, best_trial

MIN_BATCH_SIZES = 3
NEAR_BEST = 0.10  # trials within 10% of the best trial's steps to the goal count as near-best
MOMENTUM_LIKE = ("momentum", "beta_1", "beta_2")  # fitted on log(1 - v)
EFFECTIVE = "effective_learning_rate"


def points_from_results(results: dict[int, list[TrialResult]],
                        near: float = NEAR_BEST) -> list[tuple[int, dict, list[dict]]]:
    """``fit_laws``' points from each batch size's finished trials (``next_round``'s
    ``TrialResult``, as the round planner holds them): the best trial by next_round's rule
    (fewest steps to the first goal, ties to the lower id) and the non-divergent trials
    within ``near`` of its steps; batch sizes where no trial reached the goal are left out."""
    points = []
    for batch_size in sorted(results):
        found = best_and_near_best(results[batch_size], near)
        if found is not None:
            best, others = found
            points.append((int(batch_size), dict(best.parameters), [r.parameters for r in others]))
    return points


def best_and_near_best(results: list[TrialResult], near: float = NEAR_BEST
                       ) -> tuple[TrialResult, list[TrialResult]] | None:
    """One batch size's best trial (``next_round.best_trial``) and its other non-divergent
    trials within ``near`` of its steps to the goal; None: no trial reached the goal. The
    one rule of a point, for ``points_from_results`` and the fitted box's recorded sources
    (``rounds.fitted_round``)."""
    best = best_trial(results)
    if best is None:
        return None
    return best, [r for r in results if r is not best and not r.diverged
                  and r.goal_step is not None and r.goal_step <= best.goal_step * (1 + near)]


def validated(points) -> list[tuple[int, dict, list]]:
    """(batch size, best, near-best) sorted by batch size; one-line ValueErrors."""
    table = []
    for point in points or []:
        if not isinstance(point, (tuple, list)) or len(point) not in (2, 3):
            raise ValueError(f"point {point!r} is not (batch_size, parameters[, near_best])")
        batch, best = point[0], point[1]
        if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
            raise ValueError(f"batch size {batch!r} is not an integer >= 1")
        if not isinstance(best, dict):
            raise ValueError(f"batch size {batch}: parameters {best!r} are not a dict")
        table.append((int(batch), best, list(point[2]) if len(point) == 3 else []))
    table.sort(key=lambda row: row[0])
    sizes = [b for b, _, _ in table]
    if len(set(sizes)) != len(sizes):
        raise ValueError(f"batch sizes {sizes} repeat: give one point per batch size")
    if len(sizes) < MIN_BATCH_SIZES:
        raise ValueError(f"a law needs at least {MIN_BATCH_SIZES} measured batch sizes with a "
                         f"best trial; got {len(sizes)}")
    return table


def number_of(params: dict, name: str) -> float | None:
    """``name``'s finite number in ``params`` (the effective learning rate derived), or None."""
    if name == EFFECTIVE and name not in params:
        lr, momentum = number_of(params, "learning_rate"), number_of(params, "momentum")
        return None if lr is None else float(effective_learning_rate(lr, momentum or 0.0))
    found = params.get(name)
    if isinstance(found, bool) or not isinstance(found, (int, float, np.number)):
        return None
    return float(found) if math.isfinite(found) else None


def y_of(name: str, value: float) -> float:
    return math.log1p(-value) if name in MOMENTUM_LIKE else math.log(value)


def ok(name: str, value: float | None) -> bool:
    if value is None:
        return False
    return value < 1 if name in MOMENTUM_LIKE else value > 0


def usable(table, name: str) -> bool:
    return all(ok(name, number_of(p, name)) for _, p, _ in table)


def varies(table, name: str) -> bool:
    return len({number_of(p, name) for _, p, _ in table}) > 1


def has_momentum(table) -> bool:
    values = [number_of(p, "momentum") for _, p, _ in table]
    return all(v is not None and v < 1 for v in values) and any(v for v in values)


def near_best_variance(table, name: str) -> float:
    """Mean over points of the variance (log units) of the best and near-best values."""
    spreads = []
    for _, best, near in table:
        ys = [y_of(name, v) for v in (number_of(q, name) for q in [best, *near]) if ok(name, v)]
        if len(ys) >= 2:
            spreads.append(float(np.var(ys, ddof=1)))
    return float(np.mean(spreads)) if spreads else 0.0
