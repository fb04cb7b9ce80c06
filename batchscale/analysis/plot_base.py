"""What every figure of the analysis shares: a matplotlib figure on the Agg backend (no
display, imported only when a figure is drawn), its PNG bytes, numeric columns that
tolerate missing or odd values, log2 axes, legends and notes under the axes."""

from __future__ import annotations

import io
import math
import textwrap

import numpy as np
import pandas as pd


def figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt, plt.subplots(figsize=(6.4, 4.4), dpi=110)


def png(plt, fig, rect=None) -> bytes:
    buffer = io.BytesIO()
    if rect is None:
        fig.tight_layout()
    else:
        fig.tight_layout(rect=rect)
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


def numbers(frame: pd.DataFrame, column: str) -> np.ndarray:
    if frame is None or column not in frame:
        return np.full(0 if frame is None else len(frame), math.nan)
    return pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)


def no_data(ax, text: str, y: float = 0.5) -> None:
    ax.text(0.5, y, text, transform=ax.transAxes, ha="center", va="center", fontsize=9,
            color="0.4")


def legend(ax, **kwargs) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, **{"fontsize": 7, **kwargs})


def log2_axes(ax, xlabel: str, ylabel: str, title: str, logy: bool = True) -> None:
    ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)


def footnote(fig, notes: list[str]) -> tuple[float, float, float, float] | None:
    """Notes written under the axes; returns the tight_layout rect that leaves room for them."""
    if not notes:
        return None
    lines = [line for note in notes for line in textwrap.wrap(note, 110)][:6]
    fig.text(0.01, 0.01, "\n".join(lines), fontsize=6.5, color="0.3", va="bottom", ha="left")
    return (0, min(0.4, 0.035 * len(lines) + 0.01), 1, 1)
