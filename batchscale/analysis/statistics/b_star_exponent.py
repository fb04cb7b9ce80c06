"""B*(D) = c·D^α: how the critical batch size moves with the number of training examples.

The paper found "no consistent effect" of data-set size on the largest useful batch size
(Shallue et al. 2019, §4.5); Zhang et al. 2024 and later scaling-law work report that the
critical batch size grows with the data. A data_size experiment (studies re-tuned at every
batch size and data size) measures α for its workload.

α is the least-squares slope of log B* on log D. Its 95% interval pairs resample i of every
study's regime bootstrap (``RegimeFit.samples``: (log S_min, log B*) per resample) and fits
the slope of each such set. A resample whose B* ran off the fit grid (more than 256 times
past the measured batch sizes) gives no number: a B* off the top of a size above the mean
log D (or off the bottom of one below it) only raises the true slope, so the slope computed
at the grid's edge is a lower bound: it stands for the resample at the interval's lower end,
and +∞ at its upper end; the mirror case is an upper bound (and -∞ at the lower end); a
resample with edges pushing both ways is left out (and when more than ``MAX_MIXED`` of them
are, α is undetermined).
The interval's ends are order statistics, so an open end stays infinite and the one
notation (``intervals.bound``) shows a one-sided bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from batchscale.analysis.statistics.findings import Finding
from batchscale.analysis.statistics.intervals import AT_LEAST, AT_MOST, INTERVAL, Bound, bound, number
from batchscale.analysis.statistics.regimes import RegimeFit
from batchscale.analysis.statistics.scaling_curve import GRID_MARGIN, GRID_STEP

MIN_SIZES = 3
LEVEL = 0.95
WIDE = 1.0  # an α interval wider than this holds both "no effect" and the scaling laws' growth
MAX_MIXED = 0.05  # share of resamples with edges both ways past which α is undetermined


@dataclass(frozen=True)
class ExponentFit:
    """B*(D) = c·D^α: ``sizes`` and ``b_star`` (point values) of the studies fitted,
    ``alpha`` in the one notation (``Bound``), ``c`` at the point, ``view`` (grows, no
    consistent effect, shrinks, not resolved) and the ``finding`` stating it."""

    sizes: tuple[int, ...]
    b_star: tuple[float, ...]
    alpha: Bound
    c: float
    view: str
    finding: Finding
    resamples: int

    def to_dict(self) -> dict:
        return {"sizes": list(self.sizes), "b_star": [v if math.isfinite(v) else None for v in self.b_star],
                "alpha": {**self.alpha.numbers(), "text": self.alpha.text()},
                "c": self.c if math.isfinite(self.c) else None, "view": self.view,
                "resamples": self.resamples, "sentence": self.finding.sentence}


def _edges(fit: RegimeFit) -> np.ndarray:
    """+1 / -1 where a resample's log B* lies in the fit grid's top / bottom step, else 0."""
    log_b = np.log(np.asarray(fit.batch_sizes, dtype=float))
    top, bottom = log_b.max() + GRID_MARGIN, log_b.min() - GRID_MARGIN
    c = fit.samples[:, 1]
    return np.where(c >= top - 1.01 * GRID_STEP, 1, np.where(c <= bottom + 1.01 * GRID_STEP, -1, 0))


def _slope(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares slope of each row of y on x."""
    xc = x - x.mean()
    return (y - y.mean(axis=-1, keepdims=True)) @ xc / float(xc @ xc)


def fit_exponent(sizes, fits, names, axis: str = "data_size") -> ExponentFit:
    """α and its interval from the studies' regime fits (one per data size, in order)."""
    rows = [(int(D), f, n) for D, f, n in zip(sizes, fits, names)
            if f is not None and f.fitted and f.samples is not None and len(f.samples)]
    names = tuple(str(n) for n in names)
    if len(rows) < MIN_SIZES:
        missing = [f"{n} ({f.reason if f is not None and f.reason else 'no fitted B*'})"
                   for D, f, n in zip(sizes, fits, names)
                   if not (f is not None and f.fitted and f.samples is not None)]
        text = (f"no exponent of B*(D): {len(rows)} data size(s) have a fitted B* with "
                f"bootstrap resamples, at least {MIN_SIZES} are needed"
                + (f"; without: {'; '.join(missing)}" if missing else ""))
        finding = Finding(axis, "b_star_exponent", names, text, {}, False)
        return ExponentFit(tuple(r[0] for r in rows), tuple(r[1].b_star.value for r in rows),
                           Bound("unknown"), math.nan, "not resolved", finding, 0)
    rows.sort(key=lambda r: r[0])
    x = np.log(np.array([r[0] for r in rows], dtype=float))
    n = min(len(r[1].samples) for r in rows)
    y = np.column_stack([r[1].samples[:n, 1] for r in rows])
    edges = np.column_stack([_edges(r[1])[:n] for r in rows])
    above = x > x.mean()
    up = ((edges > 0) & above) | ((edges < 0) & ~above)  # the true slope only rises
    down = ((edges > 0) & ~above) | ((edges < 0) & above)
    slopes = _slope(x, y)
    up, down = up.any(axis=1), down.any(axis=1)
    mixed = up & down
    # a slope with a B* off the grid is a bound on the true one: from below where it can
    # only rise (up), so it stands for the interval's lower end and +inf for the upper;
    # the mirror case from above (module docstring)
    lows = np.where(down, -math.inf, slopes)[~mixed]
    highs = np.where(up, math.inf, slopes)[~mixed]
    kept = np.where(up, math.inf, np.where(down, -math.inf, slopes))[~mixed]
    points = np.array([r[1].point[1] for r in rows])
    alpha_point = float(_slope(x, points)) if np.isfinite(points).all() else math.nan
    if mixed.mean() > MAX_MIXED or not len(kept):
        alpha = Bound("unknown")
    else:
        tail = (1 - LEVEL) / 2
        low = float(np.quantile(lows, tail, method="lower"))
        high = float(np.quantile(highs, 1 - tail, method="higher"))
        value = alpha_point if math.isfinite(alpha_point) else float(np.quantile(kept, 0.5, method="lower"))
        alpha = bound(value, low, high)
    c = math.exp(points.mean() - alpha_point * x.mean()) if math.isfinite(alpha_point) else math.nan
    view, resolved = _view(alpha)
    labels = tuple(r[2] for r in rows)
    text = (f"B*(D) = c·D^α over {len(rows)} data sizes ({', '.join(str(r[0]) for r in rows)}): "
            f"α {alpha_relation(alpha.text())} (95% interval, {n} paired resamples): {view}")
    if mixed.any():
        text += f"; {int(mixed.sum())} resample(s) with B* off the fit grid both ways left out"
    b_star = [float(r[1].b_star.value) for r in rows]  # inf: past the fit grid (JSON: null)
    numbers = {"alpha": alpha.numbers(), "c": c if math.isfinite(c) else None,
               "sizes": [r[0] for r in rows], "b_star": [v if math.isfinite(v) else None for v in b_star]}
    finding = Finding(axis, "b_star_exponent", labels, text, numbers, resolved)
    return ExponentFit(tuple(r[0] for r in rows), tuple(b_star), alpha, c, view, finding, n)


def _view(alpha: Bound) -> tuple[str, bool]:
    """Which view the α interval supports (docs/experiments.md states the rule)."""
    if alpha.kind == INTERVAL:
        if alpha.low > 0:
            return "B* grows with D (as Zhang et al. 2024 and later scaling-law work report)", True
        if alpha.high < 0:
            return "B* shrinks with D (neither view: the paper found no consistent effect)", True
        if alpha.high - alpha.low <= WIDE:
            return ("no consistent effect of D on B* (the interval holds 0 and is narrower than "
                    f"{number(WIDE)}: as Shallue et al. 2019 found)"), True
        return (f"not resolved by this data (the interval holds 0 but is wider than "
                f"{number(WIDE)})"), False
    if alpha.kind == AT_LEAST and alpha.low > 0:
        return "B* grows with D (bounded from below only: some resamples put B* past the fit grid)", True
    if alpha.kind == AT_MOST and alpha.high < 0:
        return "B* shrinks with D (bounded from above only)", True
    if alpha.kind in (AT_LEAST, AT_MOST):
        return "not resolved by this data (α is bounded on one side only, and that side holds 0)", False
    return "not resolved by this data (α is undetermined)", False


def alpha_relation(text: str) -> str:
    """``= 0.5 [0.2, 0.8]``, or a one-sided bound as it reads: ``≤ 0.48`` (not ``= ≤ 0.48``)."""
    return text if text[:1] in "≤≥" else f"= {text}"
