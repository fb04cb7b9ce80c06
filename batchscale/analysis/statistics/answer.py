"""The report's answer, first: what a researcher wants from a study in ten seconds.

For the study's first goal on the validation metric, in plain words and the one interval
notation (``intervals``): the batch size with the fewest steps to the goal; the fastest
and the cheapest batch size on the hardware that ran the study (``Analysis.time_cost``);
where perfect scaling ends and where returns vanish (the maximum useful batch size) with
their intervals, or that the data bound them on one side only; what the protocol trained
against what protocol ``full`` would have (``Analysis.cost``); and a caution when files
were damaged or trials are unfinished. The same items open report.html and summary.md,
are summary.json's ``answer`` and close the console of ``report`` and ``run --local``
(which prints them from summary.json).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from batchscale.analysis.reading.censoring import early_stopping, from_label
from batchscale.analysis.statistics.amounts import duration, money
from batchscale.analysis.statistics.intervals import format_interval, number, regime_text
from batchscale.analysis.statistics.regimes import RegimeFit
from batchscale.analysis.statistics.time_to_result import FASTER, TimeCost
from batchscale.analysis.statistics.training_cost import count_text
from batchscale.core.protocols import PAPER

SPLIT = "val"


@dataclass(frozen=True)
class Answer:
    """``goal``: the goal answered (validation metric); ``level``: the intervals' level;
    ``items``: (key, label, text) in reading order."""

    goal: str
    level: float
    items: tuple[tuple[str, str, str], ...]

    @property
    def heading(self) -> str:
        return f"The answer for {self.goal} on the validation metric ({self.level:.0%} intervals)"

    def to_dict(self) -> dict:
        return {"goal": self.goal, "split": SPLIT, "level": self.level, "heading": self.heading,
                "items": [{"key": k, "label": label, "text": text} for k, label, text in self.items]}


def answer(goal: str, steps: pd.DataFrame, fit: RegimeFit | None, time_cost: TimeCost | None,
           cost: dict, damaged: int, unfinished: int, expected: int | None) -> Answer:
    """The answer (module docstring) from the typed parts of a ``study_analysis.Analysis``
    it needs (``Analysis.answer`` passes them; this module sits below that record):
    ``goal`` the first goal's label, ``steps`` the steps table, ``fit`` its regime fit,
    the time and training cost, and the counts of damaged files, unfinished and expected
    trials."""
    level = fit.level if fit is not None else 0.95
    items = [_fewest_steps(steps, goal), *_time_and_cost(time_cost), *_regimes(fit, level),
             *_savings(cost), *_caution(damaged, unfinished, expected)]
    return Answer(goal, level, tuple(i for i in items if i))


def _fewest_steps(steps, goal: str):
    table = steps[(steps["goal"] == goal) & (steps["split"] == SPLIT)]
    reached = table.dropna(subset=["steps_to_result"])
    label = "Fewest steps to the goal"
    if reached.empty:
        unknown = (list(table.loc[table["censored"] == "stopped early", "batch_size"])
                   if "censored" in table else [])
        why = (" (unknown at batch sizes where early stopping ended every trial first: "
               f"{', '.join(str(int(b)) for b in unknown)})" if unknown else "")
        return "fewest_steps", label, f"no batch size reached the goal{why}"
    best = reached.sort_values(["steps_to_result", "batch_size"]).iloc[0]
    steps_at = float(best["steps_to_result"])
    text = (f"batch size {int(best['batch_size'])}, {number(steps_at)} steps "
            f"({count_text(int(best['examples_to_result']))} examples)")
    if str(best.get("censored", "") or "") == "upper bound":
        text += ", an upper bound (early stopping)"
    close = sorted(int(b) for b, s in zip(reached["batch_size"], reached["steps_to_result"])
                   if s <= FASTER * steps_at and int(b) != int(best["batch_size"]))
    if close:
        text += f"; within {FASTER - 1:.0%} of it: {', '.join(map(str, close))}"
    return "fewest_steps", label, text


def _hardware(tc: TimeCost) -> str:
    kind = tc.profile.device_kind or "the study's hardware"
    cores = tc.profile.table.get("cpu_cores")
    if kind == "cpu" and cores is not None and cores.notna().any():
        count = float(cores.dropna().median())
        return f"cpu ({number(count)} core{'s' if count != 1 else ''})"
    return kind


def _time_and_cost(tc: TimeCost | None) -> list:
    """One item: the fastest and the cheapest batch size on the hardware, each with its
    interval and the batch sizes within 10% of it."""
    if tc is None:
        return []
    label = f"Time and cost to result on {_hardware(tc)}"
    if tc.fastest is None:
        return [("time_and_cost", label,
                 "not known: no batch size has both steps to result and a step time")]
    several = tc.table["devices"].nunique() > 1

    def choice(c, fmt, unit=""):
        at = f" on {c.devices} devices" if several else ""
        near = f" (within {FASTER - 1:.0%}: {', '.join(map(str, c.close))})" if c.close else ""
        return f"{c.batch_size}{at}, {unit}{format_interval(c.value, c.low, c.high, fmt)}{near}"

    text = f"fastest batch size {choice(tc.fastest, duration)}"
    if tc.cheapest is not None:
        price = money(tc.price_per_device_hour, "").strip()
        text += (f"; cheapest {choice(tc.cheapest, lambda v: money(v, '').strip(), tc.currency + ' ')}"
                 f" at {tc.currency} {price} per device-hour")
    return [("time_and_cost", label, text)]


def _regimes(fit, level: float) -> list:
    if fit is None:
        return []
    if not fit.fitted:
        return [("regimes", "Scaling regimes", f"no fit: {fit.reason}")]
    def where(est):  # "at batch size 114 [61.9, 216]", or words and the one-sided bound
        text = regime_text(est, fit.batch_sizes, level=level)
        return f"at batch size {text}" if text[:1].isdigit() else text

    return [("perfect_scaling_end", "Perfect scaling (the steps halve as the batch doubles) ends",
             where(fit.perfect_scaling_end)),
            ("max_useful_batch_size", "Returns vanish (maximum useful batch size, S = 1.1 S_min)",
             where(fit.max_useful_batch_size))]


def _savings(cost: dict) -> list:
    if not cost or not cost.get("trials"):
        return []
    protocol, trained, full = cost.get("protocol", PAPER.name), cost["trained_steps"], cost["full_steps"]
    fraction = cost.get("fraction_of_full_steps")
    label = f"Protocol {protocol} trained"
    if not early_stopping(from_label(protocol)):  # the cost names its protocols
        return [("savings", label, f"{count_text(trained)} steps over {cost['trials']} trials, "
                 "every trial to its budget (no early stopping)")]
    if fraction is None or math.isclose(fraction, 1.0):
        return [("savings", label, f"{count_text(trained)} steps over {cost['trials']} trials, "
                 "as many as protocol full would have: early stopping saved nothing")]
    examples = cost.get("fraction_of_full_examples")
    text = (f"{count_text(trained)} steps over {cost['trials']} trials, {fraction:.0%} of the "
            f"{count_text(full)} that protocol full (every non-diverged trial to its budget) "
            "would have")
    if examples is not None:
        text += f" ({examples:.0%} of the examples)"
    return [("savings", label, text)]


def _caution(damaged: int, unfinished: int, expected: int | None) -> list:
    parts = []
    if damaged:
        parts.append(f"{damaged} damaged file(s) left out")
    if unfinished and expected:
        parts.append(f"{unfinished} of {expected} trials unfinished")
    if not parts:
        return []
    return [("caution", "Caution", "; ".join(parts) + ": the numbers count only what could be "
             "read and finished (see below)")]
