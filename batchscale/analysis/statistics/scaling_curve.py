"""The curve S(B) = S_min * (1 + B_star / B): its least-squares fit and the bootstrap it is fitted to.

``fit_log`` fits many curves at once in log space (a profile over a grid of log B_star, then
golden-section search); ``fit_curve`` is the point fit of one curve; ``bootstrap_log_steps``
resamples a study's trials into many steps-to-result curves. ``regimes.fit_regimes`` turns
those fits into the regimes and their confidence intervals.
"""

from __future__ import annotations

import math

import numpy as np

MIN_BATCH_SIZES = 3  # two parameters: at least one degree of freedom left
GRID_STEP = 0.01 * math.log(2)  # profile grid over log B_star
GRID_MARGIN = 8 * math.log(2)  # the grid reaches 256x beyond the measured batch sizes
GOLDEN_ITERATIONS = 48  # shrinks one grid step to ~1e-12 in log B_star
CHUNK_ELEMENTS = 2_000_000  # samples x grid points per chunk: a few arrays of 16 MB each


def fit_log(y: np.ndarray, log_b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
    a, c, edge = fit_log(y[None, :], np.log(b[keep]))
    if edge[0] > 0:
        return 0.0, math.inf
    if edge[0] < 0:
        return float(np.exp(y.mean())), 0.0
    return float(np.exp(a[0])), float(np.exp(c[0]))


def spacing(log_steps: np.ndarray) -> float:
    """Mean gap between the lowest (up to 4) order statistics of the log steps that reached."""
    x = np.sort(log_steps)
    k = min(4, len(x))
    return float((x[k - 1] - x[0]) / (k - 1)) if k >= 2 else 0.0


def bootstrap_log_steps(groups: list[tuple[np.ndarray, np.ndarray]], resamples: int,
               rng: np.random.Generator) -> np.ndarray:
    """Resampled log steps to result, (resamples, batch sizes); NaN where no resampled trial reached.

    Per batch size, trials are resampled with replacement; each resampled trial that reached gets
    its crossing drawn uniformly in log between its previous and its reaching evaluation, and the
    minimum is lowered by an exponential draw with mean ``spacing`` (see spacing). Why: the best of
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
        best = best - spacing(top[reached]) * rng.standard_exponential(resamples)
        out[:, j] = np.where(np.isfinite(best), best, math.nan)
    return out
