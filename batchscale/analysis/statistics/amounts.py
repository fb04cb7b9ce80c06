"""Times and amounts of money as a sentence says them (time and cost to result, the answer,
the console). Apart from ``time_to_result`` so that module holds the computation only.
"""

from __future__ import annotations

import math

import numpy as np

from batchscale.core.prices import CURRENCY


def duration(seconds: float) -> str:
    """``"42 s"``, ``"3.5 min"``, ``"2.1 h"``: a time for a sentence."""
    if not math.isfinite(seconds):
        return "—"
    if seconds < 120:
        return f"{seconds:.3g} s"
    return f"{seconds / 60:.3g} min" if seconds < 7200 else f"{seconds / 3600:.3g} h"


def money(value: float, currency: str = CURRENCY) -> str:
    """``USD 0.00000251`` / ``USD 12.3`` / ``USD 1,234``: three significant digits, never
    in exponent form (a CPU study's cost to result is millionths of a dollar); ``—``
    unknown."""
    if value is None or not math.isfinite(value):
        return "—"
    if abs(value) >= 1000:
        return f"{currency} {value:,.0f}"
    return f"{currency} " + np.format_float_positional(value, precision=3, unique=False,
                                                      fractional=False, trim="-")

