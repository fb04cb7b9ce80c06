"""The batch sizes a study should measure, given the predicted noise scale.

Powers of two from about B_low / 16, well inside perfect scaling (steps proportional to
1/B up to about B*/4), to about 16 B_high, past the maximum useful batch size (S = 1.1
S_min at 10 B*), where (B_low, B_high) is the noise scale's interval: the fit of
S(B) = S_min (1 + B*/B) needs points on both sides of the knee to pin B* and S_min down.
Clipped to [smallest, largest] (largest: the training set, full-batch training, which is
included when the range reaches it), and widened a power of two at a time, below first,
until it holds ``MIN_POINTS`` batch sizes where the limits allow.
"""

from __future__ import annotations

import math

BELOW = 16  # the grid starts this factor below the interval's low end ...
ABOVE = 16  # ... and ends this factor above its high end
MIN_POINTS = 5


def propose_grid(noise, largest: int, smallest: int = 1) -> list[int]:
    """Batch sizes for a study (see the module docstring); ``noise`` has ``low``/``high``."""
    if not 1 <= smallest <= largest:
        raise ValueError(f"propose_grid needs 1 <= smallest <= largest, got {smallest}, {largest}")
    low = noise.low if math.isfinite(noise.low) and noise.low > 0 else noise.value
    high = noise.high if math.isfinite(noise.high) else largest
    start = max(smallest, low / BELOW)
    end = min(largest, max(start, high * ABOVE))
    lo_exp = math.floor(math.log2(start))
    hi_exp = math.ceil(math.log2(end))
    grid = {2 ** e for e in range(lo_exp, hi_exp + 1) if smallest <= 2 ** e <= largest}
    if high * ABOVE >= largest:
        grid.add(largest)
    while len(grid) < MIN_POINTS:
        below = min(grid) // 2
        if below >= smallest and below not in grid:
            grid.add(below)
            continue
        above = 2 ** math.ceil(math.log2(max(grid) + 1))
        if above <= largest:
            grid.add(above)
        elif largest not in grid:
            grid.add(largest)
        else:
            break
    return sorted(grid)
