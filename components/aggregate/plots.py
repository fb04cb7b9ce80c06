"""The report's figures, as PNG bytes (matplotlib's Agg backend; no display needed)."""

from __future__ import annotations

import io

import pandas as pd


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt, plt.subplots(figsize=(6.4, 4.4), dpi=110)


def _png(plt, fig) -> bytes:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


def steps_to_result_plot(summary: pd.DataFrame, title: str) -> bytes:
    """Steps to result against batch size on log2-log2 axes, one line per goal, with the
    dashed perfect-scaling line through each goal's smallest reached batch size."""
    plt, (fig, ax) = _figure()
    for goal, group in summary.groupby("goal", sort=False):
        reached = group.dropna(subset=["steps_to_result"]).sort_values("batch_size")
        if reached.empty:
            continue
        line, = ax.plot(reached["batch_size"], reached["steps_to_result"], "o-", label=goal)
        b0, s0 = reached["batch_size"].iloc[0], reached["steps_to_result"].iloc[0]
        ax.plot(reached["batch_size"], s0 * b0 / reached["batch_size"], "--",
                color=line.get_color(), alpha=0.6, label="perfect scaling")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("batch size")
    ax.set_ylabel("steps to result")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _png(plt, fig)


def best_trial_curves_plot(curves: dict[int, pd.DataFrame], metric: str, goal_value: float,
                           title: str) -> bytes:
    """Validation metric against step for each batch size's best trial."""
    plt, (fig, ax) = _figure()
    for batch_size, rows in sorted(curves.items()):
        ax.plot(rows["step"].clip(lower=1), rows[f"val/{metric}"], label=f"batch {batch_size}")
    ax.axhline(goal_value, color="black", linestyle=":", label="goal")
    ax.set_xscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel(f"validation {metric.replace('_', ' ')}")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return _png(plt, fig)
