"""The paper's Figures 9 and 13 in one: every trial in (learning rate η, 1 − momentum γ) space,
one panel per batch size, with contours of constant η/(1−γ) and the searched range, so a best
trial on a boundary (re-search needed) or on the edge of the divergent region is visible at a
glance. An Adam-family study shows (η, 1 − β₁) instead (``core.names.momentum_parameter``),
without contours: its effective learning rate is η itself. SVG bytes (``plot_base``: sizes,
fonts, plain-number log ticks); never fails on empty or degenerate tables.

Legibility: three panels a row (each 3.45 x 3 in, so the row fits the report's column at its
own size), axis names shared by the grid, one legend in a free grid cell or under the panels.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from batchscale.analysis.figures.plot_base import FONT, drawing, log_axis, panels, plain
from batchscale.analysis.figures.plot_base import no_data as _no_data
from batchscale.analysis.figures.plot_base import svg as _svg
from batchscale.analysis.statistics.metaparameters import parameter_configs, reached_mask, trial_outcomes
from batchscale.core.names import momentum_parameter

OUTCOME_STYLE = {
    "reached": {"marker": "o", "facecolors": "tab:blue", "edgecolors": "tab:blue",
                "label": "goal reached"},
    "not reached": {"marker": "o", "facecolors": "none", "edgecolors": "0.45",
                    "label": "goal not reached"},
    "stopped early": {"marker": "v", "facecolors": "none", "edgecolors": "tab:orange",
                      "label": "stopped early (goal unknown)"},
    "infeasible": {"marker": "x", "color": "tab:red", "label": "infeasible (diverged)"},
}
BEST_STYLE = {"marker": "*", "s": 200, "color": "gold", "edgecolors": "black", "linewidths": 0.6,
              "zorder": 5, "label": "best trial (fewest steps)"}
CONTOUR_FACTORS = (0.01, 0.1, 1.0, 10.0, 100.0)


PANEL_IN = (3.45, 3.0)  # one lr x momentum panel: three in a row fit the report's column
COLUMNS = 3


def _numbers(table: pd.DataFrame, column: str, fill: float = math.nan) -> pd.Series:
    if column not in table:
        return pd.Series(fill, index=table.index, dtype=float)
    return pd.to_numeric(table[column], errors="coerce").astype(float).fillna(fill)


def _positive(*series) -> np.ndarray:
    """Rows where every series is finite and > 0 (what a log axis can show)."""
    mask = np.ones(len(series[0]), dtype=bool)
    for s in series:
        values = np.asarray(s, dtype=float)
        mask &= np.isfinite(values) & (values > 0)
    return mask


def _log_limits(values, default: tuple[float, float]) -> tuple[float, float]:
    values = np.asarray([v for v in values if v is not None], dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    if values.size == 0:
        return default
    lo, hi = float(values.min()), float(values.max())
    pad = 3.0 if lo == hi else (hi / lo) ** 0.08
    return lo / pad, hi * pad


def _pick(batch_sizes: list, max_panels: int) -> list:
    """At most ``max_panels`` batch sizes, evenly spread, always the smallest and largest."""
    count = max(int(max_panels), 1)
    if len(batch_sizes) <= count:
        return batch_sizes
    index = np.unique(np.round(np.linspace(0, len(batch_sizes) - 1, count)).astype(int))
    return [batch_sizes[i] for i in index]


def _best_point(rows: pd.DataFrame, summary: pd.DataFrame | None, batch_size,
                column: str = "momentum"):
    """(learning rate, momentum: ``column``'s value) of the batch size's best trial, or None."""
    if summary is None or "best_trial" not in summary or "batch_size" not in summary:
        return None
    match = summary[summary["batch_size"] == batch_size]
    best = match["best_trial"].iloc[0] if len(match) else None
    if best is None or pd.isna(best):
        return None
    source = rows[rows["trial_id"] == best] if "trial_id" in rows else rows.iloc[:0]
    source = source if len(source) else match
    lr = _numbers(source, "learning_rate").iloc[0]
    return lr, _numbers(source, column, fill=0.0).iloc[0]


def _range(configs: dict, name: str):
    """(min, max) of a continuous searched parameter, or None."""
    config = configs.get(name) or {}
    lo, hi = config.get("min_value"), config.get("max_value")
    if config.get("type") not in ("DOUBLE", "INTEGER") or lo is None or hi is None:
        return None
    return float(lo), float(hi)


def _contours(ax, level: float) -> None:
    """Dashed lines η/(1−γ) = const (slope 1 in log-log) around ``level``, labelled."""
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    for i, factor in enumerate(CONTOUR_FACTORS):
        value = level * factor
        ax.plot([x0, x1], [x0 / value, x1 / value], "--", color="0.5",
                linewidth=1.0 if factor == 1.0 else 0.6, zorder=1, scalex=False, scaley=False,
                label="η/(1−γ) contours" if i == 0 else None)
        lo, hi = max(x0, value * y0), min(x1, value * y1)
        # labelled where a quarter of the panel's size or more of the line shows, so the
        # label sits on its line and not on the panel's edge
        if lo < hi and math.hypot(*(math.log(hi / lo) / math.log(b / a)
                                    for a, b in ((x0, x1), (y0, y1)))) >= 0.25:
            x = math.sqrt(lo * hi)
            ax.text(x, x / value, plain(float(f"{value:.2g}")), fontsize=FONT["note"],
                    color="0.25", ha="center", va="center", zorder=2, clip_on=True,
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.8, "alpha": 0.85})


def _momentum_panel(ax, rows: pd.DataFrame, best, configs: dict, column: str = "momentum") -> None:
    """Trials in (η, 1−γ) log-log space: outcomes, best star, contours (η/(1−γ): momentum
    only), searched box; ``column``: the momentum parameter (momentum, or beta_1)."""
    lr, one_minus = _numbers(rows, "learning_rate"), 1.0 - _numbers(rows, column, fill=0.0)
    outcome = trial_outcomes(rows)
    lr_range, m_range = _range(configs, "learning_rate"), _range(configs, column)
    y_range = (1.0 - m_range[1], 1.0 - m_range[0]) if m_range else None
    ax.set_autoscale_on(False)  # limits are set below from data and searched range together
    ax.set_xscale("log")
    ax.set_yscale("log")
    for kind, style in OUTCOME_STYLE.items():
        shown = _positive(lr, one_minus) & (outcome == kind).to_numpy()
        if shown.any():
            ax.scatter(lr[shown], one_minus[shown], s=22, zorder=3, **style)
    xs, ys = list(lr[_positive(lr, one_minus)]), list(one_minus[_positive(lr, one_minus)])
    if best is not None and best[0] > 0 and best[1] < 1:
        ax.scatter([best[0]], [1.0 - best[1]], **BEST_STYLE)
        xs.append(best[0])
        ys.append(1.0 - best[1])
    ax.set_xlim(_log_limits(xs + list(lr_range or ()), (1e-4, 1.0)))
    ax.set_ylim(_log_limits(ys + list(y_range or ()), (1e-3, 1.0)))
    _searched(ax, lr_range, y_range)
    if best is not None and best[0] > 0 and best[1] < 1:
        level = best[0] / (1.0 - best[1])
    else:
        effective = (lr / one_minus)[_positive(lr, one_minus)]
        level = 10 ** round(math.log10(float(np.median(effective)))) if len(effective) else None
    if level and column == "momentum":
        _contours(ax, level)
    log_axis(ax, "x")
    log_axis(ax, "y")


def _searched(ax, x_range, y_range) -> None:
    """The searched range as a light box (or band, when only one axis was searched)."""
    style = {"facecolor": "0.92", "edgecolor": "0.6", "linewidth": 0.8, "zorder": 0,
             "label": "searched range"}
    valid_x = x_range is not None and min(x_range) > 0
    valid_y = y_range is not None and min(y_range) > 0
    if valid_x and valid_y:
        from matplotlib.patches import Rectangle

        (x0, x1), (y0, y1) = sorted(x_range), sorted(y_range)
        ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, **style))
    elif valid_x:
        ax.axvspan(*sorted(x_range), **style)
    elif valid_y:
        ax.axhspan(*sorted(y_range), **style)


def _strip_panel(ax, rows: pd.DataFrame, best, configs: dict) -> None:
    """Plain SGD: learning rate on a log axis, one strip per outcome (no momentum axis)."""
    lr, outcome = _numbers(rows, "learning_rate"), trial_outcomes(rows)
    levels = {"infeasible": 0, "not reached": 1, "stopped early": 2, "reached": 3}
    ax.set_autoscale_on(False)
    ax.set_xscale("log")
    for kind, style in OUTCOME_STYLE.items():
        shown = _positive(lr) & (outcome == kind).to_numpy()
        if shown.any():
            jitter = 0.12 * np.sin(np.arange(shown.sum()) * 2.4)  # deterministic spread
            ax.scatter(lr[shown], levels[kind] + jitter, s=22, zorder=3, **style)
    xs = list(lr[_positive(lr)])
    if best is not None and best[0] > 0:
        ax.scatter([best[0]], [levels["reached"]], **BEST_STYLE)
        xs.append(best[0])
    lr_range = _range(configs, "learning_rate")
    ax.set_xlim(_log_limits(xs + list(lr_range or ()), (1e-4, 1.0)))
    ax.set_ylim(-0.6, 3.6)
    _searched(ax, lr_range, None)
    ax.set_yticks(list(levels.values()), list(levels.keys()))
    log_axis(ax, "x")


@drawing
def lr_momentum_scatter(trials: pd.DataFrame, summary: pd.DataFrame | None,
                        search_space: dict | None, title: str, max_panels: int = 12,
                        optimizer: str | None = None) -> bytes:
    """Every trial in learning rate / momentum space, one panel per batch size (for an
    ``optimizer`` of the Adam family: learning rate / β₁, no contours; module doc).

    x = learning rate, y = 1 − momentum, both log (the paper's Figures 9 and 13). Filled
    blue: reached the goal; hollow grey: did not (complete or incomplete); hollow orange
    triangle: stopped early by the study's protocol before reaching it (a ``stopped_early``
    column; unknown, not "not reached"); red x: infeasible (diverged). Gold star: the
    best trial. Dashed lines: constant effective learning rate η/(1−γ) at the best
    trial's value and factors of 10 around it. Light box: the searched range, where the
    search space is known. More than ``max_panels`` batch sizes are thinned evenly. Plain
    SGD studies (no momentum, or all 0) get one strip per outcome along a log
    learning-rate axis instead. Three panels a row, axis names shared.
    """
    trials = trials if trials is not None else pd.DataFrame()
    sizes = set(trials["batch_size"]) if "batch_size" in trials else set()
    if summary is not None and "batch_size" in summary:
        sizes |= set(summary["batch_size"])
    chosen = _pick(sorted(int(b) for b in sizes if not pd.isna(b)), max_panels)
    columns = min(COLUMNS, max(len(chosen), 1))
    grid_rows = max(math.ceil(len(chosen) / columns), 1)
    spare = columns * grid_rows - len(chosen) if chosen else 0
    height = PANEL_IN[1] * grid_rows + 0.7
    plt, fig, axes = panels(grid_rows, columns, PANEL_IN[0] * columns + 0.5, height)
    column, symbol = momentum_parameter(optimizer) or ("momentum", "γ")
    momentum_study = bool((_numbers(trials, column, fill=0.0) != 0).any())
    for ax, batch_size in zip(axes, chosen):
        rows = trials[trials["batch_size"] == batch_size] if len(trials) else trials
        best = _best_point(rows, summary, batch_size, column)
        configs = parameter_configs(search_space, batch_size)
        if momentum_study:
            _momentum_panel(ax, rows, best, configs, column)
        else:
            _strip_panel(ax, rows, best, configs)
        complete = int((rows["status"] == "COMPLETE").sum()) if "status" in rows else 0
        reached = int(reached_mask(rows).sum()) if "status" in rows else 0
        early = int((trial_outcomes(rows) == "stopped early").sum()) if len(rows) else 0
        ax.set_title(f"batch {batch_size}: {reached} of {complete} reached"
                     + (f", {early} stopped early" if early else ""), fontsize=FONT["label"])
        ax.grid(True, which="major", alpha=0.25)
    if not chosen:
        _no_data(axes[0], "no trials")
    for ax in axes[len(axes) - spare:]:
        ax.set_axis_off()
    handles = {}
    for ax in axes[: len(chosen)]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    rect = _legend(fig, axes, handles, len(chosen), spare)
    plain_sgd = column == "momentum" and not momentum_study
    fig.supxlabel("learning rate η" + (" (plain SGD)" if plain_sgd else ""))
    word = "momentum γ" if column == "momentum" else symbol
    fig.supylabel(f"1 − {word}" if momentum_study else "outcome")
    fig.suptitle(title)
    return _svg(plt, fig, rect)


def _legend(fig, axes, handles: dict, panels_drawn: int, spare: int):
    """The panels' one legend, never over the points: in the first free grid cell, else
    right of a lone panel, else under the panels (the figure grows to hold it); returns
    the tight_layout rect that leaves room for it."""
    labels, artists = list(handles), list(handles.values())
    if not handles:
        return None
    if spare:
        axes[panels_drawn].legend(artists, labels, loc="center")
        return None
    width, height = fig.get_size_inches()
    if panels_drawn == 1:
        fig.set_size_inches(width + 2.6, height)
        axes[0].legend(artists, labels, loc="center left", bbox_to_anchor=(1.03, 0.5))
        return None
    ncol = min(COLUMNS, panels_drawn)
    extra = 0.21 * math.ceil(len(labels) / ncol) + 0.12  # 9 pt rows, the frame
    fig.set_size_inches(width, height + extra)
    fig.legend(artists, labels, loc="lower center", ncol=ncol)
    return (0, extra / (height + extra), 1, 1)
