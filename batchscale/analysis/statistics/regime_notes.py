"""The notes of a regime fit: what the data do not determine, in words the table bears out.

A boundary (B_star, the end of perfect scaling, the maximum useful batch size) whose value
or interval leaves the measured batch sizes gets a note. Some notes say what the measured
steps show at the edge of the range: "larger batches would still save steps", "scaling is
still near-perfect at the largest batch size". The fit can say so where the table does
not: the quickstart's fit put the maximum useful batch size beyond 4,000 while 4,000 took
more steps (50) than 2,048 (30). So each such claim is checked against the points fitted,
which are the table's steps to result (the fewest steps of each batch size that reached
the goal); where the table does not bear it out, the note says where the fit puts the
boundary and what the table shows there instead.
"""

from __future__ import annotations

import math

from batchscale.analysis.statistics.intervals import ABOVE, BELOW, UNDETERMINED, number

PERFECT_SCALING_EFFICIENCY = 0.8
"""Local scaling efficiency e(B) = -dlogS/dlogB = B_star / (B + B_star) at which perfect scaling
ends: e = 0.8 at B = B_star * (1 - e) / e = B_star / 4, where steps are 25% above the perfect-scaling
extrapolation S_min * B_star / B."""
USEFUL_STEPS_FACTOR = 1.1
"""Maximum useful batch size: S = 1.1 * S_min at B = B_star / (1.1 - 1) = 10 * B_star. Beyond it no
batch size can save more than 1 - 1/1.1 (about 9%) of the steps."""
USEFUL_SAVING = 1 - 1 / USEFUL_STEPS_FACTOR

BOUNDARIES = {  # name: (label, B / B_star)
    "b_star": ("fitted critical batch size B* (S = 2 S_min)", 1.0),
    "perfect_scaling_end": (f"end of perfect scaling (efficiency {PERFECT_SCALING_EFFICIENCY})",
                            (1 - PERFECT_SCALING_EFFICIENCY) / PERFECT_SCALING_EFFICIENCY),
    "max_useful_batch_size": (f"maximum useful batch size (S = {USEFUL_STEPS_FACTOR} S_min)",
                              1 / (USEFUL_STEPS_FACTOR - 1)),
}


def efficiency(sizes, steps, i: int, j: int) -> float:
    """Local scaling efficiency between points i and j of the table: log(S_i/S_j) / log(B_j/B_i)
    (1: the steps halve as the batch doubles; 0: flat; negative: they rose)."""
    return math.log(steps[i] / steps[j]) / math.log(sizes[j] / sizes[i])


def _pair(sizes, steps, i: int, j: int) -> str:
    return f"{number(sizes[i])}: {number(steps[i])} steps, {number(sizes[j])}: {number(steps[j])}"


def _above(name: str, sizes, steps, s_min: float) -> str:
    """The note of a boundary the fit puts beyond the largest batch size (``{low}`` to fill)."""
    hi, top = number(sizes[-1]), _pair(sizes, steps, -2, -1)
    beyond = f"the fit puts it beyond the largest batch size measured ({hi}), though "
    if name == "b_star":
        if steps[-1] > 2 * s_min:
            return (f"steps at the largest batch size ({hi}) are still more than twice S_min; "
                    "B_star ≥ {low}")
        return (beyond + f"the steps there ({number(steps[-1])}) are already within 2x of the fitted "
                f"S_min ({number(s_min)}); B_star ≥ {{low}}")
    if name == "perfect_scaling_end":
        if efficiency(sizes, steps, -2, -1) >= PERFECT_SCALING_EFFICIENCY:
            return f"scaling is still near-perfect at the largest batch size ({hi}); it ends at B ≥ {{low}}"
        return (beyond + f"the table does not show near-perfect scaling at the largest batch sizes "
                f"({top}); it ends at B ≥ {{low}}")
    if steps[-1] < steps[-2]:
        return (f"the curve has not flattened by the largest batch size ({hi}); larger batches would "
                "still save steps; maximum useful batch size ≥ {low}")
    return (beyond + f"the steps did not fall at the largest batch sizes ({top}), so the table does "
            "not show that larger batches would save steps; maximum useful batch size ≥ {low}")


def _below(name: str, sizes, steps, s_min: float) -> str:
    """The note of a boundary the fit puts below the smallest batch size (``{high}`` to fill)."""
    lo = number(sizes[0])
    below = f"the fit puts it below the smallest batch size measured ({lo}), though "
    if name == "b_star":
        if steps[0] <= 2 * s_min:
            return (f"steps at the smallest batch size ({lo}) are already within 2x of S_min; "
                    "B_star ≤ {high}")
        return (below + f"the steps there ({number(steps[0])}) are more than twice the fitted S_min "
                f"({number(s_min)}); B_star ≤ {{high}}")
    if name == "perfect_scaling_end":
        if efficiency(sizes, steps, 0, 1) < PERFECT_SCALING_EFFICIENCY:
            return (f"perfect scaling already ended before the smallest batch size ({lo}); it ends at "
                    "B ≤ {high}")
        return (below + f"the table shows near-perfect scaling there ({_pair(sizes, steps, 0, 1)}); "
                "it ends at B ≤ {high}")
    best = min(range(1, len(steps)), key=lambda i: steps[i])
    if steps[best] >= steps[0] / USEFUL_STEPS_FACTOR:
        return (f"the curve is already flat at the smallest batch size ({lo}): no larger batch size "
                f"saves more than {USEFUL_SAVING:.0%} of the steps; maximum useful batch size ≤ {{high}}")
    return (below + f"batch size {number(sizes[best])} took {number(steps[best])} steps, "
            f"{1 - steps[best] / steps[0]:.0%} fewer than {lo}'s {number(steps[0])}; maximum useful "
            "batch size ≤ {high}")


_PARTIAL = {  # the estimate is inside the measured range but one end of its interval is not
    ABOVE: "the fit puts it at {value}, but its {pct} interval reaches past the largest batch size "
           "measured ({hi}): the data bound it only from below (≥ {low})",
    BELOW: "the fit puts it at {value}, but its {pct} interval reaches below the smallest batch "
           "size measured ({lo}): the data bound it only from above (≤ {high})",
}
_UNDETERMINED = ("undetermined: the fit puts it at {value}, but its {pct} interval extends beyond "
                 "both the smallest ({lo}) and the largest ({hi}) batch size measured")


def boundary_note(name: str, status: str, value: float, low: float, high: float, sizes, steps,
                  s_min: float, level: float) -> str | None:
    """The note on boundary ``name`` (a key of BOUNDARIES) with this status, or None when the
    measured batch sizes pin it down. ``sizes``/``steps``: the points fitted, ascending."""
    lo_b, hi_b = sizes[0], sizes[-1]
    if status in (ABOVE, BELOW) and lo_b <= value <= hi_b:  # only the interval leaves the range
        text = _PARTIAL[status]
    elif status == ABOVE:
        text = _above(name, sizes, steps, s_min)
    elif status == BELOW:
        text = _below(name, sizes, steps, s_min)
    elif status == UNDETERMINED:
        text = _UNDETERMINED
    else:
        return None
    low, high = (value, value) if math.isnan(low) else (low, high)  # no resamples: the value
    filled = text.format(value=number(value), lo=number(lo_b), hi=number(hi_b), low=number(low),
                         high=number(high), pct=f"{level:.0%}")
    return f"{BOUNDARIES[name][0]}: {filled}"
