"""Every critical batch size of one study, by each definition of
``core.critical_batch_size`` (whose names, symbols and one-line definitions this module
uses and never restates), and how each probe's prediction compares with the fit.

Why: "the critical batch size" means four different numbers (B* of the fitted curve, the
20%-overhead batch size, the gradient noise scale B_simple, the branched estimate), which
differ by 5x or more on one curve. The report, summary.json and the Kubeflow metrics
carry every one under its own name, from this one place:

- ``b_star_fit``: the regime fit's B* (its interval and level; one-sided where the fit
  bounds it from one side only, ``intervals.regime_bound``);
- ``b_overhead_20``: ``OVERHEAD`` x B* with B*'s interval scaled alike: on the fitted
  curve S(B) = S_min (1 + B*/B) steps exceed perfect scaling by B/B*, so the 20% point
  is exactly 0.2 B* in every resample;
- ``b_simple`` and ``b_branched``: what ``batchscale plan`` measured before the sweep, read
  from plan.json: ``plan["critical_batch_sizes"][name]`` (``CbsEstimate.to_dict``), or,
  in a plan written before that key, ``plan["noise_scale"]`` as B_simple.

Each probe estimate is set beside the fit: its ratio predicted / fitted (estimate / B*)
and whether B* lies in its interval. ``from_summary`` reads the same record back from a
summary.json (also one written before this module, with ``predicted_noise_scale``), so
the console prints what the pages show.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from batchscale.analysis.statistics.intervals import (
    INTERVAL,
    VALUE,
    Bound,
    bound,
    regime_bound,
    regime_text,
)
from batchscale.analysis.statistics.regimes import RegimeFit
from batchscale.core.critical_batch_size import DEFINITIONS, OVERHEAD, PROBE, SWEEP, CbsEstimate

FITTED = ("b_star_fit", "b_overhead_20")
PREDICTED = tuple(name for name, d in DEFINITIONS.items() if d.source == PROBE)
PLAN_LEVEL = 0.9  # B_simple's interval level in every plan.json so far (noise_scale's default)
OLD_SUMMARY = ("not in this summary.json, written before the report showed every definition; "
               "`batchscale report STUDY` writes it anew")
PLAN_HINT = "run `batchscale plan SPEC` with this study's spec"
PLAN_WHERE = ("it writes plan.json beside the study, where the report reads it; for a finished "
              "study, `batchscale calibrate STORE` probes it without touching it and sets both "
              "against B* in STORE/calibration/")


@dataclass(frozen=True)
class Prediction:
    """A probe's estimate against the fitted B*: ``ratio`` = estimate / B* (None: no
    two-sided or point B* to divide by), ``inside``: B* lies in the estimate's interval
    (None: not to be said)."""

    name: str
    ratio: float | None
    inside: bool | None


@dataclass(frozen=True)
class CriticalBatchSizes:
    """The estimates found, in ``DEFINITIONS`` order; ``missing``: name -> why it is absent
    and how to get it; ``predictions``: one per probe estimate found; ``goal``: the goal
    they are of (the study's first, validation metric); ``sweep_examples``: the examples
    the sweep trained (summary.json training_cost), None when unknown."""

    goal: str
    estimates: tuple[CbsEstimate, ...] = ()
    missing: dict[str, str] = field(default_factory=dict)
    predictions: tuple[Prediction, ...] = ()
    sweep_examples: int | None = None

    def get(self, name: str) -> CbsEstimate | None:
        return next((e for e in self.estimates if e.name == name), None)

    def prediction(self, name: str) -> Prediction | None:
        return next((p for p in self.predictions if p.name == name), None)

    def spent(self, est: CbsEstimate) -> tuple[int | None, float | None]:
        """(examples, share of the sweep's trained examples): a fitted estimate spent the
        sweep itself (share 1); a probe's the examples it recorded (None: not recorded)."""
        examples = self.sweep_examples if est.definition.source == SWEEP else est.examples
        if examples is None or not self.sweep_examples:
            return examples, None
        return examples, examples / self.sweep_examples

    def to_dict(self) -> dict:
        """summary.json's ``critical_batch_sizes``: each estimate under its name
        (``CbsEstimate.to_dict`` plus ``spent_examples``, ``share_of_sweep`` and, for a
        probe, ``predicted_over_fitted`` and ``b_star_inside``), then goal, sweep_examples
        and missing (name -> how to get it)."""
        out: dict = {}
        for est in self.estimates:
            examples, share = self.spent(est)
            out[est.name] = {**est.to_dict(), "spent_examples": examples, "share_of_sweep": share}
            p = self.prediction(est.name)
            if p is not None:
                out[est.name].update(predicted_over_fitted=p.ratio, b_star_inside=p.inside)
        return {**out, "goal": self.goal, "sweep_examples": self.sweep_examples,
                "missing": dict(self.missing)}


def estimate_bound(est: CbsEstimate) -> Bound:
    """The estimate in the one notation's terms: an end of 0 or inf is open, both ends NaN
    is no interval (``intervals.bound``)."""
    return bound(est.value, -math.inf if est.low <= 0 else est.low, est.high)


def estimate_text(est: CbsEstimate) -> str:
    """``457 [248, 865]``, ``≥ 248``, ``457`` (no interval), ``—``."""
    return estimate_bound(est).text()


def _from_dict(raw: dict, name: str) -> CbsEstimate:
    """``CbsEstimate.from_dict``, except that both ends null is no interval (NaN), as
    ``to_dict`` wrote it, not an interval open on both sides."""
    est = CbsEstimate.from_dict({**raw, "name": name})
    if raw.get("low") is None and raw.get("high") is None:
        est = replace(est, low=math.nan, high=math.nan)
    return est


def _fitted(fit: RegimeFit | None) -> tuple[list[CbsEstimate], dict[str, str]]:
    if fit is None or not fit.fitted:
        why = f"no regime fit ({fit.reason})" if fit is not None else "no regime fit"
        return [], {name: why for name in FITTED}
    return _from_b_star(fit.b_star, fit.batch_sizes, fit.level), {}


def _from_b_star(est, batch_sizes, level: float) -> list[CbsEstimate]:
    """B* and B_20% from the fit's B* (a ``regimes.Estimate`` or summary.json's dict of
    it): the ends the data bound (``intervals.regime_bound``; an open end 0 or inf, no
    interval NaN), and the words for a one-sided or undetermined B* as the note."""
    b = regime_bound(est)
    low, high = (math.nan, math.nan) if b.kind == VALUE else (
        b.low if b.low is not None else 0.0, b.high if b.high is not None else math.inf)
    value = _number(est.get("value") if isinstance(est, dict) else est.value)
    note = "" if b.kind in (INTERVAL, VALUE) else regime_text(est, batch_sizes, level=level,
                                                              short=True)
    b_star = CbsEstimate("b_star_fit", value, low, high, level, None, note)
    over = CbsEstimate("b_overhead_20", OVERHEAD * value, OVERHEAD * low, OVERHEAD * high,
                       level, None, f"{OVERHEAD:g} × B*, B*'s interval scaled alike"
                       + (f"; B* {note}" if note else ""))
    return [b_star, over]


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _old_noise_scale(plan: dict) -> CbsEstimate | None:
    """B_simple of a plan.json written before ``critical_batch_sizes``: its
    ``noise_scale``; the examples its probe spent, from its runs (trained) and its
    measurements (gradients at b_big), where it recorded them."""
    noise = plan.get("noise_scale")
    if not isinstance(noise, dict) or not math.isfinite(_number(noise.get("value"))):
        return None
    probe = plan.get("probe") if isinstance(plan.get("probe"), dict) else {}
    examples = None
    try:  # a probe record that cannot be read leaves the cost unknown, not the report failed
        if probe.get("batch_size") and isinstance(probe.get("runs"), list):
            trained = sum(int(r.get("steps") or 0) for r in probe["runs"] if isinstance(r, dict))
            gradients = int(noise.get("measurements") or 0) * int(noise.get("b_big") or 0)
            examples = trained * int(probe["batch_size"]) + gradients
    except (TypeError, ValueError):
        examples = None
    low, high = _number(noise.get("low")), _number(noise.get("high"))
    return CbsEstimate("b_simple", _number(noise["value"]), low if math.isfinite(low) else 0.0,
                       high if math.isfinite(high) else math.inf,
                       _number(noise.get("level")) if noise.get("level") is not None else PLAN_LEVEL,
                       examples, f"from gradients over {noise.get('b_small')} and "
                                 f"{noise.get('b_big')} examples (plan.json's noise_scale)")


def plan_estimates(plan: dict | None) -> dict[str, CbsEstimate]:
    """The probe estimates plan.json holds, by name (an entry that cannot be read is left
    out, as one that is not there)."""
    if not isinstance(plan, dict):
        return {}
    found = {}
    stored = plan.get("critical_batch_sizes")
    for name, raw in (stored.items() if isinstance(stored, dict) else ()):
        if name in PREDICTED and isinstance(raw, dict):
            try:
                est = _from_dict(raw, name)
            except (KeyError, TypeError, ValueError):
                continue
            if math.isfinite(est.value):
                found[name] = est
    if "b_simple" not in found:
        old = _old_noise_scale(plan)
        if old is not None:
            found["b_simple"] = old
    return found


def _not_in_plan(plan: dict, name: str) -> str:
    """Why plan.json has no usable ``name``: a plan written before ``critical_batch_sizes``
    (plan again), or today's plan whose probe was skipped (its reason, ``branched.skipped``)
    or measured nothing (an entry without a value)."""
    stored = plan.get("critical_batch_sizes")
    if not isinstance(stored, dict):
        return (f"not in this study's plan.json (written by an older `batchscale plan`): "
                f"{PLAN_HINT} again")
    if name in stored:
        return "in this study's plan.json with no value: its probe measured nothing"
    branched = plan.get("branched") if name == "b_branched" else None
    skipped = branched.get("skipped") if isinstance(branched, dict) else None
    return "not measured by this study's plan" + (f": {skipped}" if skipped else "")


def predict(est: CbsEstimate, b_star: CbsEstimate | None) -> Prediction:
    """``est`` against the fitted B* (``Prediction``)."""
    if b_star is None or b_star.value <= 0 or estimate_bound(b_star).kind not in (INTERVAL, VALUE):
        return Prediction(est.name, None, None)  # B* one-sided or undetermined
    ratio = est.value / b_star.value if est.value > 0 else None
    inside = None if math.isnan(est.low) and math.isnan(est.high) else bool(
        est.low <= b_star.value <= est.high)
    return Prediction(est.name, ratio, inside)


def critical_batch_sizes(fit: RegimeFit | None, plan: dict | None, goal: str = "",
                         sweep_examples: int | None = None) -> CriticalBatchSizes:
    """Every definition's estimate for one goal: the fit's two (``fit``: that goal's
    regime fit), the plan's probes (``plan``: plan.json or None), each probe against B*."""
    fitted, missing = _fitted(fit)
    probes = plan_estimates(plan)
    for name in PREDICTED:
        if name not in probes:
            missing[name] = f"not measured: {PLAN_HINT} ({PLAN_WHERE})" if plan is None else \
                _not_in_plan(plan, name)
    found = {e.name: e for e in [*fitted, *probes.values()]}
    estimates = tuple(found[name] for name in DEFINITIONS if name in found)
    b_star = found.get("b_star_fit")
    predictions = tuple(predict(found[name], b_star) for name in PREDICTED if name in found)
    return CriticalBatchSizes(goal, estimates, {n: missing[n] for n in DEFINITIONS if n in missing},
                              predictions, sweep_examples)


def from_summary(doc: dict | None) -> CriticalBatchSizes | None:
    """The record back from summary.json (what the console prints from): its
    ``critical_batch_sizes``, or what one written before it holds (``_old_summary``)."""
    if not isinstance(doc, dict):
        return None
    raw = doc.get("critical_batch_sizes")
    if isinstance(raw, dict):
        estimates, predictions = [], []
        for name in DEFINITIONS:
            if isinstance(raw.get(name), dict):
                est = _from_dict(raw[name], name)
                estimates.append(est)
                if name in PREDICTED:
                    predictions.append(Prediction(name, raw[name].get("predicted_over_fitted"),
                                                  raw[name].get("b_star_inside")))
        return CriticalBatchSizes(str(raw.get("goal", "")), tuple(estimates),
                                  dict(raw.get("missing") or {}), tuple(predictions),
                                  raw.get("sweep_examples"))
    return _old_summary(doc)


def _old_summary(doc: dict) -> CriticalBatchSizes | None:
    """What a summary.json written before ``critical_batch_sizes`` gives: B* and B_20% from
    its first goal's regime fit, B_simple and its ratio from ``predicted_noise_scale``
    (B*/B_simple there; its level was ``PLAN_LEVEL``); None without a fitted first goal
    or a prediction."""
    goal = str((doc.get("goals") or [""])[0])
    fit = (doc.get("regimes") or {}).get(goal) or {}
    estimates = []
    if fit.get("fitted") and isinstance(fit.get("b_star"), dict):
        estimates = _from_b_star(fit["b_star"], fit.get("batch_sizes") or [],
                                 float(fit.get("level", 0.95)))
    old, predictions = doc.get("predicted_noise_scale"), ()
    if isinstance(old, dict) and old.get("value") is not None:
        estimates.append(_from_dict({"level": PLAN_LEVEL, **old}, "b_simple"))
        ratio = old.get("ratio")  # B*/B_simple: predicted / fitted is its inverse
        predictions = (Prediction("b_simple", 1 / ratio if ratio else None, old.get("inside")),)
    if not estimates:
        return None
    found = {e.name for e in estimates}
    return CriticalBatchSizes(goal, tuple(estimates),
                              {n: OLD_SUMMARY for n in DEFINITIONS if n not in found}, predictions,
                              (doc.get("training_cost") or {}).get("trained_examples"))
