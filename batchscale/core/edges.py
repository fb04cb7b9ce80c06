"""Where a value lies in a searched range, in the range's own scale: the one edge rule.

The paper re-searched a batch size "if the optimal trial occurred near the boundary of
the search space" (Section 3). The report's edge warnings (``analysis.statistics.metaparameters``)
and the round planner that re-searches such batch sizes (``batchscale.rounds``) both
ask ``search_edge``; ranges are in the paper's study.json ``parameter_configs`` form.

Scales: LOG_SCALE measures log(v); REVERSE_LOG_SCALE measures −log(1−v), so 1 − v is
log-uniform and the top of the range is still the largest value (momentum near 1).
"""

from __future__ import annotations

import math

EDGE_MARGIN = 0.05  # a best value within this share of a range's end sits "at the edge"
MAX_EDGE_MARGIN = 0.2


def edge_margin(trials: int) -> float:
    """How near an end of a searched range a best value must lie to count as at its edge,
    for a range searched by ``trials`` quasi-random trials: 1/trials, between EDGE_MARGIN
    (5%, from 20 trials on: the paper's 100 trials) and MAX_EDGE_MARGIN. Along one
    parameter the points of a Halton sequence lie about 1/trials apart, so when the best
    value lies beyond an end, the best trial is the one nearest that end, up to 1/trials
    inside it: a fixed 5% would miss it in most small searches."""
    if trials <= 0:
        return EDGE_MARGIN
    return min(max(EDGE_MARGIN, 1.0 / trials), MAX_EDGE_MARGIN)


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def to_scale(value: float, scale: str) -> float:
    """``value`` in the scale's own unit (the identity for LINEAR_SCALE)."""
    if scale == "LOG_SCALE":
        return math.log(value)
    if scale == "REVERSE_LOG_SCALE":
        return -math.log1p(-value)
    return value


def from_scale(position: float, scale: str) -> float:
    """The inverse of ``to_scale``."""
    if scale == "LOG_SCALE":
        return math.exp(position)
    if scale == "REVERSE_LOG_SCALE":
        return -math.expm1(-position)
    return position


def unit_position(value: float, lo: float, hi: float, scale: str) -> float | None:
    """Where ``value`` lies in [lo, hi] in the scale's own unit: 0 at min, 1 at max.

    Falls back to linear where the transform is undefined (log of a non-positive bound);
    None for an empty range.
    """
    if scale == "LOG_SCALE" and lo > 0 and hi > 0 and value > 0:
        value, lo, hi = math.log(value), math.log(lo), math.log(hi)
    elif scale == "REVERSE_LOG_SCALE" and lo < 1 and hi < 1 and value < 1:
        value, lo, hi = -math.log1p(-value), -math.log1p(-lo), -math.log1p(-hi)
    if hi == lo:
        return None
    return (value - lo) / (hi - lo)


def search_edge(value, config: dict, margin: float = EDGE_MARGIN):
    """``(edge, [lo, hi], wording)`` when ``value`` is at an end of the range ``config``
    (one parameter's paper ``parameter_configs`` entry), else None; edge is "min" or "max".

    Continuous parameters (DOUBLE/INTEGER with min and max) are at an edge when their
    position in the range, in the scale's own unit, is ≤ margin or ≥ 1 − margin. DISCRETE
    parameters are at an edge at the smallest or largest feasible point only when there
    are at least 3 points (with 2, every value is an end).
    """
    kind = config.get("type", "")
    if kind == "DISCRETE":
        try:
            points = sorted(config.get("feasible_points") or [])
        except TypeError:  # mixed types: no order to speak of
            return None
        if len(points) < 3 or value not in points:
            return None
        bounds = [points[0], points[-1]]
        if value == points[-1]:
            return "max", bounds, "the largest of the feasible points"
        if value == points[0]:
            return "min", bounds, "the smallest of the feasible points"
        return None
    lo, hi = config.get("min_value"), config.get("max_value")
    if kind not in ("DOUBLE", "INTEGER") or _missing(lo) or _missing(hi):
        return None
    try:
        lo, hi, value = float(lo), float(hi), float(value)
    except (TypeError, ValueError):
        return None
    position = unit_position(value, lo, hi, config.get("scale", ""))
    if position is None:
        return None
    near_max, near_min = position >= 1 - margin, position <= margin
    if near_max and (not near_min or position >= 0.5):  # margin >= 0.5: the nearer end
        return "max", [lo, hi], "at the top of the searched range"
    if near_min:
        return "min", [lo, hi], "at the bottom of the searched range"
    return None


def hull_configs(configs: list[dict]) -> dict:
    """The searched ranges of several searches of one batch size, as one
    ``parameter_configs``: per parameter, the smallest range holding every search's range
    (DISCRETE: every feasible point). A best value inside the hull is inside what was
    searched, whichever search found it."""
    out: dict = {}
    for config in configs:
        for name, entry in config.items():
            seen = out.get(name)
            if seen is None:
                out[name] = dict(entry)
            elif entry.get("type") == "DISCRETE":
                points = list(seen.get("feasible_points") or [])
                points += [p for p in entry.get("feasible_points") or [] if p not in points]
                seen["feasible_points"] = sorted(points)
            else:
                seen["min_value"] = min(seen["min_value"], entry["min_value"])
                seen["max_value"] = max(seen["max_value"], entry["max_value"])
    return out
