"""Time and cost to result against batch size (``time_to_result``), as SVG bytes.

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

from batchscale.analysis.figures.plot_base import (
    drawing,
    figure,
    legend,
    log2_axes,
    log_axis,
    no_data,
    numbers,
    svg,
)


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


@drawing
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
    if drawn:  # decades in plain numbers; within a single decade 2 and 5 labelled too
        log_axis(ax, "y", 10)
    legend(ax)
    return svg(plt, fig)
