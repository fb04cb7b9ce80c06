"""Figure 11: the best validation metric per batch size under step, example or epoch budgets.

Under an early-stopping protocol (e.g. ``goal``, ``race``) some trials stopped before a budget
was spent, so the best value under that budget may be better than what was measured
(``censoring.budget_censored``; ``best_under_budget``'s ``censored`` column). Those points
are drawn hollow, with their own legend entry, so a reader never takes a censored value
for the batch size's true best.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from batchscale.analysis.figures.plot_base import (
    MAX_WIDTH_IN,
    drawing,
    figure,
    legend,
    log2_axes,
    no_data,
    numbers,
    svg,
)


def budget_label(kind: str, budget, train_examples: int | None = None) -> str:
    """``"4,096 steps"``, ``"65,536 examples"`` or, for example budgets with a known
    training-set size, ``"2.5 epochs"``."""
    if kind == "examples" and train_examples:
        return f"{budget / train_examples:.3g} epochs"
    number = float(budget)
    shown = f"{int(number):,}" if number.is_integer() else f"{number:.4g}"
    return f"{shown} {'steps' if kind == 'steps' else 'examples'}"


def _censored(group: pd.DataFrame) -> np.ndarray:
    if "censored" not in group:
        return np.zeros(len(group), dtype=bool)
    return group["censored"].map(lambda v: str(v).lower() in ("true", "1")).to_numpy(dtype=bool)


@drawing
def budget_plot(best: pd.DataFrame, title: str, metric_label: str,
                train_examples: int | None = None, protocol: str | None = None) -> bytes:
    """Figure 11: the best ``metric_label`` value per batch size (log2 x) under each budget.

    ``best``: ``best_under_budget``'s table (kind, budget, batch_size, best_value, ...,
    optionally censored), one or both kinds; one panel per kind (step budgets, then
    example/epoch budgets), one line per budget, labelled with ``budget_label``. NaN best
    values (nothing within the budget) are left out of their line. Censored values are
    hollow markers, with a legend entry "censored by early stopping (protocol ...)".
    """
    best = best if best is not None else pd.DataFrame()
    usable = {"kind", "budget", "batch_size", "best_value"} <= set(best.columns)
    kinds = [k for k in ("steps", "examples") if usable and (best["kind"] == k).any()]
    plt, (fig, ax) = figure()
    axes = [ax]
    if len(kinds) == 2:
        fig.delaxes(ax)
        fig.set_size_inches(MAX_WIDTH_IN - 0.5, fig.get_size_inches()[1])
        axes = list(fig.subplots(1, 2))
    censored_label = "censored by early stopping" + (f" (protocol {protocol})" if protocol else "")
    for ax, kind in zip(axes, kinds or [None]):
        rows = best[best["kind"] == kind] if kind else pd.DataFrame(columns=["budget"])
        drawn, hollow = 0, False
        for budget, group in rows.groupby("budget", sort=True):
            group = group.sort_values("batch_size")
            b, v = numbers(group, "batch_size"), numbers(group, "best_value")
            ok = np.isfinite(b) & (b > 0) & np.isfinite(v)
            if not ok.any():
                continue
            line, = ax.plot(b[ok], v[ok], "o-", markersize=4,
                            label=budget_label(kind, budget, train_examples))
            cut = ok & _censored(group)
            if cut.any():
                ax.plot(b[cut], v[cut], "o", markersize=6, markerfacecolor="white",
                        markeredgecolor=line.get_color(), linestyle="none", zorder=3,
                        label="_nolegend_")
                hollow = True
            drawn += 1
        if hollow:
            ax.plot([], [], "o", markerfacecolor="white", markeredgecolor="0.3", linestyle="none",
                    label=censored_label)
        if not drawn:
            no_data(ax, "no evaluation within any budget")
        what = {"steps": "step budgets", "examples": "epoch budgets" if train_examples
                else "example budgets"}.get(kind, "budgets")
        log2_axes(ax, "batch size", f"best {metric_label}", f"{title}: {what}" if kinds else title,
                  logy=False)
        legend(ax)
    return svg(plt, fig)
