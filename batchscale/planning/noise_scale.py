"""The gradient noise scale B_simple = tr(Sigma) / |G|^2, from gradients at two batch sizes.

McCandlish et al. (2018, "An Empirical Model of Large-Batch Training", Appendix A): the
squared norm of a gradient over B examples has expectation E|G_B|^2 = |G|^2 + tr(Sigma)/B,
with G the true gradient and Sigma the per-example gradient covariance. Two batch sizes
B_small < B_big give unbiased estimates of both

    |G|^2     ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
    tr(Sigma) ~ (|G_small|^2 - |G_big|^2) / (1/B_small - 1/B_big)

and B_simple = tr(Sigma) / |G|^2. One measurement's ratio is wild (its |G|^2 estimate may
even be negative), so both are averaged over measurements before dividing: the value is
the ratio of their means over the probe's final window (the measurements in the last
half of its steps, the last octave of training, at least ``MIN_WINDOW``; the probe
measures at every evaluation, on a geometric grid), its interval a bootstrap over them,
and the trajectory an exponential moving average (``SMOOTHING``) of each over the whole
probe, to show how it evolved. The probe measures |G_small|^2 as the mean over m
microbatches of B_small examples of their squared gradient norms, and |G_big|^2 as the
squared norm of their mean (B_big = m B_small examples).

Caveats the plan states: B_simple approximates the critical batch size only under the
assumptions of McCandlish et al. (a well-conditioned optimum, an optimally tuned learning
rate); it grows as training goes on (the noise stays, the gradient shrinks), so it
depends on where in training it is measured, and the critical batch size itself changes
during training (Merrill et al. 2025). The plan's value is the one at the end of its
probe, the part of training closest to the goal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from batchscale.core.errors import InputError

MIN_MEASUREMENTS = 8
MIN_WINDOW = 5
WINDOW_START = 0.5  # the window: measurements at steps >= this x the last one's step
SMOOTHING = 0.2  # the EMA's weight on each new measurement: about the last 5-10 count


@dataclass(frozen=True)
class NoiseScale:
    """B_simple (``value``) with a percentile interval at ``level``; ``trajectory``:
    (step, EMA-smoothed B_simple) over the probe, None where the smoothed |G|^2 was not
    yet positive."""

    value: float
    low: float
    high: float
    level: float
    b_small: int
    b_big: int
    measurements: int
    trajectory: tuple[tuple[int, float | None], ...]

    def to_dict(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "level": self.level,
                "b_small": self.b_small, "b_big": self.b_big, "measurements": self.measurements,
                "trajectory": [{"step": s, "b_simple": b} for s, b in self.trajectory]}


def two_batch_estimates(small_sq, big_sq, b_small, b_big) -> tuple[np.ndarray, np.ndarray]:
    """(|G|^2, tr(Sigma)) estimates from squared gradient norms at two batch sizes."""
    small_sq, big_sq = np.asarray(small_sq, float), np.asarray(big_sq, float)
    b_small, b_big = np.asarray(b_small, float), np.asarray(b_big, float)
    if np.any(b_big <= b_small) or np.any(b_small <= 0):
        raise ValueError("two_batch_estimates needs 0 < b_small < b_big")
    g2 = (b_big * big_sq - b_small * small_sq) / (b_big - b_small)
    trace = (small_sq - big_sq) / (1.0 / b_small - 1.0 / b_big)
    return g2, trace


def _ema(values: np.ndarray, alpha: float) -> np.ndarray:
    out, current = np.empty_like(values), values[0]
    for i, v in enumerate(values):
        current = v if i == 0 else alpha * v + (1 - alpha) * current
        out[i] = current
    return out


def estimate_noise_scale(measurements: list[dict], smoothing: float = SMOOTHING,
                         level: float = 0.9, resamples: int = 1000, seed: int = 0) -> NoiseScale:
    """B_simple from the probe's measurements (dicts with step, b_small, b_big, small_sq,
    big_sq), as the module docstring says."""
    if len(measurements) < MIN_MEASUREMENTS:
        raise InputError(f"the noise probe made {len(measurements)} gradient measurement(s); "
                         f"at least {MIN_MEASUREMENTS} are needed: give it more time "
                         "(--probe-seconds) or a larger step budget at the smallest batch size")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    steps = np.array([m["step"] for m in measurements], int)
    g2, trace = two_batch_estimates([m["small_sq"] for m in measurements],
                                    [m["big_sq"] for m in measurements],
                                    [m["b_small"] for m in measurements],
                                    [m["b_big"] for m in measurements])
    n = len(measurements)
    window = max(MIN_WINDOW, int((steps >= WINDOW_START * steps[-1]).sum()))
    g2_w, tr_w = g2[-window:], trace[-window:]
    if g2_w.mean() <= 0:
        raise InputError("the probe could not separate signal from noise: the estimated |G|^2 "
                         "is not positive at the end of the probe (the gradient is pure noise "
                         "there); train longer or use larger batches")
    value = float(tr_w.mean() / g2_w.mean())
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, window, size=(resamples, window))
    g2_r, tr_r = g2_w[idx].mean(axis=1), tr_w[idx].mean(axis=1)
    ratios = np.where(g2_r > 0, tr_r / np.where(g2_r > 0, g2_r, 1.0), math.inf)
    tail = (1 - level) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail], method="inverted_cdf")
    smooth_g2, smooth_tr = _ema(g2, smoothing), _ema(trace, smoothing)
    trajectory = tuple((int(s), float(t / g) if g > 0 else None)
                       for s, g, t in zip(steps, smooth_g2, smooth_tr))
    return NoiseScale(value, float(low), float(high), level, int(measurements[-1]["b_small"]),
                      int(measurements[-1]["b_big"]), n, trajectory)
