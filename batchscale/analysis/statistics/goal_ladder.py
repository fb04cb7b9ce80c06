"""A goal ladder's findings (§4.2, Figure 2: the goal shifts the curve only vertically).

Consecutive goals of the ladder, each a ``findings.Curve`` of the one study:

- ``goal_shift``: B* of the two compared by ``findings.compare_bounds``' disjoint rule
  (disjoint: the goal changes the curve's shape, not only its height; overlapping: "not
  resolved", as a purely vertical shift would have it; a B* with no bound: only "not
  resolved");
- ``goal_ratio``: the ratio of steps between the goals at each batch size both reached
  after a step; "roughly constant" only when its max/min is at most ``RATIO_SPREAD``.
"""

from __future__ import annotations

from batchscale.analysis.statistics.findings import (
    Curve,
    Finding,
    compare_bounds,
    estimate_of,
    interval_ends,
    sizes_text,
    steps_by_batch_size,
)

RATIO_SPREAD = 1.25  # the goal ratio's max/min up to which it is called roughly constant


def goal_findings(curves: list[Curve]) -> list[Finding]:
    """A goal ladder (§4.2): consecutive goals' B* and their ratio of steps per batch size."""
    out = []
    for a, b in zip(curves, curves[1:]):
        found = compare_bounds("goal", "goal_shift", a, b, "b_star")
        if found.resolved:
            found = Finding("goal", "goal_shift", found.studies, found.sentence + ": the goal "
                            "changes the curve's shape, not only its height", found.numbers, True)
        elif all(interval_ends(estimate_of(c, "b_star")) is not None for c in (a, b)):
            # overlapping intervals; with a B* not bounded at all the data say nothing either way
            found = Finding("goal", "goal_shift", found.studies, found.sentence + ", as a purely "
                            "vertical shift of the curve would have it", found.numbers, False)
        out += [found, goal_ratio(a, b)]
    return out


def goal_ratio(a: Curve, b: Curve) -> Finding:
    """The ratio of steps, b over a, at the batch sizes both reached after a step (a goal
    met at step 0, before training, gives no ratio)."""
    sa, sb = steps_by_batch_size(a), steps_by_batch_size(b)
    common = sorted(set(sa[sa > 0].index) & set(sb[sb > 0].index))
    if not common:
        return Finding("goal", "goal_ratio", (a.name, b.name), f"no batch size reached both "
                       f"{a.name} and {b.name}: no ratio of steps", {}, False)
    ratios = {int(B): float(sb[B] / sa[B]) for B in common}
    low, high = min(ratios.values()), max(ratios.values())
    spread = high / low
    verdict = (f"roughly constant (max/min {spread:.2f} ≤ {RATIO_SPREAD})" if spread <= RATIO_SPREAD
               else f"varies by a factor {spread:.2f} across batch sizes")
    text = (f"steps to result for {b.name} are {low:.2f}–{high:.2f} times those for "
            f"{a.name} at batch sizes {sizes_text(common)}: {verdict}")
    return Finding("goal", "goal_ratio", (a.name, b.name), text,
                   {"ratios": {str(k): v for k, v in ratios.items()}, "spread": spread},
                   len(common) >= 2)

