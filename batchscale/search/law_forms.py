"""The forms a metaparameter law may take, each fitted by least squares in log units.

Every form predicts ``y`` (the log of the fitted quantity: log v for a learning rate,
log(1 − v) for a momentum-like parameter) from ``x = log B``:

- ``constant``: y = a (the value does not move with batch size)
- ``linear``: y = a + x (v ∝ B; Goyal et al. 2017's rule for the learning rate)
- ``sqrt``: y = a + x/2 (v ∝ √B; Krizhevsky 2014, Hoffer et al. 2017)
- ``power``: y = a + b·x (v ∝ B^b, the exponent free)
- ``saturating``: y = a + x − log(B + B_s) (v = v_max·B/(B + B_s): linear below B_s,
  flat above it; McCandlish et al. 2018's ε_opt(B) = ε_max/(1 + B_noise/B)); fitted by a
  grid over log B_s and golden-section refinement, a in closed form for each B_s.

``fit_form`` returns the least-squares parameters ``theta``, the unscaled covariance
(XᵀX)⁻¹ (for the saturating form the linearised (JᵀJ)⁻¹ at the optimum) and the sum
of squared residuals; ``gradient`` is dy/dtheta at a batch size, what a prediction
interval needs. ``t_quantile`` is Student's t in pure numpy (this layer has no scipy).
Why logs: every one of these quantities is positive and scale-free, its searches sample
it on a log scale, and an error of a factor 2 should weigh the same at 1e-3 as at 1.
"""

from __future__ import annotations

import functools
import math

import numpy as np

FORM_PARAMETERS = {"constant": 1, "linear": 1, "sqrt": 1, "power": 2, "saturating": 2}
FIXED_SLOPE = {"constant": 0.0, "linear": 1.0, "sqrt": 0.5}
_GRID = 241  # log B_s candidates of the saturating form
_SPAN = math.log(100.0)  # B_s searched from min(B)/100 to max(B)·100


def fit_form(form: str, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(theta, unscaled covariance, sum of squared residuals) of ``form`` on (x, y)."""
    if form in FIXED_SLOPE:
        a = float(np.mean(y - FIXED_SLOPE[form] * x))
        theta = np.array([a])
        return theta, np.array([[1.0 / len(x)]]), _sse(form, theta, x, y)
    if form == "power":
        design = np.column_stack([np.ones_like(x), x])
        theta, *_ = np.linalg.lstsq(design, y, rcond=None)
        return theta, np.linalg.pinv(design.T @ design), _sse(form, theta, x, y)
    if form == "saturating":
        return _fit_saturating(x, y)
    raise ValueError(f"unknown law form {form!r}; allowed: {', '.join(FORM_PARAMETERS)}")


def predict(form: str, theta, x):
    """The form's y at log batch size ``x`` (a number or an array)."""
    x = np.asarray(x, dtype=float)
    if form in FIXED_SLOPE:
        return theta[0] + FIXED_SLOPE[form] * x
    if form == "power":
        return theta[0] + theta[1] * x
    return theta[0] + x - np.logaddexp(x, theta[1])  # saturating: theta = (a, log B_s)


def gradient(form: str, theta, x: float) -> np.ndarray:
    """dy/dtheta at log batch size ``x``."""
    if form in FIXED_SLOPE:
        return np.array([1.0])
    if form == "power":
        return np.array([1.0, x])
    share = 1.0 / (1.0 + math.exp(x - theta[1]))  # B_s/(B + B_s)
    return np.array([1.0, -share])


def leave_one_out(form: str, x: np.ndarray, y: np.ndarray) -> float:
    """Root mean square error of predicting each point from a fit to the others (log
    units): how well the form predicts a batch size it was not fitted on, the use a law
    is put to. The two ends count as extrapolations, as the next batch size will be."""
    errors = []
    for i in range(len(x)):
        keep = np.arange(len(x)) != i
        theta, _, _ = fit_form(form, x[keep], y[keep])
        errors.append(float(predict(form, theta, x[i])) - y[i])
    return float(math.sqrt(np.mean(np.square(errors))))


@functools.lru_cache(maxsize=256)
def t_quantile(level: float, dof: float) -> float:
    """The two-sided ``level`` quantile of Student's t with ``dof`` degrees of freedom
    (t such that P(|T| <= t) = level), by bisection on the CDF written in θ = atan(t/√ν),
    where the density is c·cos^(ν−1)θ: smooth and bounded, so Simpson's rule is exact
    enough. ``dof`` = inf (or > 1e6): the normal quantile's limit."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level {level!r} is not in (0, 1)")
    nu = min(float(dof), 1e6)
    if nu <= 0:
        return math.inf
    const = math.exp(math.lgamma((nu + 1) / 2) - math.lgamma(nu / 2)) / math.sqrt(math.pi)

    def mass(theta: float) -> float:  # P(0 <= T <= sqrt(nu) tan theta)
        grid = np.linspace(0.0, theta, 2001)
        values = np.cos(grid) ** (nu - 1)
        h = theta / 2000
        return const * h / 3 * (values[0] + values[-1] + 4 * values[1:-1:2].sum()
                                + 2 * values[2:-1:2].sum())

    low, high = 0.0, math.pi / 2
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if mass(mid) < level / 2 else (low, mid)
    return math.sqrt(nu) * math.tan((low + high) / 2)


def _sse(form: str, theta, x, y) -> float:
    return float(np.sum(np.square(predict(form, theta, x) - y)))


def _fit_saturating(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Grid over s = log B_s, then golden-section refinement between the grid's best
    point's neighbours; a is the mean residual for each s. A B_s at the grid's end means
    the data look linear (B_s large) or flat (B_s small): the fit is then one of those
    forms in disguise, and its covariance (near-singular) says so with a wide interval."""

    def cost(s):  # s: one value or a column of values; returns (sse, a) alike
        shape = x - np.logaddexp.outer(np.atleast_1d(s), x)  # y − a for each s, less a
        a = np.mean(y - shape, axis=1)
        return np.sum(np.square(shape + a[:, None] - y), axis=1), a

    grid = np.linspace(x.min() - _SPAN, x.max() + _SPAN, _GRID)
    i = int(np.argmin(cost(grid)[0]))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, _GRID - 1)]
    ratio = (math.sqrt(5) - 1) / 2
    c, d = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fc, fd = cost([c, d])[0]
    for _ in range(40):  # the bracket shrinks by 0.618 a step: 1e-8 of it after 40
        if fc <= fd:
            hi, d, fd = d, c, fc
            c = hi - ratio * (hi - lo)
            fc = cost(c)[0][0]
        else:
            lo, c, fc = c, d, fd
            d = lo + ratio * (hi - lo)
            fd = cost(d)[0][0]
    s = (lo + hi) / 2
    sse, a = cost(s)
    theta = np.array([float(a[0]), s])
    jacobian = np.array([gradient("saturating", theta, xi) for xi in x])
    return theta, np.linalg.pinv(jacobian.T @ jacobian), float(sse[0])
