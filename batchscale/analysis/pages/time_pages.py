"""The report's "Time and cost to result" section.

``time_section`` shows ``Analysis.time_cost``
(``time_to_result.TimeCost``): one sentence naming the fastest and the cheapest batch size
on the hardware and the device limit, the per-batch-size table, both figures, the price
with its date and source, and the step-time profile with where each step time comes from.
"""

from __future__ import annotations

import pandas as pd

from batchscale.analysis.figures.report_figures import TIME_FIGURES
from batchscale.analysis.pages import html as h
from batchscale.analysis.pages.sections import (
    HTML,
    MARKDOWN,
    Figures,
    Notes,
    Paragraph,
    Section,
    Subheading,
    Table,
)
from batchscale.analysis.statistics.amounts import duration, money
from batchscale.analysis.statistics.intervals import format_interval, number
from batchscale.analysis.statistics.study_analysis import Analysis
from batchscale.analysis.statistics.time_to_result import TimeCost
from batchscale.core.prices import PRICE_SOURCE

TITLE = "Time and cost to result"
SHOWN = ["batch_size", "devices", "steps to result", "seconds_per_step", "step_time_source",
         "time to result", "device_hours", "price_per_device_hour", "cost to result", "note"]
INTERVALS = ("Intervals (value [low, high]): the regime fit's bootstrap of steps to result (each "
             "resampled crossing drawn within its evaluation interval, the best-of-n overshoot "
             "added back), widened to hold the measured steps to result, times the step time; "
             "the step time's own spread is not in them. Step times: the median of solo trial "
             "timings (trials that trained alone, at least 20 steps; 3 or more: source trials), "
             "else the plan's probe, else the few trials; timings of vmapped packs are shared "
             "between their trials and never used.")
PROFILE_SHOWN = ["batch_size", "devices", "seconds_per_step", "source", "timings",
                 "trials_seconds_per_step", "packed_timings", "shared_seconds_per_trial_step",
                 "precision", "device_kind", "preset", "cpu_cores"]


def headline(tc: TimeCost) -> str:
    """One sentence: the fastest and the cheapest batch size on the hardware, and the
    device limit."""
    where = f"On {tc.profile.device_kind}" if tc.profile.device_kind else "On the study's hardware"
    several = tc.table["devices"].nunique() > 1
    parts = []
    if tc.fastest is None:
        parts.append("no batch size has both steps to result and a step time, so no time to "
                     "result can be given")
    else:
        f = tc.fastest
        at = f" on {f.devices} devices" if several else ""
        parts.append(f"the fastest batch size is {f.batch_size}{at}: "
                     f"{format_interval(f.value, f.low, f.high, duration)}{_close(f)}")
    if tc.cheapest is not None:
        c = tc.cheapest
        at = f" on {c.devices} devices" if several else ""
        parts.append(f"the cheapest is {c.batch_size}{at}: {tc.currency} "
                     f"{format_interval(c.value, c.low, c.high, _amount)}{_close(c)}")
    elif tc.fastest is not None:
        parts.append(f"no cost: {tc.price_source}")
    return f"{where}, {'; '.join(parts)}. Device limit: {tc.device_limit.text}."


def _amount(value: float) -> str:
    """An amount of money without its currency (``0.00000251``)."""
    return money(value, "").strip()


def _close(choice) -> str:
    if not choice.close:
        return ""
    return f" (within 10% of it: {', '.join(map(str, choice.close))})"


def price_line(tc: TimeCost) -> str:
    return (f"Price: {tc.currency} {h.fmt(tc.price_per_device_hour)} per device-hour "
            f"({tc.price_source}); list prices of {tc.price_date} ({PRICE_SOURCE}), a CPU "
            "trial's device being the cores it ran on; override with the spec's "
            "price_per_device_hour or `batchscale report --price`.")


def _table(tc: TimeCost) -> pd.DataFrame:
    """The per-batch-size table as shown: steps, time and cost each one cell in the
    interval notation (time_to_result.csv keeps the numbers apart)."""
    t = tc.table

    def cells(column, low, high, fmt):
        return [format_interval(v, lo, hi, fmt) for v, lo, hi in zip(t[column], t[low], t[high])]

    money_cells = [f"{tc.currency} {c}" if c != "—" else c
                   for c in cells("cost", "cost_low", "cost_high", _amount)]
    shown = t.assign(**{"steps to result": cells("steps_to_result", "steps_low", "steps_high",
                                                 number),
                        "time to result": cells("time_seconds", "time_low", "time_high", duration),
                        "cost to result": money_cells, "note": t["note"].fillna("")})
    return shown[SHOWN]


def time_section(analysis: Analysis) -> Section | None:
    """"Time and cost to result" (None: not computed). summary.md names the figures at the
    end, where report.html shows them after the intervals."""
    tc = analysis.time_cost
    if tc is None:
        return None
    figures = [(name, *analysis.figures[name]) for name in TIME_FIGURES if name in analysis.figures]
    return Section("time-and-cost", TITLE, [
        Paragraph(headline(tc)), Table(_table(tc)), Paragraph(INTERVALS, note=True),
        Figures(figures, media=(HTML,)), Paragraph(price_line(tc), note=True),
        Subheading("Step-time profile"), Table(tc.profile.table, PROFILE_SHOWN),
        Notes(tc.summary()["notes"]), Figures(figures, media=(MARKDOWN,))])
