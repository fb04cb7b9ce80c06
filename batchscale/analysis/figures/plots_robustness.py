"""How robustly each batch size reaches the goal (``statistics.robustness``), as SVG bytes.

Two panels side by side: steps to result against batch size on log2–log2 axes for the
best, the 2nd, ... the k-th best trial (one line each: the gap between them is how much
the best trial's luck counts), and the share of trials that reached the goal per batch
size with its Wilson 95% interval as error bars. A value early stopping leaves as a bound
(an upper bound on a k-th best step, a lower bound on a share) is a hollow marker with its
own legend entry, so a bound is never read as a measurement.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from batchscale.analysis.figures.plot_base import (
    MAX_WIDTH_IN,
    drawing,
    footnote,
    legend,
    log2_axes,
    log_axis,
    no_data,
    numbers,
    panels,
    svg,
)

ROBUSTNESS_FIGURE = "robustness.svg"
UPPER_WORDS = "upper bound: a trial stopped early before it"
LOWER_WORDS = "lower bound: trials stopped early"


def ordinal(k: int) -> str:
    """``best``, ``2nd best``, ``3rd best``, ``4th best`` ..."""
    if k == 1:
        return "best"
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix} best"


def _ks(table: pd.DataFrame) -> list[int]:
    return sorted(int(c[len("steps_k"):]) for c in table.columns
                  if c.startswith("steps_k") and c[len("steps_k"):].isdigit())


def _bounded(table: pd.DataFrame, column: str, word: str) -> np.ndarray:
    if column not in table:
        return np.zeros(len(table), dtype=bool)
    return (table[column].fillna("").astype(str) == word).to_numpy()


def _hollow(ax, x, y, color, size: float = 6) -> None:
    ax.plot(x, y, "o", markersize=size, markerfacecolor="white", markeredgecolor=color,
            linestyle="none", zorder=3, label="_nolegend_")


@drawing
def robustness_plot(table: pd.DataFrame | None, title: str) -> bytes:
    """``table``: one goal's ``robustness_table`` (batch_size, steps_k1 .. steps_kK,
    censored_k*, share_reached, share_low, share_high, share_censored). Left: the k-th best
    trial's steps to result per batch size (log2–log2; NaN left out of its line); right:
    the share that reached the goal (log2 x, linear y from 0 to 1) with its interval."""
    table = pd.DataFrame() if table is None else table
    if "batch_size" in table:
        table = table.sort_values("batch_size", kind="stable").reset_index(drop=True)
    plt, fig, (steps_ax, share_ax) = panels(1, 2, MAX_WIDTH_IN - 0.5, 4.3)
    b = numbers(table, "batch_size")
    drawn, hollow, notes = 0, False, []
    for k in _ks(table):
        y = numbers(table, f"steps_k{k}")
        ok = np.isfinite(b) & (b > 0) & np.isfinite(y) & (y > 0)
        if not ok.any():
            unknown = _bounded(table, f"censored_k{k}", "stopped early").any()
            notes.append(f"{ordinal(k)} trial: none at any batch size" + (
                "; unknown where trials stopped early" if unknown else ""))
            continue
        line, = steps_ax.plot(b[ok], y[ok], "o-", markersize=4, label=ordinal(k))
        cut = ok & _bounded(table, f"censored_k{k}", "upper bound")
        if cut.any():
            _hollow(steps_ax, b[cut], y[cut], line.get_color())
            hollow = True
        drawn += 1
    if hollow:
        steps_ax.plot([], [], "o", markerfacecolor="white", markeredgecolor="0.3",
                      linestyle="none", label=UPPER_WORDS)
    if not drawn:
        no_data(steps_ax, "no batch size reached the goal")
    log2_axes(steps_ax, "batch size", "steps to result", f"{title}: k-th best trial")
    legend(steps_ax)
    _share_panel(share_ax, table, b, title)
    return svg(plt, fig, footnote(fig, notes))


def _share_panel(ax, table: pd.DataFrame, b: np.ndarray, title: str) -> None:
    share, low, high = (numbers(table, c) for c in ("share_reached", "share_low", "share_high"))
    ok = np.isfinite(b) & (b > 0) & np.isfinite(share)
    if ok.any():
        below = np.where(np.isfinite(low), share - low, 0)[ok]
        above = np.where(np.isfinite(high), high - share, 0)[ok]
        bars = ax.errorbar(b[ok], share[ok], yerr=[np.clip(below, 0, None), np.clip(above, 0, None)],
                           fmt="o-", markersize=4, capsize=3, label="share reached, 95% interval")
        cut = ok & _bounded(table, "share_censored", "lower bound")
        if cut.any():
            color = bars.lines[0].get_color()
            _hollow(ax, b[cut], share[cut], color)
            ax.plot([], [], "o", markerfacecolor="white", markeredgecolor="0.3",
                    linestyle="none", label=LOWER_WORDS)
        log_axis(ax, "x", 2)
    else:
        no_data(ax, "no trials")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("batch size")
    ax.set_ylabel("share of trials that reached the goal")
    ax.set_title(f"{title}: share reached")
    ax.grid(True, which="both", alpha=0.3)
    legend(ax, loc="lower left")


def robustness_figures(table: pd.DataFrame, title: str) -> dict[str, tuple[bytes, str]]:
    """The report's robustness figure, file name -> (SVG, caption), for one goal's table."""
    ks = _ks(table)
    words = ", ".join(ordinal(k) for k in ks) or "best"
    return {ROBUSTNESS_FIGURE: (
        robustness_plot(table, title),
        f"Left: steps to result against batch size (log2-log2) for the {words} trial at each "
        "batch size. Right: the share of trials (diverged included) that reached the goal, with "
        "its Wilson 95% interval. Hollow: a bound, where early stopping ended trials before "
        "they could reach the goal.")}


def kth_best_overlay_plot(tables: dict[str, pd.DataFrame], k: int, title: str) -> bytes:
    """Several studies' best trial (solid) and k-th best trial (dashed, the same colour)
    per batch size, log2–log2: the comparison's robustness figure. ``tables``: study ->
    its ``robustness_table``; a study none of whose batch sizes has a k-th best is named
    under the axes."""
    plt, fig, (ax,) = panels(1, 1, MAX_WIDTH_IN - 2.5, 4.3)
    drawn, notes = 0, []
    for study, table in tables.items():
        table = table.sort_values("batch_size", kind="stable")
        b = numbers(table, "batch_size")
        best, kth = numbers(table, "steps_k1"), numbers(table, f"steps_k{k}")
        ok = np.isfinite(b) & (b > 0) & np.isfinite(best) & (best > 0)
        if not ok.any():
            notes.append(f"{study}: no batch size reached the goal")
            continue
        line, = ax.plot(b[ok], best[ok], "o-", markersize=4, label=f"{study}: best")
        deep = np.isfinite(b) & (b > 0) & np.isfinite(kth) & (kth > 0)
        if k > 1 and deep.any():
            ax.plot(b[deep], kth[deep], "s--", markersize=3, color=line.get_color(),
                    label=f"{study}: {ordinal(k)}")
        elif k > 1:
            notes.append(f"{study}: no batch size has a {ordinal(k)} trial reaching the goal")
        drawn += 1
    if not drawn:
        no_data(ax, "no batch size reached the goal")
    log2_axes(ax, "batch size", "steps to result", title)
    legend(ax)
    return svg(plt, fig, footnote(fig, notes))
