"""Scaling regimes: fit S(B) = S_min * (1 + B_star / B) to steps to result, with bootstrap CIs.

McCandlish et al. (2018) model the steps needed to reach a goal at batch size B as
S(B) = S_min * (1 + B_star / B): perfect scaling (S proportional to 1/B) well below the critical
batch size B_star, diminishing returns around it and a floor S_min well above it. From the fit we
report where those regimes begin and end, each with a percentile bootstrap confidence interval and
a status saying whether the measured batch sizes actually pin it down. The curve's fit and the
bootstrap themselves are in ``scaling_curve``; the notes on what the data leave open, in words the
steps-to-result table bears out, in ``regime_notes``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from batchscale.analysis.statistics.intervals import ABOVE, BELOW, MEASURED, UNDETERMINED, number, regime_text
from batchscale.analysis.statistics.regime_notes import (
    BOUNDARIES,
    PERFECT_SCALING_EFFICIENCY,
    USEFUL_STEPS_FACTOR,
    boundary_note,
)
from batchscale.analysis.statistics.scaling_curve import (
    GRID_MARGIN,
    MIN_BATCH_SIZES,
    bootstrap_log_steps,
    fit_curve,
    fit_log,
)

EDGE_SHARE = 0.05  # resamples off the grid's edge worth a note

# statuses (MEASURED, ABOVE, BELOW, UNDETERMINED) are defined in intervals.py with the notation;
# PERFECT_SCALING_EFFICIENCY and USEFUL_STEPS_FACTOR (the boundaries' definitions) in regime_notes.py
__all__ = ["ABOVE", "BELOW", "MEASURED", "UNDETERMINED", "PERFECT_SCALING_EFFICIENCY", "USEFUL_STEPS_FACTOR",
           "Estimate", "RegimeFit", "fit_regimes"]


@dataclass(frozen=True)
class Estimate:
    """A point estimate, its percentile CI and where it lies relative to the measured batch sizes.

    A CI end is inf (or 0) when more than its tail share of resamples hit that edge of the fit grid:
    the data then bound the quantity on one side only.
    """

    value: float
    low: float
    high: float
    status: str


@dataclass(frozen=True)
class RegimeFit:
    """Result of fit_regimes. ``batch_sizes`` / ``steps`` are the points fitted (those that reached).

    ``s_min.status`` is "measured" unless the critical batch size may lie above the measured range
    (then S_min is an extrapolation and takes B_star's status). Values are the medians of the
    resampled fits, which carry the bootstrap's correction of the best-of-n overshoot;
    ``observed`` is the plain fit to the observed minima (a few percent high on S_min, so it
    can lie above S_min's interval). Without resamples the values are that plain fit.
    ``point`` and ``samples`` hold (log S_min, log B_star) of the values and of each resample.
    """

    fitted: bool
    reason: str
    s_min: Estimate | None
    b_star: Estimate | None
    perfect_scaling_end: Estimate | None
    max_useful_batch_size: Estimate | None
    batch_sizes: tuple[int, ...]
    steps: tuple[float, ...]
    resamples: int  # resamples that were fitted and make up the CIs
    level: float
    notes: tuple[str, ...]
    observed: tuple[float, float] = (math.nan, math.nan)  # (S_min, B_star) fitted to the minima
    point: tuple[float, float] = field(default=(math.nan, math.nan), compare=False, repr=False)
    samples: np.ndarray | None = field(default=None, compare=False, repr=False)  # (a, c) per resample

    def curve(self, batch_sizes) -> np.ndarray:
        """Fitted S at the given batch sizes; NaN when not fitted, and NaN for a pure power
        law: when most resamples put B_star past the fit grid, the values are S_min 0 and
        B_star inf (a = -inf, c = +inf), and S = S_min (1 + B_star / B) is 0 x inf, which
        the point cannot resolve (``band`` still holds the resampled curves). A flat
        curve (B_star 0, c = -inf) is S_min everywhere."""
        log_b, (a, c) = np.log(np.asarray(batch_sizes, dtype=float)), self.point
        if not self.fitted or not math.isfinite(a) or c == math.inf:
            return np.full(log_b.shape, math.nan)
        return np.exp(a + np.logaddexp(0.0, c - log_b))

    def band(self, batch_sizes) -> tuple[np.ndarray, np.ndarray]:
        """Pointwise percentile band (at ``level``) of the resampled fitted curves."""
        log_b = np.log(np.asarray(batch_sizes, dtype=float))
        if self.samples is None or not len(self.samples):
            nan = np.full(log_b.shape, math.nan)
            return nan, nan.copy()
        a, c = self.samples[:, :1], self.samples[:, 1:]
        curves = a + np.logaddexp(0.0, c - log_b.reshape(1, -1))
        tail = (1 - self.level) / 2
        low, high = np.quantile(curves, [tail, 1 - tail], axis=0)
        return np.exp(low).reshape(log_b.shape), np.exp(high).reshape(log_b.shape)

    def to_dict(self) -> dict:
        """JSON-ready: plain floats and lists; NaN and infinities become None."""
        def num(x):
            return float(x) if math.isfinite(x) else None

        def est(e, steps=False):  # "text": the estimate in the one notation (intervals.py)
            return e and {"value": num(e.value), "low": num(e.low), "high": num(e.high), "status": e.status,
                          "text": regime_text(e, self.batch_sizes, steps, self.level)}
        return {
            "fitted": self.fitted, "reason": self.reason, "s_min": est(self.s_min, steps=True),
            "b_star": est(self.b_star), "perfect_scaling_end": est(self.perfect_scaling_end),
            "max_useful_batch_size": est(self.max_useful_batch_size),
            "batch_sizes": [int(b) for b in self.batch_sizes], "steps": [num(s) for s in self.steps],
            "observed": {"s_min": num(self.observed[0]), "b_star": num(self.observed[1])},
            "resamples": int(self.resamples), "level": float(self.level), "notes": list(self.notes),
        }


_fmt = number  # the one number format of the report (intervals.py)


def _status(value: float, low: float, high: float, lo_b: float, hi_b: float) -> str:
    """Where an estimate and its CI lie relative to the measured batch sizes [lo_b, hi_b]."""
    low, high = (value, value) if math.isnan(low) else (low, high)
    below = min(value, low) < lo_b * (1 - 1e-6)
    above = max(value, high) > hi_b * (1 + 1e-6)
    return UNDETERMINED if below and above else ABOVE if above else BELOW if below else MEASURED


def fit_regimes(crossings: pd.DataFrame, resamples: int = 1000, level: float = 0.95,
                seed: int = 0) -> RegimeFit:
    """Fit S_min and B_star to per-batch-size steps to result and derive the regime boundaries.

    ``crossings``: one row per COMPLETE trial with batch_size, trial_id, step (first evaluation
    beating the goal, NaN = never) and previous_step (the evaluation before it, NaN if none).
    S(B) is the fewest steps over a batch size's trials. CIs are percentile intervals over
    ``resamples`` bootstrap fits (see scaling_curve.bootstrap_log_steps); ``seed`` seeds
    numpy's default Generator.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    data = crossings.assign(previous_step=crossings.get("previous_step", math.nan))
    groups, sizes, steps, at_start = [], [], [], []
    for batch_size, group in data.groupby("batch_size", sort=True):
        step = group["step"].to_numpy(dtype=float)
        if np.isfinite(step).any():
            if (step[np.isfinite(step)] <= 0).any():
                at_start.append(int(batch_size))
            groups.append((step, group["previous_step"].to_numpy(dtype=float)))
            sizes.append(int(batch_size))
            steps.append(float(np.nanmin(step)))
    if at_start:  # the untrained model already beats the goal: no curve to fit
        reason = (f"the goal is met at step 0, before any training, at batch size(s) "
                  f"{', '.join(map(str, at_start))}; steps to result is 0 there, so S_min and "
                  "B_star cannot be fitted: choose a harder goal")
        return RegimeFit(False, reason, None, None, None, None, tuple(sizes), tuple(steps), 0, level, ())
    if len(sizes) < MIN_BATCH_SIZES:
        named = ", ".join(map(str, sizes)) or "none"
        reason = (f"only {len(sizes)} batch size(s) have a measured steps to result ({named}); "
                  f"at least {MIN_BATCH_SIZES} are needed to fit S_min and B_star")
        return RegimeFit(False, reason, None, None, None, None, tuple(sizes), tuple(steps), 0, level, ())
    log_b = np.log(np.array(sizes, dtype=float))
    a0, c0, e0 = (v[0] for v in fit_log(np.log(np.array(steps))[None, :], log_b))
    s_min, b_star = fit_curve(sizes, steps)

    draws = bootstrap_log_steps(groups, resamples, np.random.default_rng(seed))
    usable = np.isfinite(draws).sum(axis=1) >= MIN_BATCH_SIZES
    a, c, edge = fit_log(draws[usable], log_b) if usable.any() else (np.zeros(0),) * 3
    tail = (1 - level) / 2

    def interval(v):  # order statistics, not interpolation: an infinite end stays infinite
        if not len(v):
            return math.nan, math.nan
        return float(np.quantile(v, tail, method="lower")), float(np.quantile(v, 1 - tail, method="higher"))

    c_all = np.where(edge > 0, math.inf, np.where(edge < 0, -math.inf, c))
    a_all = np.where(edge > 0, -math.inf, a)  # pure power law: S_min -> 0
    c_low, c_high = interval(c_all)
    a_low, a_high = interval(a_all)
    observed = (s_min, b_star)
    if len(a):  # report the resamples' median: it carries their correction of the best-of-n bias
        a0, c0 = (float(np.quantile(v, 0.5, method="lower")) for v in (a_all, c_all))
        s_min, b_star = math.exp(a0), math.exp(c0)
    lo_b, hi_b = float(min(sizes)), float(max(sizes))
    estimates, notes = {}, []
    for name, (_label, factor) in BOUNDARIES.items():
        value, low, high = (factor * x for x in (b_star, math.exp(c_low), math.exp(c_high)))
        estimates[name] = Estimate(value, low, high, _status(value, low, high, lo_b, hi_b))
        note = boundary_note(name, estimates[name].status, value, low, high, sizes, steps, s_min, level)
        notes += [note] if note else []
    s_status = MEASURED if estimates["b_star"].status == BELOW else estimates["b_star"].status
    if s_status != MEASURED:
        notes.insert(0, f"S_min is an extrapolation: the fitted critical batch size B* may lie "
                        f"above the largest batch size ({_fmt(hi_b)}), so the floor of the curve "
                        "is weakly determined")
    if e0:
        notes.append("the point fit ran off the fit grid: the curve that fits the steps best is "
                     + ("pure perfect scaling (S ~ 1/B)" if e0 > 0 else "flat (S independent of B)"))
    for side, word in ((1, "above"), (-1, "below")):
        if len(edge) and (share := float(np.mean(edge == side))) > EDGE_SHARE:
            notes.append(f"{share:.0%} of resamples put B_star {word} the fit grid (more than "
                         f"{GRID_MARGIN / math.log(2):.0f} doublings {word} the measured batch sizes)")
    if resamples > usable.sum():
        notes.append(f"{resamples - int(usable.sum())} of {resamples} resamples had fewer than "
                     f"{MIN_BATCH_SIZES} batch sizes reaching the goal and were skipped")
    return RegimeFit(
        True, "", Estimate(s_min, math.exp(a_low), math.exp(a_high), s_status), estimates["b_star"],
        estimates["perfect_scaling_end"], estimates["max_useful_batch_size"], tuple(sizes), tuple(steps),
        int(usable.sum()), level, tuple(notes), observed=observed, point=(float(a0), float(c0)),
        samples=np.column_stack([a, c]) if len(a) else None)
