"""Time and cost to result per batch size: what the steps-to-result curve costs on the
hardware that ran the study.

time(B) = S(B) x seconds per step at B (``step_times``); cost(B) = time x devices x price
per device-hour (``batchscale.core.prices``). The interval of S(B) is the percentile
interval of the same bootstrap the regime fit uses (``scaling_curve.bootstrap_log_steps``,
same resamples and seed), widened to hold the measured S(B): the bootstrap corrects the
best-of-n overshoot, so with few trials every resample can lie below it. Time and cost
carry that interval; the step time is taken as exact (its spread is not in it).

Price per device-hour: ``price`` (``batchscale report --price``) wins, then the study
spec's ``price_per_device_hour``, then the price table for the preset the trials ran on.

The device limit, the batch size beyond which more devices no longer reduce time: with
measured step times on several device counts, the smallest batch size that no larger
batch size (at its fastest device count) beats by more than ``FASTER`` (time ratio above
1.1); with one device count, a projection assuming ideal weak scaling (step time held as
devices grow with the batch, communication ignored): time is then proportional to steps,
so the limit is the regime fit's maximum useful batch size (S = 1.1 S_min).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from batchscale.analysis.statistics.intervals import regime_text
from batchscale.analysis.statistics.scaling_curve import bootstrap_log_steps
from batchscale.analysis.statistics.step_times import StepTimeProfile
from batchscale.core.errors import InputError
from batchscale.core.prices import CURRENCY, PRICE_DATE, PRICE_SOURCE, device_price
from batchscale.store.compatibility import STUDY_SPEC_KEY

FASTER = 1.1  # a larger batch size counts as faster when time falls by more than this ratio
TIME_COLUMNS = [
    "batch_size", "devices", "steps_to_result", "steps_low", "steps_high", "censored",
    "seconds_per_step", "step_time_source", "time_seconds", "time_low", "time_high",
    "device_hours", "price_per_device_hour", "cost", "cost_low", "cost_high", "note"]


@dataclass(frozen=True)
class Choice:
    """One (batch size, devices) and its time or cost with the interval; ``close``: the
    other batch sizes within ``FASTER`` of it (a choice among them is within the noise
    of the step times and of the search)."""

    batch_size: int
    devices: int
    value: float
    low: float
    high: float
    close: tuple[int, ...] = ()


@dataclass(frozen=True)
class DeviceLimit:
    """``basis``: "measured", "projection" (ideal weak scaling) or "unknown";
    ``batch_size`` (NaN when unknown) with its interval (projection only); ``text``;
    ``beyond``: measured, and time still falls at the largest batch size measured (the
    limit may lie beyond it)."""

    basis: str
    batch_size: float
    low: float
    high: float
    text: str
    beyond: bool = False


@dataclass
class TimeCost:
    """``table``: TIME_COLUMNS, one row per (batch size, devices); rows without steps to
    result or step time keep NaN numbers and say why in ``note``. ``profile``: the step
    times used; the rest is the summary."""

    table: pd.DataFrame
    profile: StepTimeProfile
    fastest: Choice | None
    cheapest: Choice | None
    device_limit: DeviceLimit
    price_per_device_hour: float
    price_source: str
    price_origin: str  # "--price", "study spec" or "price table"
    price_date: str = PRICE_DATE
    currency: str = CURRENCY
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        """The summary as plain JSON-able values."""
        return {"fastest": self.fastest and asdict(self.fastest),
                "cheapest": self.cheapest and asdict(self.cheapest),
                "device_limit": asdict(self.device_limit), "device_kind": self.profile.device_kind,
                "price_per_device_hour": self.price_per_device_hour,
                "price_source": self.price_source, "price_origin": self.price_origin,
                "price_date": self.price_date, "price_table_source": PRICE_SOURCE,
                "currency": self.currency, "notes": [*self.notes, *self.profile.notes]}

    def to_dict(self) -> dict:
        """summary.json's ``time_and_cost``: the per-batch-size table, the step-time
        profile (records) and the summary."""
        def records(frame):
            return json.loads(frame.to_json(orient="records"))
        return {"per_batch_size": records(self.table), "step_times": records(self.profile.table),
                "summary": self.summary()}

    def metrics(self) -> dict[str, float]:
        """Kubeflow metrics: fastest_batch_size and time_to_result_seconds (its time),
        cheapest_batch_size and cost_to_result (its cost), where known."""
        out = {}
        if self.fastest is not None:
            out.update(fastest_batch_size=float(self.fastest.batch_size),
                       time_to_result_seconds=float(self.fastest.value))
        if self.cheapest is not None:
            out.update(cheapest_batch_size=float(self.cheapest.batch_size),
                       cost_to_result=float(self.cheapest.value))
        return out


def spec_price(study) -> float:
    """The study spec's price_per_device_hour (0: none): study_spec.json, else any copy in
    the batch sizes' study.json."""
    price = float(getattr(study.spec, "price_per_device_hour", 0.0) or 0.0)
    for _, doc in sorted(study.study_json.items()):
        if price > 0:
            break
        copy = doc.get(STUDY_SPEC_KEY) if isinstance(doc, dict) else None
        try:
            price = float((copy or {}).get("price_per_device_hour") or 0.0)
        except (TypeError, ValueError):
            price = 0.0
    return price if math.isfinite(price) and price > 0 else 0.0


def steps_intervals(crossings: pd.DataFrame, resamples: int, seed: int,
                    level: float = 0.95) -> dict[int, tuple[float, float]]:
    """batch size -> (low, high) percentile interval of S(B) over the regime fit's
    bootstrap (same groups, resamples and seed); only batch sizes that reached."""
    data = crossings.assign(previous_step=crossings.get("previous_step", math.nan))
    groups, sizes = [], []
    for batch_size, group in data.groupby("batch_size", sort=True):
        step = group["step"].to_numpy(dtype=float)
        if np.isfinite(step).any():
            groups.append((step, group["previous_step"].to_numpy(dtype=float)))
            sizes.append(int(batch_size))
    if not groups or resamples <= 0:
        return {}
    draws = np.exp(bootstrap_log_steps(groups, resamples, np.random.default_rng(seed)))
    tail = (1 - level) / 2
    out = {}
    for j, b in enumerate(sizes):
        column = draws[:, j][np.isfinite(draws[:, j])]
        if len(column):
            out[b] = (float(np.quantile(column, tail, method="lower")),
                      float(np.quantile(column, 1 - tail, method="higher")))
    return out


def time_and_cost(steps: pd.DataFrame, crossings: pd.DataFrame, profile: StepTimeProfile,
                  fit=None, spec_price_per_hour: float = 0.0, price: float = 0.0,
                  resamples: int = 1000, seed: int = 0) -> TimeCost:
    """Time and cost to result. ``steps``: one goal's validation steps table (batch_size,
    steps_to_result, censored); ``crossings``: its ``steps.crossings``; ``fit``: its
    ``RegimeFit`` (for the projected device limit); ``price`` > 0 overrides
    ``spec_price_per_hour`` > 0, which overrides the price table."""
    if price < 0 or not math.isfinite(price):
        raise InputError(f"price: {price} is not allowed; allowed: a price in {CURRENCY} per "
                         "device-hour > 0, or 0 for the spec's or the price table's")
    override, origin = ((price, "--price") if price > 0 else (spec_price_per_hour, "study spec")
                        if spec_price_per_hour > 0 else (0.0, "price table"))
    level = getattr(fit, "level", 0.95) or 0.95
    intervals = steps_intervals(crossings, resamples, seed, level)
    prof = profile.table
    rows, prices = [], {}
    for r in steps.sort_values("batch_size").itertuples():
        b = int(r.batch_size)
        s = float(r.steps_to_result) if pd.notna(r.steps_to_result) else math.nan
        censored = str(getattr(r, "censored", "") or "")
        lo, hi = intervals.get(b, (math.nan, math.nan))
        lo, hi = (min(lo, s), max(hi, s)) if math.isfinite(s) and math.isfinite(lo) else (lo, hi)
        mine = prof[prof["batch_size"] == b]
        for p in (mine.itertuples() if len(mine) else [None]):
            row = {"batch_size": b, "devices": int(p.devices) if p else 1, "steps_to_result": s,
                   "steps_low": lo, "steps_high": hi, "censored": censored,
                   "seconds_per_step": float(p.seconds_per_step) if p else math.nan,
                   "step_time_source": p.source if p else "none", "note": ""}
            row["note"] = _why_not(s, censored, p)
            if not row["note"]:
                row["note"] = "upper bound (early stopping)" if censored == "upper bound" else ""
            unit, source = _price(p, override, origin, prices)
            row["price_per_device_hour"] = unit
            for suffix, steps_value in (("", s), ("_low", lo), ("_high", hi)):
                seconds = steps_value * row["seconds_per_step"]
                row[f"time{suffix or '_seconds'}"] = seconds
                row[f"cost{suffix}"] = seconds * row["devices"] / 3600 * unit
            row["device_hours"] = row["time_seconds"] * row["devices"] / 3600
            rows.append(row)
    table = pd.DataFrame(rows, columns=TIME_COLUMNS)
    value, source = _summary_price(prices, override, origin)
    return TimeCost(table=table, profile=profile, fastest=_best(table, "time"),
                    cheapest=_best(table, "cost"), device_limit=device_limit(table, fit),
                    price_per_device_hour=value, price_source=source, price_origin=origin)


def _why_not(steps: float, censored: str, p) -> str:
    if not math.isfinite(steps):
        return ("goal not reached: " + censored) if censored else "goal not reached"
    if p is None or p.source == "none":
        return "no step time: no solo trial timing and no probe"
    if not math.isfinite(p.seconds_per_step):
        return "no step time: only vmapped-pack timings (shared, not a solo step time)"
    return ""


def _price(p, override: float, origin: str, prices: dict) -> tuple[float, str]:
    """(price per device-hour, description) of one profile row (None: no step time, so
    nothing to price unless a price was set); NaN when unknown. Counts it in ``prices``."""
    if p is None and not override:
        return math.nan, "no step time"
    try:
        unit, text = device_price(p.preset if p is not None else "local",
                                  p.cpu_cores if p is not None else 1.0, override)
    except ValueError as err:
        unit, text = math.nan, str(err)
    if override > 0:
        text = f"{CURRENCY} {override:g}/device-hour ({origin})"
    prices[(unit, text)] = prices.get((unit, text), 0) + 1
    return unit, text


def _summary_price(prices: dict, override: float, origin: str) -> tuple[float, str]:
    if not prices:
        return (override, f"{CURRENCY} {override:g}/device-hour ({origin})") if override else (
            math.nan, "nothing to price: no batch size has a step time")
    (unit, text), _ = max(prices.items(), key=lambda kv: kv[1])
    if not override:
        text += ", the price table's for the preset the trials ran on"
    if len(prices) > 1:
        text += "; it differs between batch sizes: see price_per_device_hour in the table"
    return unit, text


def _best(table: pd.DataFrame, what: str) -> Choice | None:
    column = "time_seconds" if what == "time" else what
    ok = table[np.isfinite(pd.to_numeric(table[column], errors="coerce").astype(float))]
    if not len(ok):
        return None
    r = ok.sort_values([column, "batch_size", "devices"]).iloc[0]
    low, high = (("time_low", "time_high") if what == "time" else ("cost_low", "cost_high"))
    values = pd.to_numeric(ok[column], errors="coerce").astype(float)
    close = sorted({int(b) for b, v in zip(ok["batch_size"], values)
                    if v <= FASTER * float(r[column]) and int(b) != int(r["batch_size"])})
    return Choice(int(r["batch_size"]), int(r["devices"]), float(r[column]), float(r[low]),
                  float(r[high]), tuple(close))


def device_limit(table: pd.DataFrame, fit=None) -> DeviceLimit:
    """See the module docstring: measured with several device counts, else the projection."""
    timed = table[np.isfinite(table["time_seconds"].astype(float))]
    nan = math.nan
    if timed["devices"].nunique() > 1:
        best = timed.groupby("batch_size")["time_seconds"].min().sort_index()
        sizes, times = list(best.index), best.to_numpy()
        for i, b in enumerate(sizes):
            if all(times[i] <= FASTER * t for t in times[i + 1:]):
                mine = timed[timed["batch_size"] == b].sort_values("time_seconds")
                devices = int(mine["devices"].iloc[0])
                text = (f"batch size {b} ({devices} devices): no larger batch size measured is more "
                        f"than {FASTER - 1:.0%} faster at any device count")
                if b == sizes[-1]:
                    text = (f"time still falls up to the largest batch size measured, {b} "
                            f"({devices} devices): the limit may lie beyond it")
                return DeviceLimit("measured", float(b), nan, nan, text, beyond=b == sizes[-1])
    if fit is None or not getattr(fit, "fitted", False):
        reason = getattr(fit, "reason", "") or "no regime fit"
        times = "one device count only" if len(timed) else "no batch size"
        return DeviceLimit("unknown", nan, nan, nan,
                           f"cannot be said: step times on {times}, and no regime fit to "
                           f"project from ({reason})")
    est = fit.max_useful_batch_size
    return DeviceLimit("projection", est.value, est.low, est.high,
                       f"{regime_text(est, fit.batch_sizes, level=fit.level)}, a projection "
                       "assuming ideal weak scaling (step time held constant as devices grow "
                       "with the batch, communication ignored), so time is proportional to "
                       "steps and the limit is the regime fit's maximum useful batch size "
                       "(S = 1.1 S_min)")
