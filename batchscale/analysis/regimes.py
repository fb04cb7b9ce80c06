"""Scaling regimes: fit S(B) = S_min * (1 + B_star / B) to steps to result, with bootstrap CIs.

McCandlish et al. (2018) model the steps needed to reach a goal at batch size B as
S(B) = S_min * (1 + B_star / B): perfect scaling (S proportional to 1/B) well below the critical
batch size B_star, diminishing returns around it and a floor S_min well above it. From the fit we
report where those regimes begin and end, each with a percentile bootstrap confidence interval and
a status saying whether the measured batch sizes actually pin it down.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

PERFECT_SCALING_EFFICIENCY = 0.8
"""Local scaling efficiency e(B) = -dlogS/dlogB = B_star / (B + B_star) at which perfect scaling
ends: e = 0.8 at B = B_star * (1 - e) / e = B_star / 4, where steps are 25% above the perfect-scaling
extrapolation S_min * B_star / B."""
USEFUL_STEPS_FACTOR = 1.1
"""Maximum useful batch size: S = 1.1 * S_min at B = B_star / (1.1 - 1) = 10 * B_star. Beyond it no
batch size can save more than 1 - 1/1.1 (about 9%) of the steps."""
MIN_BATCH_SIZES = 3  # two parameters: at least one degree of freedom left
GRID_STEP = 0.01 * math.log(2)  # profile grid over log B_star
GRID_MARGIN = 8 * math.log(2)  # the grid reaches 256x beyond the measured batch sizes
GOLDEN_ITERATIONS = 48  # shrinks one grid step to ~1e-12 in log B_star
EDGE_SHARE = 0.05  # resamples off the grid's edge worth a note
CHUNK_ELEMENTS = 2_000_000  # samples x grid points per chunk: a few arrays of 16 MB each

MEASURED = "measured"
ABOVE = "above the measured range"
BELOW = "below the measured range"
UNDETERMINED = "undetermined"


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
        """Fitted S at the given batch sizes (NaN when not fitted)."""
        log_b, (a, c) = np.log(np.asarray(batch_sizes, dtype=float)), self.point
        return np.exp(a + np.logaddexp(0.0, c - log_b)) if self.fitted else np.full(log_b.shape, math.nan)

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

        def est(e):
            return e and {"value": num(e.value), "low": num(e.low), "high": num(e.high), "status": e.status}
        return {
            "fitted": self.fitted, "reason": self.reason, "s_min": est(self.s_min),
            "b_star": est(self.b_star), "perfect_scaling_end": est(self.perfect_scaling_end),
            "max_useful_batch_size": est(self.max_useful_batch_size),
            "batch_sizes": [int(b) for b in self.batch_sizes], "steps": [num(s) for s in self.steps],
            "observed": {"s_min": num(self.observed[0]), "b_star": num(self.observed[1])},
            "resamples": int(self.resamples), "level": float(self.level), "notes": list(self.notes),
        }


def _fit_log(y: np.ndarray, log_b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least squares in log space for many samples at once; y is (samples, batch sizes), NaN = absent.

    For fixed c = log B_star the best a = log S_min is the mean residual, so we profile the sum of
    squares over a grid of c (matrix products, chunked), then golden-section within one grid step of
    the best point. Returns (a, c, edge) with edge -1 / +1 where the best grid point is the grid's
    lower / upper end (B_star below / above anything the grid resolves), else 0.
    """
    w = np.isfinite(y).astype(float)
    k = w.sum(axis=1)
    mu = np.where(w > 0, y, 0.0).sum(axis=1) / k
    yc = np.where(w > 0, y - mu[:, None], 0.0)
    grid = np.arange(log_b.min() - GRID_MARGIN, log_b.max() + GRID_MARGIN + GRID_STEP / 2, GRID_STEP)
    f = np.logaddexp(0.0, grid[:, None] - log_b[None, :])  # (grid, batch sizes)
    best = np.empty(len(y), dtype=int)
    chunk = max(1, CHUNK_ELEMENTS // len(grid))
    for i in range(0, len(y), chunk):
        ws, ys = w[i:i + chunk], yc[i:i + chunk]
        sf = ws @ f.T  # yc sums to 0 per sample, so the sum of residuals is -sf; sum(yc^2) is omitted
        sse = -2 * (ys @ f.T) + ws @ (f * f).T - sf * sf / k[i:i + chunk, None]
        best[i:i + chunk] = np.argmin(sse, axis=1)

    def sse_at(c):
        r = yc - np.logaddexp(0.0, c[:, None] - log_b[None, :])
        r = r - (r * w).sum(axis=1, keepdims=True) / k[:, None]
        return (r * r * w).sum(axis=1)

    lo, hi = grid[np.maximum(best - 1, 0)], grid[np.minimum(best + 1, len(grid) - 1)]
    ratio = (math.sqrt(5) - 1) / 2
    x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    f1, f2 = sse_at(x1), sse_at(x2)
    for _ in range(GOLDEN_ITERATIONS):
        left = f1 < f2  # the minimum lies in [lo, x2]; else in [x1, hi]
        lo, hi = np.where(left, lo, x1), np.where(left, x2, hi)
        kept_x, kept_f = np.where(left, x1, x2), np.where(left, f1, f2)
        new = np.where(left, hi - ratio * (hi - lo), lo + ratio * (hi - lo))
        fn = sse_at(new)
        x1, f1 = np.where(left, new, kept_x), np.where(left, fn, kept_f)
        x2, f2 = np.where(left, kept_x, new), np.where(left, kept_f, fn)
    c = (lo + hi) / 2
    edge = np.where(best == 0, -1, np.where(best == len(grid) - 1, 1, 0))
    c = np.where(edge != 0, grid[best], c)
    r = yc - np.logaddexp(0.0, c[:, None] - log_b[None, :])
    a = mu + (r * w).sum(axis=1) / k
    return a, c, edge


def fit_curve(batch_sizes, steps) -> tuple[float, float]:
    """Point fit (S_min, B_star), equal weights in log S; NaN steps are ignored.

    A pure power law S ~ 1/B (B_star beyond the grid) gives (0, inf); a flat curve gives B_star = 0.
    Raises ValueError with fewer than 3 usable points.
    """
    b, s = np.asarray(batch_sizes, dtype=float), np.asarray(steps, dtype=float)
    keep = np.isfinite(s) & (s > 0)
    if keep.sum() < MIN_BATCH_SIZES:
        raise ValueError(f"need at least {MIN_BATCH_SIZES} batch sizes with steps, got {keep.sum()}")
    y = np.log(s[keep])
    a, c, edge = _fit_log(y[None, :], np.log(b[keep]))
    if edge[0] > 0:
        return 0.0, math.inf
    if edge[0] < 0:
        return float(np.exp(y.mean())), 0.0
    return float(np.exp(a[0])), float(np.exp(c[0]))


def _spacing(log_steps: np.ndarray) -> float:
    """Mean gap between the lowest (up to 4) order statistics of the log steps that reached."""
    x = np.sort(log_steps)
    k = min(4, len(x))
    return float((x[k - 1] - x[0]) / (k - 1)) if k >= 2 else 0.0


def _bootstrap(groups: list[tuple[np.ndarray, np.ndarray]], resamples: int,
               rng: np.random.Generator) -> np.ndarray:
    """Resampled log steps to result, (resamples, batch sizes); NaN where no resampled trial reached.

    Per batch size, trials are resampled with replacement; each resampled trial that reached gets
    its crossing drawn uniformly in log between its previous and its reaching evaluation, and the
    minimum is lowered by an exponential draw with mean ``spacing`` (see _spacing). Why: the best of
    n trials overshoots the best achievable by about one spacing of the lowest order statistics, and
    a resampling bootstrap of a minimum sees only about 1/(e-1) of that bias (a resample misses the
    j lowest trials with probability ~e^-j, so its minimum sits ~sum_j e^-j = 1/(e-1) spacings above
    the original); the in-interval draw covers where in the evaluation interval the goal was crossed.
    """
    out = np.full((resamples, len(groups)), math.nan)
    for j, (step, previous) in enumerate(groups):
        reached = np.isfinite(step)
        top = np.where(reached, np.log(np.where(reached, step, 1.0)), math.inf)
        prev_ok = reached & np.isfinite(previous) & (previous > 0) & (previous < step)
        width = np.where(prev_ok, top - np.log(np.where(prev_ok, previous, 1.0)), 0.0)
        idx = rng.integers(0, len(step), size=(resamples, len(step)))
        best = (top[idx] - rng.random(idx.shape) * width[idx]).min(axis=1)
        best = best - _spacing(top[reached]) * rng.standard_exponential(resamples)
        out[:, j] = np.where(np.isfinite(best), best, math.nan)
    return out


def _fmt(x: float) -> str:
    return "inf" if x == math.inf else f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _status(value: float, low: float, high: float, lo_b: float, hi_b: float) -> str:
    """Where an estimate and its CI lie relative to the measured batch sizes [lo_b, hi_b]."""
    low, high = (value, value) if math.isnan(low) else (low, high)
    below = min(value, low) < lo_b * (1 - 1e-6)
    above = max(value, high) > hi_b * (1 + 1e-6)
    return UNDETERMINED if below and above else ABOVE if above else BELOW if below else MEASURED


_BOUNDARIES = {  # name: (label, B / B_star, note when above the range, note when below)
    "b_star": (
        "critical batch size B_star (S = 2 S_min)", 1.0,
        "steps at the largest batch size ({hi}) are still more than twice S_min; B_star >= {low}",
        "steps at the smallest batch size ({lo}) are already within 2x of S_min; B_star <= {high}"),
    "perfect_scaling_end": (
        f"end of perfect scaling (efficiency {PERFECT_SCALING_EFFICIENCY})",
        (1 - PERFECT_SCALING_EFFICIENCY) / PERFECT_SCALING_EFFICIENCY,
        "scaling is still near-perfect at the largest batch size ({hi}); it ends at B >= {low}",
        "perfect scaling already ended before the smallest batch size ({lo}); it ends at B <= {high}"),
    "max_useful_batch_size": (
        f"maximum useful batch size (S = {USEFUL_STEPS_FACTOR} S_min)", 1 / (USEFUL_STEPS_FACTOR - 1),
        "the curve has not flattened by the largest batch size ({hi}); larger batches would still "
        "save steps; maximum useful batch size >= {low}",
        "the curve is already flat at the smallest batch size ({lo}): no larger batch size saves more "
        f"than {1 - 1 / USEFUL_STEPS_FACTOR:.0%} of the steps; maximum useful batch size <= {{high}}"),
}
_PARTIAL = {  # the estimate is inside the measured range but one end of its interval is not
    ABOVE: "the fit puts it at {value}, but its {pct} CI [{low}, {high}] reaches past the largest "
           "batch size measured ({hi}): the data bound it only from below (>= {low})",
    BELOW: "the fit puts it at {value}, but its {pct} CI [{low}, {high}] reaches below the smallest "
           "batch size measured ({lo}): the data bound it only from above (<= {high})",
}
_UNDETERMINED = ("undetermined: its {pct} CI [{low}, {high}] extends beyond both the smallest ({lo}) "
                 "and the largest ({hi}) batch size measured")

def fit_regimes(crossings: pd.DataFrame, resamples: int = 1000, level: float = 0.95,
                seed: int = 0) -> RegimeFit:
    """Fit S_min and B_star to per-batch-size steps to result and derive the regime boundaries.

    ``crossings``: one row per COMPLETE trial with batch_size, trial_id, step (first evaluation
    beating the goal, NaN = never) and previous_step (the evaluation before it, NaN if none).
    S(B) is the fewest steps over a batch size's trials. CIs are percentile intervals over
    ``resamples`` bootstrap fits (see _bootstrap); ``seed`` seeds numpy's default Generator.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    data = crossings.assign(previous_step=crossings.get("previous_step", math.nan))
    groups, sizes, steps = [], [], []
    for batch_size, group in data.groupby("batch_size", sort=True):
        step = group["step"].to_numpy(dtype=float)
        if np.isfinite(step).any():
            if (step[np.isfinite(step)] <= 0).any():
                raise ValueError(f"non-positive step at batch size {batch_size}")
            groups.append((step, group["previous_step"].to_numpy(dtype=float)))
            sizes.append(int(batch_size))
            steps.append(float(np.nanmin(step)))
    if len(sizes) < MIN_BATCH_SIZES:
        named = ", ".join(map(str, sizes)) or "none"
        reason = (f"only {len(sizes)} batch size(s) reached the goal ({named}); "
                  f"at least {MIN_BATCH_SIZES} are needed to fit S_min and B_star")
        return RegimeFit(False, reason, None, None, None, None, tuple(sizes), tuple(steps), 0, level, ())
    log_b = np.log(np.array(sizes, dtype=float))
    a0, c0, e0 = (v[0] for v in _fit_log(np.log(np.array(steps))[None, :], log_b))
    s_min, b_star = fit_curve(sizes, steps)

    draws = _bootstrap(groups, resamples, np.random.default_rng(seed))
    usable = np.isfinite(draws).sum(axis=1) >= MIN_BATCH_SIZES
    a, c, edge = _fit_log(draws[usable], log_b) if usable.any() else (np.zeros(0),) * 3
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
    for name, (label, factor, above, below) in _BOUNDARIES.items():
        value, low, high = (factor * x for x in (b_star, math.exp(c_low), math.exp(c_high)))
        estimates[name] = Estimate(value, low, high, _status(value, low, high, lo_b, hi_b))
        status = estimates[name].status
        text = {ABOVE: above, BELOW: below, UNDETERMINED: _UNDETERMINED}.get(status)
        if status in (ABOVE, BELOW) and lo_b <= value <= hi_b:  # only the interval leaves the range
            text = _PARTIAL[status].replace("{value}", _fmt(value))
        if text:
            low, high = (value, value) if math.isnan(low) else (low, high)  # no resamples: the value
            notes.append(f"{label}: " + text.format(lo=_fmt(lo_b), hi=_fmt(hi_b), low=_fmt(low),
                                                      high=_fmt(high), pct=f"{level:.0%}"))
    s_status = MEASURED if estimates["b_star"].status == BELOW else estimates["b_star"].status
    if s_status != MEASURED:
        notes.insert(0, f"S_min is an extrapolation: the critical batch size may lie above the largest "
                        f"batch size ({_fmt(hi_b)}), so the floor of the curve is weakly determined")
    if e0:
        notes.append("the point fit ran off the fit grid: the data look like "
                     + ("pure perfect scaling (S ~ 1/B)" if e0 > 0 else "a flat curve (S independent of B)"))
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

def synthetic_crossings(s_min: float, b_star: float, batch_sizes, trials: int, rng: np.random.Generator,
                        spread: float = 0.5, failure: float = 0.5, resolution: float = 0.05) -> pd.DataFrame:
    """Trial crossings with known truth S(B) = s_min * (1 + b_star / B), in fit_regimes' input format.

    Per batch size, ``trials`` trials. A trial's true crossing is S(B) * exp(spread * |z|) with z
    standard normal: near a smooth optimum of two searched metaparameters the density of excess
    steps is flat, as |z|'s is at 0. Each trial independently never reaches with probability
    ``failure`` (step NaN). Evaluations lie on a geometric grid with ratio 1 + ``resolution`` and a
    random per-trial offset; step is the first grid point at or after the true crossing and
    previous_step = step / (1 + resolution).
    """
    rows = []
    ratio = math.log1p(resolution)
    for batch_size in batch_sizes:
        true = math.log(s_min * (1 + b_star / batch_size)) + spread * np.abs(rng.standard_normal(trials))
        offset = rng.random(trials)
        step = np.exp((np.ceil(true / ratio - offset) + offset) * ratio)
        step[rng.random(trials) < failure] = math.nan
        rows.append(pd.DataFrame({"batch_size": int(batch_size), "trial_id": np.arange(trials),
                                  "step": step, "previous_step": step / (1 + resolution)}))
    return pd.concat(rows, ignore_index=True)
