"""Where each definition of the critical batch size falls on the fitted curve, as SVG bytes.

One panel, log2–log2: the measured steps to result (points), the fitted S(B) = S_min
(1 + B*/B) with its bootstrap band, and one vertical line per definition at its value
with its interval as a shaded band of the same colour (an open end runs to the axis'
edge; a one-sided estimate is its band alone, its bound in the legend). Reading it, the
5x and more between B_20% and B* is plain, and so is whether a probe's prediction lies on
the knee of the curve the sweep measured.
"""

from __future__ import annotations

import math

import numpy as np

from batchscale.analysis.figures.plot_base import drawing, figure, footnote, legend, log2_axes, no_data, svg
from batchscale.analysis.statistics.critical_batch_sizes import (
    CriticalBatchSizes,
    estimate_bound,
    estimate_text,
)
from batchscale.analysis.statistics.intervals import INTERVAL, VALUE
from batchscale.analysis.statistics.regimes import RegimeFit

CBS_FIGURE = "critical_batch_sizes.svg"
COLOURS = {"b_star_fit": "tab:red", "b_overhead_20": "tab:orange", "b_simple": "tab:blue",
           "b_branched": "tab:green"}


def _span(fit: RegimeFit, cbs: CriticalBatchSizes) -> tuple[float, float]:
    """The x range: the batch sizes measured and every finite value and end shown."""
    xs = [float(b) for b in fit.batch_sizes]
    for est in cbs.estimates:
        xs += [x for x in (est.value, est.low, est.high) if math.isfinite(x) and x > 0]
    return min(xs) / 1.5, max(xs) * 1.5


@drawing
def cbs_plot(fit: RegimeFit | None, cbs: CriticalBatchSizes, title: str) -> bytes:
    """The figure (module docstring); without a fitted curve, the message why."""
    plt, (fig, ax) = figure()
    if fit is None or not fit.fitted:
        no_data(ax, "no regime fit: no curve to place the definitions on")
        ax.set_axis_off()
        return svg(plt, fig)
    low_x, high_x = _span(fit, cbs)
    grid = np.geomspace(low_x, high_x, 200)
    ax.plot(fit.batch_sizes, fit.steps, "o", color="0.2", markersize=4, label="steps to result")
    curve = fit.curve(grid)
    if np.isfinite(curve).any():
        ax.plot(grid, curve, ":", color="0.3", label="fitted S(B)")
    band_low, band_high = fit.band(grid)
    if np.isfinite(band_low).any():
        ax.fill_between(grid, band_low, band_high, color="0.5", alpha=0.15, linewidth=0)
    for est in cbs.estimates:
        colour = COLOURS.get(est.name, "0.4")
        left = est.low if math.isfinite(est.low) and est.low > 0 else low_x
        right = est.high if math.isfinite(est.high) else high_x
        if not (math.isnan(est.low) and math.isnan(est.high)):
            ax.axvspan(left, right, color=colour, alpha=0.12, linewidth=0)
        if estimate_bound(est).kind in (INTERVAL, VALUE):  # a one-sided bound: its band only
            ax.axvline(est.value, color=colour, linewidth=1.5, label=est.definition.symbol)
        else:
            ax.plot([], [], color=colour, linewidth=6, alpha=0.3,
                    label=f"{est.definition.symbol} {estimate_text(est)}")
    ax.set_xlim(low_x, high_x)
    log2_axes(ax, "batch size", "steps to result", title)
    legend(ax, loc="best")
    notes = [f"{e.definition.symbol}: {e.definition.label}, band: its {e.level:.0%} interval"
             for e in cbs.estimates]
    return svg(plt, fig, footnote(fig, ["; ".join(notes)]))


def cbs_figures(fit: RegimeFit | None, cbs: CriticalBatchSizes | None,
                title: str) -> dict[str, tuple[bytes, str]]:
    """{CBS_FIGURE: (SVG, caption)}, or {} when there is nothing to place (no fit)."""
    if cbs is None or fit is None or not fit.fitted or not cbs.estimates:
        return {}
    caption = (f"Each definition of the critical batch size on the fitted curve ({cbs.goal}): "
               "a vertical line at its value, its interval shaded in the same colour.")
    return {CBS_FIGURE: (cbs_plot(fit, cbs, title), caption)}
