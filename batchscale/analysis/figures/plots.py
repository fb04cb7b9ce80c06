"""The report's and ``compare``'s figures, as SVG bytes (matplotlib's Agg backend; no display;
sizes and fonts in ``plot_base``).

- ``steps_to_result_plot``: Figure 1 / Figures 3–6 (and 15–17): steps (or examples) to
  result against batch size on log2–log2 axes, one line per curve, the dashed
  perfect-scaling line through each curve's smallest reached batch size, optional fitted
  curves with their confidence bands, optional normalisation to one batch size.
- ``budget_plot``: Figure 11: best validation metric against batch size under step, example
  or epoch budgets (in ``plots_budget``, importable from here).
- ``train_vs_val_plot``: Figure 12: steps to result for the same goal measured on the
  training and on the validation metric.
- ``best_trial_curves_plot``: each batch size's best trial's validation curve.

``normalize_curves`` computes the normalised tables (and the notes on curves it has to leave
out) that ``steps_to_result_plot`` draws, so a caller can show the same numbers and notes.
Every figure handles empty and degenerate input (no curve, nothing reached, one point, NaN)
by drawing what there is, or a "no data" note, instead of failing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from batchscale.analysis.figures.plot_base import drawing as _drawing
from batchscale.analysis.figures.plot_base import figure as _figure
from batchscale.analysis.figures.plot_base import footnote as _footnote
from batchscale.analysis.figures.plot_base import legend as _legend
from batchscale.analysis.figures.plot_base import log2_axes as _log2_axes
from batchscale.analysis.figures.plot_base import log_axis as _log_axis
from batchscale.analysis.figures.plot_base import no_data as _no_data
from batchscale.analysis.figures.plot_base import numbers as _numbers
from batchscale.analysis.figures.plot_base import svg as _svg
from batchscale.analysis.figures.plots_budget import budget_label as budget_label
from batchscale.analysis.figures.plots_budget import budget_plot as budget_plot
from batchscale.core.errors import InputError

STEPS = "steps_to_result"
EXAMPLES = "examples_to_result"


# ---- normalisation --------------------------------------------------------------------
@dataclass
class NormalizedCurves:
    """``curves``: label -> the input table (sorted by batch size) with a ``normalized_<column>``
    column added, only for curves that reached the goal at ``normalize_at``; ``reference``:
    label -> the value divided by; ``notes``: one line per curve left out, saying why."""

    normalize_at: int | None
    column: str
    curves: dict[str, pd.DataFrame]
    reference: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def normalized_column(self) -> str:
        return f"normalized_{self.column}"


def normalize_curves(curves, normalize_at: int | None, column: str = STEPS) -> NormalizedCurves:
    """Divide each curve's ``column`` by its own value at batch size ``normalize_at``
    (Figures 3–6: a vertical shift on log axes, so curves of different workloads can be
    compared by where they bend). Curves that did not measure ``normalize_at``, or did not
    reach the goal there, are left out with a note. ``normalize_at=None``: every curve is
    kept and the normalised column equals ``column``.
    """
    curves = _as_curves(curves)
    if normalize_at is not None and (not _is_number(normalize_at) or normalize_at <= 0):
        raise InputError(f"normalize_at: {normalize_at!r} must be a positive batch size")
    out = NormalizedCurves(normalize_at, column, {})
    name = out.normalized_column
    for label, frame in curves.items():
        frame = _sorted(frame)
        values = _numbers(frame, column)
        if normalize_at is None:
            out.curves[label] = frame.assign(**{name: values})
            out.reference[label] = 1.0
            continue
        at = _numbers(frame, "batch_size") == float(normalize_at)
        if not at.any():
            out.notes.append(f"{label}: left out of the normalised comparison: batch size "
                             f"{normalize_at:g} was not measured")
            continue
        reference = values[at][0]
        if not (math.isfinite(reference) and reference > 0):
            out.notes.append(f"{label}: left out of the normalised comparison: the goal was "
                             f"not reached at batch size {normalize_at:g}")
            continue
        out.curves[label] = frame.assign(**{name: values / reference})
        out.reference[label] = float(reference)
    return out


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    if frame is None:
        return pd.DataFrame(columns=["batch_size", STEPS])
    if "batch_size" not in frame or frame.empty:
        return frame.reset_index(drop=True)
    return frame.sort_values("batch_size", kind="stable").reset_index(drop=True)


def _as_curves(curves) -> dict[str, pd.DataFrame]:
    """label -> table; a single steps_to_result table (the old call style) is split by goal."""
    if curves is None:
        return {}
    if isinstance(curves, pd.DataFrame):
        if "goal" in curves:
            return {str(goal): group for goal, group in curves.groupby("goal", sort=False)}
        return {STEPS: curves}
    return {str(label): frame for label, frame in curves.items()}


# ---- steps to result ------------------------------------------------------------------
@_drawing
def steps_to_result_plot(curves, title: str, fits=None, normalize_at: int | None = None,
                         ylabel: str | None = None, column: str = STEPS) -> bytes:
    """Steps to result against batch size, log2–log2, one line per curve.

    ``curves``: label -> table with ``batch_size`` and ``column`` (default steps_to_result;
    NaN = not reached); a single steps_to_result table (the old ``(summary, title)`` call)
    is drawn one line per goal. Each curve gets a dashed perfect-scaling line through its
    smallest reached batch size (steps ∝ 1/B; for ``column="examples_to_result"`` a
    constant). ``fits``: label -> an object with ``.fitted``, ``.curve(batch_sizes)`` and
    ``.band(batch_sizes) -> (low, high)`` (regimes.RegimeFit) or None: the fitted curve
    (dotted) and its band (shaded) over the curve's measured batch sizes, in steps (times B
    for examples). ``normalize_at``: divide every curve (and its fit) by its value at that
    batch size (``normalize_curves``); curves without it are left out, and the reasons are
    printed under the axes (the same notes ``normalize_curves`` returns).
    """
    normalized = normalize_curves(curves, normalize_at, column)
    value_column = normalized.normalized_column
    fits = fits or {}
    plt, (fig, ax) = _figure()
    drawn, fit_drawn = 0, False
    for label, frame in normalized.curves.items():
        b, y = _numbers(frame, "batch_size"), _numbers(frame, value_column)
        ok = np.isfinite(b) & (b > 0) & np.isfinite(y) & (y > 0)
        if not ok.any():
            continue
        line, = ax.plot(b[ok], y[ok], "o-", markersize=4, label=label)
        color = line.get_color()
        b0, y0 = b[ok][0], y[ok][0]
        xs = b[np.isfinite(b) & (b > 0)]
        ideal = np.full(xs.shape, y0) if column == EXAMPLES else y0 * b0 / xs
        ax.plot(xs, ideal, "--", color=color, alpha=0.55, linewidth=1)
        fit_drawn |= _draw_fit(ax, fits.get(label), xs, normalized.reference[label], column,
                               color, first=not fit_drawn)
        drawn += 1
    if drawn:
        ax.plot([], [], "--", color="0.5", linewidth=1, label="perfect scaling")
    else:
        _no_data(ax, "no curve reached the goal" if normalized.curves or not normalized.notes
                 else "no curve could be normalised")
    what = "examples to result" if column == EXAMPLES else "steps to result"
    if ylabel is None and normalize_at is not None:
        ylabel = f"{what} / {what.split()[0]} at batch size {normalize_at:g}"
    ylabel = what if ylabel is None else ylabel
    _log2_axes(ax, "batch size", ylabel, title)
    _legend(ax)
    return _svg(plt, fig, _footnote(fig, normalized.notes))


def _draw_fit(ax, fit, xs: np.ndarray, reference: float, column: str, color, first: bool) -> bool:
    """The fitted curve and its band, scaled like the data; whether anything was drawn."""
    if fit is None or not getattr(fit, "fitted", False) or xs.size == 0:
        return False
    grid = np.geomspace(xs.min(), xs.max(), 60) if xs.max() > xs.min() else xs.astype(float)
    scale = (grid if column == EXAMPLES else 1.0) / reference
    try:
        curve = np.asarray(fit.curve(grid), dtype=float) * scale
        low, high = (np.asarray(v, dtype=float) * scale for v in fit.band(grid))
    except Exception:  # a fit object that cannot evaluate: draw the data only
        return False
    ok = np.isfinite(curve) & (curve > 0)
    if ok.any():
        ax.plot(grid[ok], curve[ok], ":", color=color, linewidth=1.6,
                label="fit S_min(1 + B*/B)" if first else "_nolegend_")
    band = np.isfinite(low) & np.isfinite(high) & (low > 0) & (high > 0)
    if band.any():
        level = getattr(fit, "level", None)
        name = f"{level:.0%} band" if isinstance(level, float) else "fit band"
        ax.fill_between(grid[band], low[band], high[band], color=color, alpha=0.15, linewidth=0,
                        label=name if first else "_nolegend_")
    return bool(ok.any() or band.any())


# ---- Figure 12 ------------------------------------------------------------------------
@_drawing
def train_vs_val_plot(val_table: pd.DataFrame | None, train_table: pd.DataFrame | None,
                      title: str) -> bytes:
    """Figure 12: steps to result per batch size (log2–log2) for each goal, measured on the
    validation metric (solid, circles) and on the training metric (dashed, squares), one
    colour per goal. Tables are ``steps_to_result``'s (a ``goal`` column splits them)."""
    plt, (fig, ax) = _figure()
    val, train = _as_curves(val_table), _as_curves(train_table)
    colors = {}
    drawn = 0
    for split, curves, style in (("validation", val, "o-"), ("training", train, "s--")):
        for goal, frame in curves.items():
            frame = _sorted(frame)
            b, s = _numbers(frame, "batch_size"), _numbers(frame, STEPS)
            ok = np.isfinite(b) & (b > 0) & np.isfinite(s) & (s > 0)
            if not ok.any():
                continue
            kwargs = {"color": colors[goal]} if goal in colors else {}
            line, = ax.plot(b[ok], s[ok], style, markersize=4, label=f"{split}: {goal}", **kwargs)
            colors.setdefault(goal, line.get_color())
            drawn += 1
    if not drawn:
        _no_data(ax, "no batch size reached the goal on either split")
    _log2_axes(ax, "batch size", "steps to result", title)
    _legend(ax)
    return _svg(plt, fig)


# ---- best trial curves ----------------------------------------------------------------
@_drawing
def best_trial_curves_plot(curves: dict[int, pd.DataFrame], metric: str, goal_value: float,
                           title: str) -> bytes:
    """Validation metric against step for each batch size's best trial. The legend (one
    entry a batch size, ten or more in a study) goes under the axes, off the curves."""
    plt, (fig, ax) = _figure()
    for batch_size, rows in sorted(curves.items()):
        ax.plot(rows["step"].clip(lower=1), rows[f"val/{metric}"], label=f"batch {batch_size}")
    ax.axhline(goal_value, color="black", linestyle=":", label="goal")
    _log_axis(ax, "x")
    ax.set_xlabel("step")
    ax.set_ylabel(f"validation {metric.replace('_', ' ')}")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    width, height = fig.get_size_inches()
    extra = 0.21 * math.ceil(len(labels) / 4) + 0.12  # 9 pt rows, the frame
    fig.set_size_inches(width, height + extra)
    fig.legend(handles, labels, loc="lower center", ncol=4)
    return _svg(plt, fig, (0, extra / (height + extra), 1, 1))
