"""The metaparameter laws as a figure (``statistics.metaparameter_law_fits``), SVG bytes.

One panel per fitted parameter (learning rate, the effective learning rate η/(1−γ) of a
momentum study, 1 − momentum or 1 − β), batch size on a log2 axis and the value on a log
axis: the best trial per batch size (a bar: the range of the trials nearly as good), a
line for every form fitted, the chosen law's line thick with its prediction band, and
the proposed search boxes of the next batch sizes up and down as shaded bars at theirs.
"""

from __future__ import annotations

import math

import numpy as np

from batchscale.analysis.figures.plot_base import drawing, log_axis, no_data, numbers, panels, svg
from batchscale.search.metaparameter_laws import EFFECTIVE, MOMENTUM_LIKE

LAWS_FIGURE = "metaparameter_laws.svg"
FORM_STYLE = {"constant": ":", "linear": "--", "sqrt": "-.", "power": (0, (5, 1, 1, 1)),
              "saturating": (0, (1, 1))}
PANEL_IN = (3.6, 3.4)
COLUMNS = 3  # panels a row: three fit the report's column


def _order(names) -> list[str]:
    first = [n for n in ("learning_rate", EFFECTIVE) if n in names]
    return first + [n for n in names if n not in first]


@drawing
def metaparameter_laws_plot(laws, title: str) -> bytes:
    """``laws``: a ``MetaparameterLaws``; a panel per chosen law (module doc)."""
    names = _order(list(laws.chosen)) if laws is not None else []
    columns = min(max(len(names), 1), COLUMNS)
    rows = max(math.ceil(len(names) / COLUMNS), 1)
    plt, fig, axes = panels(rows, columns, PANEL_IN[0] * columns + 0.4, PANEL_IN[1] * rows + 0.3)
    for ax in axes[len(names):] if names else ():
        ax.set_axis_off()
    if not names:
        no_data(axes[0], f"no laws: {laws.reason}" if laws is not None else "no laws")
        fig.suptitle(title)
        return svg(plt, fig)
    sizes = numbers(laws.points, "batch_size")
    reach = [b for b, _, _ in laws.boxes] + list(sizes)
    grid = np.geomspace(min(reach) / 1.2, max(reach) * 1.2, 120)
    for ax, name in zip(axes, names):
        _panel(ax, laws, name, sizes, grid)
    fig.suptitle(title)
    return svg(plt, fig, _legend(fig, axes[: len(names)], columns + 2))


def _legend(fig, axes, ncol: int):
    """One legend for every panel, under them (the figure grows to hold it); returns the
    tight_layout rect that leaves room for it."""
    handles = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    if not handles:
        return None
    width, height = fig.get_size_inches()
    extra = 0.21 * math.ceil(len(handles) / ncol) + 0.15
    fig.set_size_inches(width, height + extra)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=ncol)
    return (0, extra / (height + extra), 1, 1)


def _panel(ax, laws, name: str, sizes: np.ndarray, grid: np.ndarray) -> None:
    chosen = laws.chosen[name]
    flip = name in MOMENTUM_LIKE  # shown as 1 − value, the unit it is fitted in

    def shown(values):
        values = np.asarray(values, dtype=float)
        return 1.0 - values if flip else values

    best = shown(_column(laws, name))
    low, high = shown(_column(laws, f"{name}_low")), shown(_column(laws, f"{name}_high"))
    ok = np.isfinite(best) & (best > 0)
    if ok.any():
        bottom, top = np.fmin(low, high)[ok], np.fmax(low, high)[ok]
        ax.errorbar(sizes[ok], best[ok], yerr=[best[ok] - bottom, top - best[ok]], fmt="o",
                    color="C0", capsize=3, zorder=4, label="best trial (bar: near-best)")
    for law in laws.fits.get(name, []):
        line = shown([law.predict(b) for b in grid])
        if law is chosen:
            band = np.array([law.interval(b, laws.level) for b in grid]).T
            ax.fill_between(grid, *sorted(shown(band), key=np.sum), color="C1", alpha=0.2,
                            label=f"{laws.level:.0%} prediction band")
            ax.plot(grid, line, "-", color="C1", linewidth=2.2, label="chosen law (panel title)")
        else:
            ax.plot(grid, line, linestyle=FORM_STYLE[law.form], color="0.45", linewidth=1.0,
                    label=law.form)
    for i, (b, box, _why) in enumerate(laws.boxes):
        p = next((p for p in box if p.name == name and p.values is None), None)
        if p is not None:
            ends = sorted(shown([p.min, p.max]))
            ax.fill_between([b / 1.12, b * 1.12], ends[0], ends[1], color="C2", alpha=0.35,
                            zorder=3, label="proposed box" if i == 0 else None)
    log_axis(ax, "x", 2)
    log_axis(ax, "y", 10)
    ax.set_xlabel("batch size")
    ax.set_ylabel(chosen.quantity.replace("_", " "))
    ax.set_title(chosen.equation.replace("_", " "))
    ax.grid(True, which="both", alpha=0.3)


def _column(laws, column: str) -> np.ndarray:
    return numbers(laws.points, column)
