"""Time and cost to result against batch size (``time_to_result``), as PNG bytes.

One line per device count (one line when the study ran on one), with the bootstrap
interval of steps to result carried into time and cost as error bars; the fastest (or
cheapest) point is starred, and the device limit drawn as a dotted vertical line (a
measured one, or a projection from the regime fit, said in the legend; none where time
still falls at the largest batch size measured). Batch sizes
without a time (goal not reached, no step time) are left out of the lines; the report's
table names them.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from batchscale.analysis.plot_base import figure, legend, log2_axes, no_data, numbers, png


def time_to_result_plot(table: pd.DataFrame, fastest, limit, title: str) -> bytes:
    """Time to result (hours or seconds, log y) against batch size (log2 x)."""
    hours = numbers(table, "time_seconds")
    scale, unit = (3600.0, "hours") if np.nanmax(np.append(hours, 0)) >= 7200 else (1.0, "seconds")
    return _plot(table, ("time_seconds", "time_low", "time_high"), scale, fastest, limit,
                 f"time to result ({unit})", title, "fastest")


def cost_to_result_plot(table: pd.DataFrame, cheapest, limit, title: str, currency: str) -> bytes:
    """Cost to result (``currency``, log y) against batch size (log2 x)."""
    return _plot(table, ("cost", "cost_low", "cost_high"), 1.0, cheapest, limit,
                 f"cost to result ({currency})", title, "cheapest")


def _plot(table: pd.DataFrame, columns: tuple[str, str, str], scale: float, best, limit,
          ylabel: str, title: str, best_label: str) -> bytes:
    plt, (fig, ax) = figure()
    table = table if table is not None else pd.DataFrame(columns=["batch_size", "devices"])
    drawn, span = 0, numbers(table, "batch_size")
    several = table["devices"].nunique() > 1 if len(table) else False
    for devices, group in table.groupby("devices", sort=True):
        group = group.sort_values("batch_size")
        b = numbers(group, "batch_size")
        v, lo, hi = (numbers(group, c) / scale for c in columns)
        ok = np.isfinite(b) & (b > 0) & np.isfinite(v) & (v > 0)
        if not ok.any():
            continue
        label = f"{devices} device{'s' if devices != 1 else ''}" if several else "measured"
        line, = ax.plot(b[ok], v[ok], "o-", markersize=4, label=label)
        bars = ok & np.isfinite(lo) & np.isfinite(hi)
        if bars.any():
            err = np.vstack([np.clip(v[bars] - lo[bars], 0, None), np.clip(hi[bars] - v[bars], 0, None)])
            ax.errorbar(b[bars], v[bars], yerr=err, fmt="none", ecolor=line.get_color(),
                        alpha=0.6, capsize=3, label="_nolegend_")
        drawn += 1
    if best is not None and math.isfinite(best.value) and best.value > 0:
        ax.plot([best.batch_size], [best.value / scale], "*", markersize=15, color="tab:red",
                zorder=4, label=f"{best_label}: batch size {best.batch_size}"
                + (f", {best.devices} devices" if several else ""))
    if (limit is not None and not limit.beyond and math.isfinite(limit.batch_size) and len(span)
            and np.nanmin(span) / 2 <= limit.batch_size <= 2 * np.nanmax(span)):
        ax.axvline(limit.batch_size, color="0.35", linestyle=":",
                   label=f"device limit ({limit.basis})")
    if not drawn:
        no_data(ax, "no batch size with both steps to result and a step time")
    log2_axes(ax, "batch size", ylabel, title, logy=False)
    if drawn:
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax.set_yscale("log")
        # decades labelled in plain numbers; unlabelled minor ticks between them (labels
        # on 2..9 of each decade overlap); within a single decade, 2 and 5 get labels too
        low, high = ax.get_ylim()
        subs = (1.0,) if high / low > 10 else (1.0, 2.0, 5.0)
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _plain(v)))
        ax.yaxis.set_minor_formatter(NullFormatter())
    legend(ax)
    return png(plt, fig)


def _plain(value: float) -> str:
    """A tick label without exponent form: 0.001, 0.05, 20, 3000."""
    return np.format_float_positional(value, precision=3, unique=True, fractional=False, trim="-")
