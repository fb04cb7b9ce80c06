"""When a trial is evaluated: the geometric grid of evaluation steps."""

from __future__ import annotations

import math


def evaluation_steps(max_steps: int, resolution: float) -> list[int]:
    """Steps 0, 1, 2, ... on a geometric grid, each at most ``resolution`` past the last.

    The first step that beats a goal lies in (previous evaluation, this evaluation], so
    steps to result is known to within ``resolution`` relative error at every batch
    size, from a batch size that needs 40 steps to one that needs 40,000. The budget
    ``max_steps`` is always evaluated.
    """
    steps = [0]
    while steps[-1] < max_steps:
        steps.append(min(max_steps, max(steps[-1] + 1, math.floor(steps[-1] * (1 + resolution)))))
    return steps
