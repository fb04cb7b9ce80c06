"""An experiment's findings, stated: one sentence per comparison, with its numbers and intervals.

An experiment varies one thing across studies (``core.experiment``); its comparison says in
words what the curves show, and never more than the intervals carry. Each ``Finding`` names
the axis, the curves it compares, its sentence, the numbers behind it (``numbers``, JSON-
ready) and ``resolved``: whether this data supports the claim the sentence makes.

The tests, per axis (docs/experiments.md gives the paper's claim each one checks):

- ``regime`` (every axis but goal and data_size): a regime quantity of two curves, each in
  the one notation (``intervals.regime_bound``): the perfect-scaling end B*/4 for the
  optimizer axis (§4.4), the fitted critical batch size B* otherwise (§4.3, §4.5, §4.6). Resolved
  when the two 95% intervals are disjoint (an open end reaches 0 or infinity); else
  "not resolved by this data (the intervals overlap)".
- ``s_min`` (optimizer, model, classes): S_min, the same disjoint-interval rule.
- ``small_batch`` (optimizer; Figure 4): the batch sizes both curves reached at or below
  the lower ends of both fits' perfect-scaling intervals, and the largest relative
  difference of their steps there, max/min - 1. A measurement, not a claim of equality: resolved when
  there is such a batch size.
- ``reach`` (every pairwise axis): batch sizes measured by both where one reached the goal
  and the other's trials there are over without reaching it (none interrupted, none whose
  early stop hid a crossing): a fact of the tables, resolved when there is one.
- ``by_batch_size`` (fixed; §4.6): batch sizes both curves reached where the fits' 95%
  bands (``RegimeFit.band``) are disjoint: the steps differ beyond the fits' resolution
  there (elsewhere a band is an extrapolation, and no claim is made).
- ``goal_shift``, ``goal_ratio`` (goal; §4.2): a goal ladder (``goal_ladder``).
- data_size: B*(D) = c·D^α (``b_star_exponent``).

Pairs: every pair when an axis has at most ``ALL_PAIRS_UP_TO`` values, else each value
against the first.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import pandas as pd

from batchscale.analysis.statistics.intervals import (
    AT_LEAST,
    AT_MOST,
    INTERVAL,
    UNKNOWN,
    Bound,
    number,
    regime_bound,
)
from batchscale.analysis.statistics.regimes import RegimeFit

ALL_PAIRS_UP_TO = 4
STEPS = "steps_to_result"
QUANTITY_WORDS = {"perfect_scaling_end": "perfect scaling ends at",
                  "b_star": "fitted critical batch size B* is", "s_min": "S_min is"}
QUANTITY_NAMES = {"perfect_scaling_end": "the end of perfect scaling (B*/4)",
                  "b_star": "the fitted critical batch size B* (S = 2 S_min)", "s_min": "S_min"}
REGIME_QUANTITY = {"optimizer": "perfect_scaling_end"}  # else b_star
PAIRWISE_TESTS = {
    "optimizer": ("regime", "small_batch", "s_min", "reach"),
    "model": ("regime", "s_min", "reach"),
    "classes": ("regime", "s_min", "reach"),
    "fixed": ("regime", "by_batch_size", "reach"),
}


@dataclass(frozen=True)
class Finding:
    """One comparison stated: ``axis`` (``Axis.label``), ``topic`` (the test, module
    docstring), the curves compared, the sentence, the numbers behind it, and whether this
    data supports the sentence's claim."""

    axis: str
    topic: str
    studies: tuple[str, ...]
    sentence: str
    numbers: dict = field(default_factory=dict)
    resolved: bool = False

    def to_dict(self) -> dict:
        return {"axis": self.axis, "topic": self.topic, "studies": list(self.studies),
                "sentence": self.sentence, "numbers": self.numbers, "resolved": self.resolved}


@dataclass(frozen=True)
class Curve:
    """One compared curve: its ``name`` (the study, or the goal on a goal ladder), its
    steps-to-result table (``batch_size``, ``steps_to_result``, ``reached``, ``trials``)
    and its regime fit (None: not fitted)."""

    name: str
    steps: pd.DataFrame
    fit: RegimeFit | None


def estimate_of(curve: Curve, quantity: str) -> Bound:
    """The curve's regime ``quantity`` in the one notation (UNKNOWN: not fitted)."""
    fit = curve.fit
    if fit is None or not fit.fitted:
        return Bound(UNKNOWN)
    return regime_bound(getattr(fit, quantity), steps=quantity == "s_min")


def interval_ends(b: Bound) -> tuple[float, float] | None:
    """The interval's ends, an open end as 0 or infinity; None without an interval."""
    if b.kind == INTERVAL:
        return b.low, b.high
    if b.kind == AT_LEAST:
        return b.low, math.inf
    if b.kind == AT_MOST:
        return 0.0, b.high
    return None


def bound_numbers(b: Bound) -> dict:
    return {**b.numbers(), "text": b.text()}


def compare_bounds(axis: str, topic: str, a: Curve, b: Curve, quantity: str) -> Finding:
    """The disjoint-interval rule for one quantity of two curves."""
    ba, bb = estimate_of(a, quantity), estimate_of(b, quantity)
    words = QUANTITY_WORDS[quantity]
    head = f"{a.name}'s {words} {_text(a, ba)} against {b.name}'s {_text(b, bb)}"
    if UNKNOWN in (ba.kind, bb.kind):  # "ends at undetermined" does not read
        head = (f"{QUANTITY_NAMES[quantity]}: {a.name}'s {_text(a, ba)}, "
                f"{b.name}'s {_text(b, bb)}")
    numbers = {a.name: bound_numbers(ba), b.name: bound_numbers(bb)}
    ea, eb = interval_ends(ba), interval_ends(bb)
    if ea is None or eb is None:
        return Finding(axis, topic, (a.name, b.name), f"{head}: not resolved by this data",
                       numbers, False)
    if ea[0] > eb[1] or eb[0] > ea[1]:
        more, less = (a, b) if ea[0] > eb[1] else (b, a)
        what = {"perfect_scaling_end": "perfect scaling extends to larger batch sizes",
                "b_star": "fitted critical batch size B* is larger",
                "s_min": "S_min (its fewest steps at any batch size) is larger"}[quantity]
        return Finding(axis, topic, (a.name, b.name), f"{head}: {more.name}'s {what} than "
                       f"{less.name}'s (the 95% intervals do not overlap)", numbers, True)
    return Finding(axis, topic, (a.name, b.name),
                   f"{head}: not resolved by this data (the intervals overlap)", numbers, False)


def steps_by_batch_size(curve: Curve) -> pd.Series:
    """batch size -> steps to result (NaN: measured, not reached)."""
    return curve.steps.set_index("batch_size")[STEPS].astype(float)


def sizes_text(sizes) -> str:
    """``2, 4, 8``: batch sizes in a sentence."""
    return ", ".join(str(int(b)) for b in sizes)


def small_batch(axis: str, a: Curve, b: Curve) -> Finding:
    """Figure 4's comparison: steps at the batch sizes both curves reached that lie within
    both fits' perfect scaling by their 95% intervals (at or below each interval's lower
    end; a bound from above only, or none, puts no batch size there)."""
    bounds = [estimate_of(c, "perfect_scaling_end") for c in (a, b)]
    shown = [_text(c, x) for c, x in zip((a, b), bounds)]
    ends = [x.low if x.kind in (INTERVAL, AT_LEAST) else math.nan for x in bounds]
    numbers = {"perfect_scaling_end": {a.name: bound_numbers(bounds[0]),
                                       b.name: bound_numbers(bounds[1])}, "batch_sizes": []}
    lacking = [c.name for c, e in zip((a, b), ends) if not math.isfinite(e)]
    if lacking:
        return Finding(axis, "small_batch", (a.name, b.name), f"{a.name} against {b.name} at small "
                       f"batch sizes: not resolved by this data ({' and '.join(lacking)}: no lower "
                       f"end of the perfect-scaling interval; ends {shown[0]} and {shown[1]})",
                       numbers, False)
    sa, sb = steps_by_batch_size(a), steps_by_batch_size(b)
    common = sorted(set(sa.dropna().index) & set(sb.dropna().index))
    within = [B for B in common if B <= min(ends)]
    if not within:
        return Finding(axis, "small_batch", (a.name, b.name),
                       f"no batch size reached by both {a.name} and {b.name} lies within both "
                       f"fits' perfect scaling by their 95% intervals (ends {shown[0]} and "
                       f"{shown[1]})", numbers, False)
    diffs = {int(B): float(max(sa[B], sb[B]) / min(sa[B], sb[B]) - 1) for B in within}
    worst = max(diffs, key=diffs.get)
    text = (f"at batch size(s) {sizes_text(within)}, within both fits' perfect scaling by their 95% "
            f"intervals (ends {shown[0]} and {shown[1]}), {a.name}'s and {b.name}'s steps to "
            f"result differ by at most {diffs[worst]:.0%} (at {worst}: {number(sa[worst])} "
            f"against {number(sb[worst])})")
    numbers.update(batch_sizes=[int(B) for B in within], max_difference=diffs[worst],
                   differences={str(k): v for k, v in diffs.items()})
    return Finding(axis, "small_batch", (a.name, b.name), text, numbers, True)


def _text(curve: Curve, shown: Bound) -> str:
    """An estimate in the one notation; in words where it has none."""
    if shown.kind != UNKNOWN:
        return shown.text()
    fitted = curve.fit is not None and curve.fit.fitted
    return "undetermined" if fitted else "not fitted"


def _not_reached(curve: Curve) -> set:
    """Batch sizes where the curve's trials are over and none reached the goal: a row with
    no steps to result, no trial left unfinished (``incomplete``: interrupted, it may
    still reach) and no trial whose early stop hid a crossing (``censored``: "stopped
    early"). A row without those columns counts as over."""
    rows = curve.steps
    missing = rows[STEPS].isna()
    if "incomplete" in rows:
        missing &= rows["incomplete"].fillna(0) == 0
    if "censored" in rows:
        missing &= rows["censored"].fillna("") == ""
    return {int(B) for B in rows.loc[missing, "batch_size"]}


def reach(axis: str, a: Curve, b: Curve, always: bool = False) -> Finding | None:
    """Batch sizes measured by both where exactly one reached the goal and the other's
    trials there are over without reaching it (``_not_reached``); batch sizes where the
    other's are not over are named as open. None: there are neither and ``always`` is False."""
    sa, sb = steps_by_batch_size(a), steps_by_batch_size(b)
    common = sorted(set(sa.index) & set(sb.index))
    over = {a.name: _not_reached(a), b.name: _not_reached(b)}
    one = {c.name: [int(B) for B in common if math.isfinite(s1[B]) and not math.isfinite(s2[B])]
           for c, s1, s2 in ((a, sa, sb), (b, sb, sa))}
    only = {name: [B for B in sizes if B in over[other]]
            for (name, sizes), other in zip(one.items(), (b.name, a.name))}
    open_ = sorted(B for sizes, done in zip(one.values(), only.values()) for B in sizes if B not in done)
    parts = [f"at batch size(s) {sizes_text(sizes)} {name} reaches the goal and {other} does not"
             for (name, sizes), other in zip(only.items(), (b.name, a.name)) if sizes]
    numbers = {"only": only, "open": open_}
    unknown = (f"at batch size(s) {sizes_text(open_)} one reaches the goal and the other's trials "
               "are unfinished or stopped early: not resolved by this data") if open_ else ""
    if not parts:
        if not always and not open_:
            return None
        # what both curves did, measured: resolved, unless a batch size is still open
        return Finding(axis, "reach", (a.name, b.name), unknown or f"{a.name} and {b.name} reach "
                       f"the goal at the same batch sizes of the {len(common)} both measured",
                       numbers, not open_)
    return Finding(axis, "reach", (a.name, b.name), "; ".join(parts + [unknown] * bool(open_)),
                   numbers, True)


def by_batch_size(axis: str, a: Curve, b: Curve) -> Finding:
    """Batch sizes where the two fits' 95% bands are disjoint."""
    fitted = all(c.fit is not None and c.fit.fitted and c.fit.samples is not None for c in (a, b))
    if not fitted:
        return Finding(axis, "by_batch_size", (a.name, b.name), f"{a.name} against {b.name} by "
                       "batch size: not resolved by this data (no bootstrap band for both)")
    # only where both curves reached the goal (the points both fits rest on): elsewhere a
    # band is the fit's extrapolation, not a measurement of the steps there
    common = sorted(set(a.fit.batch_sizes) & set(b.fit.batch_sizes))
    if not common:
        return Finding(axis, "by_batch_size", (a.name, b.name), f"{a.name} against {b.name} by "
                       "batch size: not resolved by this data (no batch size both reached)")
    (la, ha), (lb, hb) = a.fit.band(common), b.fit.band(common)
    fewer = {a.name: [int(B) for B, h1, l2 in zip(common, ha, lb) if h1 < l2],
             b.name: [int(B) for B, h1, l2 in zip(common, hb, la) if h1 < l2]}
    parts = [f"{name} needs fewer steps at batch size(s) {sizes_text(sizes)}"
             for name, sizes in fewer.items() if sizes]
    if not parts:
        return Finding(axis, "by_batch_size", (a.name, b.name), f"{a.name} against {b.name}: at "
                       "no batch size do the fits' 95% bands separate: a difference in steps is "
                       "not resolved by this data", {"fewer_steps": fewer}, False)
    return Finding(axis, "by_batch_size", (a.name, b.name), "; ".join(parts) + " (the fits' 95% "
                   "bands do not overlap there)", {"fewer_steps": fewer}, True)


def pairs(curves: list[Curve]) -> list[tuple[Curve, Curve]]:
    if len(curves) <= ALL_PAIRS_UP_TO:
        return list(itertools.combinations(curves, 2))
    return [(curves[0], c) for c in curves[1:]]


def pairwise_findings(axis_kind: str, axis_label: str, curves: list[Curve]) -> list[Finding]:
    """The findings of a pairwise axis (optimizer, model, classes, fixed)."""
    tests = PAIRWISE_TESTS[axis_kind]
    quantity = REGIME_QUANTITY.get(axis_kind, "b_star")
    out = []
    for a, b in pairs(curves):
        if "regime" in tests:
            out.append(compare_bounds(axis_label, "regime", a, b, quantity))
        if "small_batch" in tests:
            out.append(small_batch(axis_label, a, b))
        if "s_min" in tests:
            out.append(compare_bounds(axis_label, "s_min", a, b, "s_min"))
        if "by_batch_size" in tests:
            out.append(by_batch_size(axis_label, a, b))
        found = reach(axis_label, a, b, always=axis_kind == "fixed")
        out += [found] if found is not None else []
    return out
