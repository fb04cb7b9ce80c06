"""One notation for a number with its interval, and for a bound the data give on one side only.

Every place that shows an estimate (the report's HTML and Markdown, the console of
``report``, ``run --local`` and ``compare``, summary.json's texts and the Kubeflow
metrics) goes through ``bound``/``regime_bound`` here, so an open end looks the same
everywhere:

    457 [248, 865]   the value and its interval (95% unless said otherwise)
    ≥ 2476           the data bound it from below only (its upper end is open)
    ≤ 45.8           the data bound it from above only (its lower end is open)
    457              no interval (no bootstrap resamples)
    —                no value

An interval end is *open* when it is infinite (more than the tail share of the bootstrap's
resamples ran off the fit grid), written as null in JSON (``RegimeFit.to_dict``: one end
null, the other a number), or, for a regime boundary, when it lies beyond the batch sizes
measured (status ``ABOVE``/``BELOW``: the fit extrapolates there, the data do not bound
it). A one-sided bound never shows the fitted value: beyond the measured range that value
is the model's guess, not a measurement. ``Bound.numbers`` gives the Kubeflow metrics the
same parts the text shows, so an open end is left out there rather than written as a
made-up number.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

MEASURED = "measured"
ABOVE = "above the measured range"
BELOW = "below the measured range"
UNDETERMINED = "undetermined"

INTERVAL, AT_LEAST, AT_MOST, VALUE, UNKNOWN = "interval", "at least", "at most", "value", "unknown"


def number(x) -> str:
    """3 significant digits, whole numbers from 100 up (``457``, ``23.3``, ``0.143``);
    ``—`` for a missing value."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    x = float(x)
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _missing(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _open(x) -> bool:
    return not _missing(x) and math.isinf(float(x))


@dataclass(frozen=True)
class Bound:
    """What the data say about one quantity: ``kind`` INTERVAL (value, low, high), AT_LEAST
    (low), AT_MOST (high), VALUE (value alone) or UNKNOWN (nothing); the fields the kind
    does not use are None."""

    kind: str
    value: float | None = None
    low: float | None = None
    high: float | None = None

    def text(self, fmt: Callable[[float], str] = number) -> str:
        """The one notation (module docstring); ``fmt`` writes one number (with its unit)."""
        if self.kind == INTERVAL:
            return f"{fmt(self.value)} [{fmt(self.low)}, {fmt(self.high)}]"
        if self.kind == AT_LEAST:
            return f"≥ {fmt(self.low)}"
        if self.kind == AT_MOST:
            return f"≤ {fmt(self.high)}"
        return fmt(self.value) if self.kind == VALUE else "—"

    def numbers(self) -> dict[str, float]:
        """The parts the text shows, as metrics take them: ``value``, ``low``, ``high``."""
        return {k: float(v) for k, v in (("value", self.value), ("low", self.low),
                                         ("high", self.high)) if v is not None}


def bound(value, low=None, high=None) -> Bound:
    """A value with its interval. An end is missing (None or NaN) or open (infinite); one
    end missing while the other is given counts as open (JSON writes infinities as null);
    both missing: no interval. A one-sided interval drops the value (module docstring)."""
    if _missing(value):
        return Bound(UNKNOWN)
    value = float(value)
    if _missing(low) and _missing(high):
        return Bound(VALUE, value=value)
    low_open = _open(low) or _missing(low)
    high_open = _open(high) or _missing(high)
    if low_open and high_open:
        return Bound(UNKNOWN)
    if high_open:
        return Bound(AT_LEAST, low=float(low))
    if low_open:
        return Bound(AT_MOST, high=float(high))
    return Bound(INTERVAL, value=value, low=float(low), high=float(high))


def format_interval(value, low=None, high=None, fmt: Callable[[float], str] = number) -> str:
    """``457 [248, 865]``, ``≥ 248``, ``≤ 865``, ``457`` or ``—`` (see ``bound``)."""
    return bound(value, low, high).text(fmt)


def _parts(est) -> tuple:
    """(value, low, high, status) of a ``regimes.Estimate`` or its JSON dict; a value JSON
    wrote as null above the measured range is the infinity it was."""
    if isinstance(est, dict):
        value, low, high, status = (est.get("value"), est.get("low"), est.get("high"),
                                    est.get("status", MEASURED))
    else:
        value, low, high, status = est.value, est.low, est.high, est.status
    if _missing(value) and status == ABOVE:
        value = math.inf
    return value, low, high, status


def regime_bound(est, steps: bool = False) -> Bound:
    """A regime fit's estimate in the notation. A batch-size boundary whose status says it
    reaches beyond the measured batch sizes is one-sided: ``≥ low`` above the range,
    ``≤ high`` below it (the value itself when there is no interval), nothing when it is
    undetermined. ``steps``: S_min, a step count, whose lower end 0 is open (resamples that
    look like pure perfect scaling) and whose status only says it is extrapolated."""
    if est is None:
        return Bound(UNKNOWN)
    value, low, high, status = _parts(est)
    if steps:
        return bound(value, -math.inf if low == 0 else low, high)
    no_interval = _missing(low) and _missing(high)
    if status == ABOVE:
        return bound(value, value if no_interval else low, math.inf)
    if status == BELOW:
        return bound(value, -math.inf, value if no_interval else high)
    if status == UNDETERMINED:
        return Bound(UNKNOWN)
    return bound(value, low, high)


def regime_text(est, batch_sizes, steps: bool = False, level: float = 0.95,
                short: bool = False) -> str:
    """The estimate in the notation, with plain words where the data do not bound it:
    ``the fit puts it beyond the largest batch size measured (4000); the data bound it
    only from below: ≥ 2476``; ``short`` (table cells and the console's regime line,
    whose notes say the rest): ``≥ 2476 (fit beyond the largest batch size measured,
    4000)``. ``batch_sizes``: those the fit used (the measured range)."""
    if est is None:
        return "—"
    value, _low, _high, status = _parts(est)
    text = regime_bound(est, steps).text()
    sizes = [int(b) for b in batch_sizes] or [0]
    lo_b, hi_b = min(sizes), max(sizes)
    if steps:
        if status == MEASURED:
            return text
        return f"{text} (extrapolated)" if short else (
            f"{text}, extrapolated: the fitted critical batch size B* may lie beyond the "
            f"largest batch size measured ({hi_b})")
    if status in (ABOVE, BELOW):
        above = status == ABOVE
        edge = "the largest" if above else "the smallest"
        edge_b = hi_b if above else lo_b
        past, side = ("beyond", "below") if above else ("below", "above")
        if value > hi_b if above else value < lo_b:
            if short:
                return f"{text} (fit {past} {edge} batch size measured, {edge_b})"
            fit = f"the fit puts it {past} {edge} batch size measured ({edge_b})"
        else:
            reaches = "reaches past" if above else "reaches below"
            if short:
                return f"{text} (fit {number(value)}; its interval {reaches} {edge_b})"
            fit = (f"the fit puts it at {number(value)}, but its {level:.0%} interval {reaches} "
                   f"{edge} batch size measured ({edge_b})")
        return f"{fit}; the data bound it only from {side}: {text}"
    if status == UNDETERMINED:
        return f"undetermined (fit {number(value)})" if short else (
            f"undetermined: the fit puts it at {number(value)}, but its {level:.0%} interval "
            f"reaches beyond both the smallest ({lo_b}) and the largest ({hi_b}) batch size "
            "measured")
    return text
