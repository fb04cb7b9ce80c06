"""Figures about metaparameters: how the best ones scale, and where the search found them.

``optimal_metaparameters_plot`` is the paper's Figures 21, 22 and 8 side by side (best
learning rate, momentum and effective learning rate against batch size, with the linear and
square-root heuristics). ``lr_momentum_scatter`` (Figures 9 and 13: every trial in (η, 1−γ)
space per batch size) lives in ``plots_lr_momentum`` and is importable from here. Each
names the study's optimizer's own parameters (``core.names.momentum_parameter``: 1 − β₁
for the Adam family where a momentum study shows 1 − γ) and effective learning rate
(``EFFECTIVE_LEARNING_RATE``: η/(1−γ) for momentum, η for the Adam family and SGD). Both
return SVG bytes (``plot_base``: sizes, fonts, plain-number log ticks) and never fail on
empty or degenerate tables.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from batchscale.analysis.figures.plot_base import drawing, log_axis, panels, plain
from batchscale.analysis.figures.plot_base import no_data as _no_data
from batchscale.analysis.figures.plot_base import svg as _svg
from batchscale.analysis.figures.plots_lr_momentum import _numbers, _positive
from batchscale.analysis.figures.plots_lr_momentum import lr_momentum_scatter as lr_momentum_scatter
from batchscale.analysis.statistics.metaparameters import HEURISTIC_PARAMETERS
from batchscale.core.names import EFFECTIVE_LEARNING_RATE, momentum_parameter


@drawing
def optimal_metaparameters_plot(optimal: pd.DataFrame, title: str, optimizer: str | None = None) -> bytes:
    """Best learning rate, 1 − momentum and effective learning rate against batch size
    (for ``optimizer``: its momentum parameter and effective learning rate, module doc).

    Three panels on log2 x axes and log y axes, from ``optimal_metaparameters``. Momentum
    is shown as 1 − γ on a log axis, the unit its search is sampled in (REVERSE_LOG_SCALE;
    the paper's Figures 9 and 13 use the same axis), so 0.9, 0.99 and 0.999 are evenly
    spaced; the right-hand axis reads the same ticks as γ. Learning rate (Figure 21) and
    effective learning rate (Figure 8) carry the heuristics anchored at the smallest batch
    size: dashed = linear scaling, dotted = square-root scaling.
    """
    plt, fig, axes = panels(1, 3, 11.0, 4.0)
    data = optimal if optimal is not None else pd.DataFrame()
    data = data.sort_values("batch_size") if "batch_size" in data else pd.DataFrame()
    batch = _numbers(data, "batch_size")
    column, symbol = momentum_parameter(optimizer) or ("momentum", "γ")
    word = "momentum γ" if column == "momentum" else symbol
    momentum = _numbers(data, column, fill=0.0 if column == "momentum" else np.nan)
    effective = EFFECTIVE_LEARNING_RATE.get(optimizer, "η/(1−γ)")
    panel_list = [
        ("learning_rate", _numbers(data, "learning_rate"), "optimal learning rate η"),
        ("momentum", 1.0 - momentum, f"optimal 1 − {word}"),
        ("effective_learning_rate", _numbers(data, "effective_learning_rate"),
         "optimal " + (effective if effective != "η" else "effective learning rate η")),
    ]
    for ax, (name, values, label) in zip(axes, panel_list):
        shown = _positive(batch, values)
        if shown.any():
            ax.plot(batch[shown], values[shown], "o-", color="C0", label="best trial")
            for rule, style in (("linear", "--"), ("sqrt", ":")):
                column = f"{rule}_{name}"
                if name in HEURISTIC_PARAMETERS and column in data:
                    line = _numbers(data, column)
                    ok = _positive(batch, line)
                    ax.plot(batch[ok], line[ok], style, color="0.35",
                            label=f"{'linear' if rule == 'linear' else 'square-root'} scaling")
            if name == "momentum" and (momentum[shown] == 0).all():
                _no_data(ax, "plain SGD (γ = 0)", y=0.3)
            ax.legend()
        elif name == "momentum" and _positive(batch, _numbers(data, "learning_rate")).any():
            _no_data(ax, f"{symbol} not searched")
        else:
            _no_data(ax, "no batch size reached the goal")
        _pad_single_value(ax)
        log_axis(ax, "x", 2)
        log_axis(ax, "y", 10)
        ax.set_xlabel("batch size")
        ax.set_ylabel(label)
        ax.set_title(label.replace("optimal ", "").replace(f"1 − {word}", word.split(" ")[0]))
        ax.grid(True, which="both", alpha=0.3)
        if name == "momentum" and shown.any():
            _gamma_axis(ax, word)
    fig.suptitle(title)
    return _svg(plt, fig)


def _gamma_axis(ax, word: str = "momentum γ") -> None:
    """A right-hand axis labelling the left axis's 1 − γ ticks with γ itself (or β₁)."""
    twin = ax.twinx()
    twin.set_yscale("log")
    low, high = ax.get_ylim()
    twin.set_ylim(low, high)
    ticks = [t for t in ax.get_yticks() if low <= t <= high]
    twin.set_yticks(ticks, [plain(round(1.0 - t, 12)) for t in ticks])
    twin.minorticks_off()
    twin.set_ylabel(word)


def _pad_single_value(ax) -> None:
    """One distinct y value would give a log axis zero height: open it to a factor 2 each way."""
    ys = np.concatenate([np.asarray(line.get_ydata(), dtype=float) for line in ax.lines] or [np.zeros(0)])
    ys = ys[np.isfinite(ys) & (ys > 0)]
    if len(ys) and ys.min() == ys.max():
        ax.set_ylim(ys.min() / 2, ys.max() * 2)
