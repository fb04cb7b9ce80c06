"""Laws of the best metaparameters against batch size, and the search box they propose.

A finished sweep tunes every batch size anew; its winners trace how the best learning rate
(and momentum, or the Adam family's betas) moves with batch size (Shallue et al. 2019,
Section 4.7). ``fit_laws`` fits the common forms to them (``law_forms``: constant, linear,
square root, free power, saturating; momentum-like parameters constant and power),
``best_law`` picks one per parameter, and ``proposed_box`` turns the picks into the search
space of a batch size not yet measured. The points and what a value must be to take part
are ``law_points``'s (``points_from_results``: from the round planner's trials).

Decisions (docs/methods.md, "Metaparameter laws"):

- *What is fitted*: log v, or log(1 − v) for momentum, β₁ and β₂ (the unit their searches
  sample, REVERSE_LOG_SCALE: 0.9, 0.99, 0.999 evenly apart). A momentum parameter gets
  ``constant`` (the common practice: keep γ) and ``power`` (1 − γ ∝ B^α); any other
  positive parameter the same two. Learning rates get all five forms.
- *Momentum optimizers*: when the points carry a momentum, the learning-rate law the box
  uses is the one of the effective learning rate η/(1−γ) (``effective_learning_rate``,
  fitted beside ``learning_rate``'s own): the paper finds η and γ trading off along
  η/(1−γ) = const (Figures 9, 13), so the best η alone wanders along that ridge while
  η/(1−γ) is what follows batch size (Figure 8). The box's η range is the effective
  rate's interval at the predicted momentum, so its centre lies on the predicted ridge.
- *Goodness*: leave-one-out root mean square error in log units (``law_forms.leave_one_out``):
  it measures prediction at a batch size the fit did not see, the law's one use, and
  compares forms with different parameter counts on 3-10 points, where AICc's correction
  (n − p − 1 in a denominator) is undefined or dominates. ``best_law`` takes the lowest,
  but a form with fewer parameters wins when its error is within ``SIMPLER_WITHIN`` of it
  or when the winner contains it (an exponent interval holding ½: the square root).
- *Intervals*: prediction intervals at ``level`` (Student's t with n − p degrees of
  freedom, the residuals' scale): where the next batch size's best value may lie, not only
  where the mean law runs. A point may carry the parameters of the trials nearly as good
  as its best (``(batch_size, best, near_best)``): the spread of those is the optimum's
  flatness, and the noise scale is never below it (a flat optimum makes the best trial a
  noisy estimate of where the optimum is, however well three points line up).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from batchscale.core.edges import from_scale, to_scale
from batchscale.core.spec import Parameter
from batchscale.search import law_forms
from batchscale.search.law_points import (  # noqa: F401  (MIN_BATCH_SIZES, NEAR_BEST, points_from_results: the API)
    EFFECTIVE,
    MIN_BATCH_SIZES,
    MOMENTUM_LIKE,
    NEAR_BEST,
    has_momentum,
    near_best_variance,
    number_of,
    ok,
    points_from_results,
    usable,
    validated,
    varies,
    y_of,
)
from batchscale.search.next_round import SCALE_NAMES, parameter_limits

LEVEL = 0.9  # the intervals' and the box's default level
SIMPLER_WITHIN = 1.1  # fewer parameters win within 10% of the best leave-one-out error
MIN_WIDTH_SHARE = 0.25  # a box is at least this share of the original range's width
LEARNING_RATES = ("learning_rate", "effective_learning_rate")
LEARNING_RATE_FORMS = ("constant", "linear", "sqrt", "power", "saturating")
OTHER_FORMS = ("constant", "power")


@dataclass(frozen=True)
class LawFit:
    """One form fitted to one parameter's best values (module doc for the choices).

    ``coefficients`` are in the fitted quantity's units (``quantity``: the parameter, or
    1 − it for a momentum): ``c`` (q = c, c·B, c·√B or c·B^alpha), ``alpha``, or ``max``
    and ``b_s`` (q = max·B/(B + b_s)). ``theta``, ``covariance`` (unscaled), ``sigma``
    (noise scale, log units) and ``dof`` carry what intervals need; ``goodness`` is the
    leave-one-out RMS log error (a factor exp(goodness) typical miss); ``noise`` says
    where ``sigma`` came from ("residuals" or "near-best spread")."""

    parameter: str
    form: str
    coefficients: dict
    theta: tuple
    covariance: tuple
    sigma: float
    dof: int
    goodness: float
    batch_sizes: tuple
    transform: str = "log"  # "log": y = log v; "log1m": y = log(1 − v)
    noise: str = "residuals"

    @property
    def quantity(self) -> str:
        return f"1 − {self.parameter}" if self.transform == "log1m" else self.parameter

    @property
    def parameters_fitted(self) -> int:
        return law_forms.FORM_PARAMETERS[self.form]

    def predict(self, batch_size: float) -> float:
        return self._value(float(law_forms.predict(self.form, self.theta, math.log(batch_size))))

    def interval(self, batch_size: float, level: float = LEVEL) -> tuple[float, float]:
        """Where the best value at ``batch_size`` lies with probability ``level`` if the
        law holds: the prediction interval (the law's uncertainty and the points' noise)."""
        y, half = self._log_interval(batch_size, level)
        low, high = self._value(y - half), self._value(y + half)
        return (min(low, high), max(low, high))

    def _log_interval(self, batch_size: float, level: float) -> tuple[float, float]:
        x = math.log(batch_size)
        g = law_forms.gradient(self.form, self.theta, x)
        spread = 1.0 + float(g @ np.asarray(self.covariance) @ g)
        half = law_forms.t_quantile(level, self.dof) * self.sigma * math.sqrt(max(spread, 0.0))
        return float(law_forms.predict(self.form, self.theta, x)), half

    def coefficient_intervals(self, level: float = LEVEL) -> dict:
        """Each coefficient's interval at ``level`` (from theta's covariance; exp of the
        log-coefficients' ends)."""
        t = law_forms.t_quantile(level, self.dof)
        ends = [(v - t * self.sigma * math.sqrt(max(self.covariance[i][i], 0.0)),
                 v + t * self.sigma * math.sqrt(max(self.covariance[i][i], 0.0)))
                for i, v in enumerate(self.theta)]
        names = list(self.coefficients)
        out = {names[0]: (_exp(ends[0][0]), _exp(ends[0][1]))}
        if self.form == "power":
            out["alpha"] = ends[1]
        elif self.form == "saturating":
            out["b_s"] = (_exp(ends[1][0]), _exp(ends[1][1]))
        return out

    @property
    def equation(self) -> str:
        """Short words for the law: "learning_rate ∝ B^0.52", "1 − momentum constant"."""
        q, c = self.quantity, self.coefficients
        return {"constant": f"{q} constant", "linear": f"{q} ∝ B", "sqrt": f"{q} ∝ √B",
                "power": f"{q} ∝ B^{c.get('alpha', math.nan):.2f}",
                "saturating": f"{q} = {c.get('max', math.nan):.3g}·B/(B + {c.get('b_s', math.nan):.3g})",
                }[self.form]

    def to_dict(self, level: float = LEVEL) -> dict:
        return {"parameter": self.parameter, "form": self.form, "quantity": self.quantity,
                "equation": self.equation, "coefficients": dict(self.coefficients),
                "coefficient_intervals": {k: list(v) for k, v in
                                          self.coefficient_intervals(level).items()},
                "level": level, "goodness": {"loo_rms_log_error": self.goodness},
                "sigma": self.sigma, "noise": self.noise, "dof": self.dof,
                "batch_sizes": list(self.batch_sizes)}

    def _value(self, y: float) -> float:
        return -math.expm1(y) if self.transform == "log1m" else _exp(y)


def fit_laws(points: list[tuple], parameters: tuple[str, ...] | None = None) -> dict[str, list[LawFit]]:
    """Every form fitted to every parameter, from one point per measured batch size:
    ``(batch_size, best trial's parameters)`` or ``(batch_size, best, near_best)`` with
    ``near_best`` the parameter dicts of trials nearly as good (module doc: intervals).

    ``parameters``: the names to fit (ValueError when one lacks a usable value at some
    point); None: every numeric parameter all points carry, usable (log defined) and not
    the same everywhere. Where the points carry a non-zero momentum, the effective
    learning rate η/(1−γ) is fitted too (key ``effective_learning_rate``)."""
    table = validated(points)
    if parameters is None:
        names = [n for n in table[0][1] if usable(table, n) and varies(table, n)]
    else:
        names = list(parameters)
    if "learning_rate" in names and EFFECTIVE not in names and has_momentum(table):
        names.append(EFFECTIVE)
    x = np.log([b for b, _, _ in table])
    out: dict[str, list[LawFit]] = {}
    for name in names:
        if not usable(table, name):
            raise ValueError(f"parameter {name!r} lacks a usable value at some batch size "
                             f"(needs a number{' below 1' if name in MOMENTUM_LIKE else ' > 0'})")
        y = np.array([y_of(name, number_of(p, name)) for _, p, _ in table])
        floor = near_best_variance(table, name)
        forms = LEARNING_RATE_FORMS if name in LEARNING_RATES else OTHER_FORMS
        out[name] = [_fit(name, form, x, y, floor, table) for form in forms
                     if len(x) > law_forms.FORM_PARAMETERS[form]]
    return out


def best_law(fits: list[LawFit]) -> LawFit:
    """The law of one parameter with the lowest leave-one-out error, except that one with
    fewer parameters wins when within ``SIMPLER_WITHIN`` of it (ties: the simpler), and a
    two-parameter winner gives way to the best one-parameter form it contains: a power
    whose exponent's ``LEVEL`` interval holds 0, ½ or 1, a saturating law whose B_s lies
    outside the measured batch sizes (the data then never see its bend: linear above the
    largest, constant below the smallest). Extra parameters must earn their place."""
    if not fits:
        raise ValueError("no fitted law to choose from")
    lowest = min(f.goodness for f in fits)
    close = [f for f in fits if f.goodness <= lowest * SIMPLER_WITHIN + 1e-12]
    pick = min(close, key=lambda f: (f.parameters_fitted, f.goodness))
    nested = [f for f in fits if f.parameters_fitted == 1 and _contains(pick, f.form)]
    return min(nested, key=lambda f: f.goodness) if pick.parameters_fitted > 1 and nested else pick


def _contains(law: LawFit, form: str) -> bool:
    """Whether the data cannot tell ``law`` (two parameters) from the one-parameter ``form``."""
    if law.form == "power":
        low, high = law.coefficient_intervals(LEVEL)["alpha"]
        return low <= law_forms.FIXED_SLOPE[form] <= high
    if law.form == "saturating":
        b_s = law.coefficients["b_s"]
        return ((form == "linear" and b_s > max(law.batch_sizes))
                or (form == "constant" and b_s < min(law.batch_sizes)))
    return False


def proposed_box(points: list[tuple], batch_size: int,
                 space: tuple[Parameter, ...]) -> tuple[tuple[Parameter, ...], str]:
    """The search space for ``batch_size`` (not measured) from the laws of ``points``:
    each fitted continuous parameter of ``space`` centred on its best law's prediction
    (in its own scale), as wide as the law's ``LEVEL`` prediction interval but at least
    ``MIN_WIDTH_SHARE`` and at most all of its ``space`` range's width, clipped to its
    limits (``next_round.parameter_limits``); the others keep their range. A learning
    rate with a momentum: centred at the effective rate's prediction times (1 − the
    predicted momentum). Returns (space, one-line reason)."""
    table = validated(points)
    names = tuple(p.name for p in space if p.values is None and usable(table, p.name)
                  and (varies(table, p.name) or p.name == "learning_rate"))
    chosen = {n: best_law(f) for n, f in fit_laws(points, names).items() if f}
    momentum = _momentum_at(table, chosen, batch_size)
    boxed, used = [], []
    for p in space:
        law = chosen.get(EFFECTIVE if p.name == "learning_rate" and EFFECTIVE in chosen else p.name)
        if law is None or p.values is not None or p.min is None or p.max is None:
            boxed.append(p)
            continue
        y, half = law._log_interval(batch_size, LEVEL)
        shift = math.log1p(-momentum) if law.parameter == EFFECTIVE else 0.0
        ends = [law._value(y + shift + d) for d in (-half, 0.0, half)]
        new = _box(p, *ends)
        boxed.append(new)
        if new is not p:
            used.append(f"{p.name} from {law.equation} at momentum {momentum:.3g}" if shift
                        else law.equation)
    sizes = [b for b, _, _ in table]
    reason = (f"fitted box for batch size {batch_size}: {'; '.join(used) or 'no law moved a range'} "
              f"(best laws from batch sizes {sizes[0]}-{sizes[-1]}, {len(sizes)} points, "
              f"{LEVEL:.0%} prediction intervals)")
    return tuple(boxed), reason


def _box(p: Parameter, low: float, centre: float, high: float) -> Parameter:
    """``p``'s range centred on ``centre`` with the interval's half-width (module doc)."""
    scale = SCALE_NAMES[p.scale]
    lowest, highest = parameter_limits(p)

    def unit(v: float) -> float:
        return to_scale(min(max(v, lowest), highest), scale)

    c = unit(centre)
    half = max(abs(unit(high) - c), abs(c - unit(low)))
    width = abs(to_scale(p.max, scale) - to_scale(p.min, scale))
    half = min(max(half, MIN_WIDTH_SHARE * width / 2), width / 2)
    lo = max(from_scale(c - half, scale), lowest)
    hi = min(from_scale(c + half, scale), highest)
    if p.integer:
        lo, hi = max(math.floor(lo), math.ceil(lowest)), max(math.ceil(hi), math.ceil(lowest))
    return replace(p, min=lo, max=hi) if hi > lo else p


def _momentum_at(table, chosen: dict, batch_size: int) -> float:
    """The momentum the box's learning rate sits at: its law's prediction, else the
    points' median (a fixed momentum)."""
    if "momentum" in chosen:
        return chosen["momentum"].predict(batch_size)
    values = [number_of(p, "momentum") for _, p, _ in table]
    values = [v for v in values if v is not None and v < 1]
    return float(np.median(values)) if values else 0.0


def _fit(name, form, x, y, floor, table) -> LawFit:
    theta, covariance, sse = law_forms.fit_form(form, x, y)
    dof = len(x) - law_forms.FORM_PARAMETERS[form]
    residual = sse / dof
    sigma = math.sqrt(max(residual, floor))
    coefficients = {"constant": ["c"], "linear": ["c"], "sqrt": ["c"], "power": ["c", "alpha"],
                    "saturating": ["max", "b_s"]}[form]
    values = [_exp(theta[0])] + ([float(theta[1])] if form == "power" else
                                 [_exp(theta[1])] if form == "saturating" else [])
    return LawFit(name, form, dict(zip(coefficients, values)), tuple(float(t) for t in theta),
                  tuple(tuple(float(v) for v in row) for row in covariance), sigma, dof,
                  law_forms.leave_one_out(form, x, y), tuple(b for b, _, _ in table),
                  "log1m" if name in MOMENTUM_LIKE else "log",
                  "near-best spread" if floor > residual else "residuals")


def _exp(value: float) -> float:
    return math.exp(min(value, 700.0))
