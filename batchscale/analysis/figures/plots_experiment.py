"""An experiment's own figure: B*(D), the critical batch size against the number of training
examples (a data_size experiment; ``statistics.b_star_exponent``). The overlays of the
studies' curves are ``compare``'s (``plots.steps_to_result_plot``), not drawn again here.
"""

from __future__ import annotations

import math

import numpy as np

from batchscale.analysis.figures.plot_base import drawing as _drawing
from batchscale.analysis.figures.plot_base import figure as _figure
from batchscale.analysis.figures.plot_base import legend as _legend
from batchscale.analysis.figures.plot_base import log_axis as _log_axis
from batchscale.analysis.figures.plot_base import no_data as _no_data
from batchscale.analysis.figures.plot_base import svg as _svg
from batchscale.analysis.statistics.b_star_exponent import alpha_relation


@_drawing
def b_star_by_data_size_plot(points, alpha: float, c: float, title: str, alpha_text: str) -> bytes:
    """``points``: (D, B* value, low, high) per study, ends inf/0 or NaN where open;
    ``alpha``, ``c``: the fitted line B* = c·D^α (NaN: none drawn). Log–log axes; an open
    interval end is drawn as an arrow to the axis's edge."""
    from matplotlib.ticker import NullFormatter

    plt, (fig, ax) = _figure()
    drawn = [(d, v, lo, hi) for d, v, lo, hi in points if d > 0 and math.isfinite(v) and v > 0]
    for d, v, lo, hi in drawn:
        low = lo if math.isfinite(lo) and lo > 0 else None
        high = hi if math.isfinite(hi) else None
        ax.plot([d], [v], "o", color="C0", markersize=5)
        if low is not None and high is not None:
            ax.plot([d, d], [low, high], "-", color="C0", linewidth=1.5)
        elif low is not None:  # bounded from below only
            ax.annotate("", xy=(d, v * 4), xytext=(d, low), arrowprops={"arrowstyle": "->", "color": "C0"})
        elif high is not None:
            ax.annotate("", xy=(d, v / 4), xytext=(d, high), arrowprops={"arrowstyle": "->", "color": "C0"})
    if drawn and math.isfinite(alpha) and math.isfinite(c):
        xs = np.geomspace(min(p[0] for p in drawn), max(p[0] for p in drawn), 50)
        ax.plot(xs, c * xs ** alpha, "--", color="C1", label=f"B* = c·D^α, α {alpha_relation(alpha_text)}")
    if not drawn:
        _no_data(ax, "no data size has a fitted B*")
    _log_axis(ax, "x", 2)
    _log_axis(ax, "y", 2)
    if drawn:  # the data sizes themselves on the axis (1000, not 1024)
        ax.set_xticks([p[0] for p in drawn], [f"{p[0]:g}" for p in drawn])
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("training examples D")
    ax.set_ylabel("fitted critical batch size B* (95% interval)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    _legend(ax)
    return _svg(plt, fig)
