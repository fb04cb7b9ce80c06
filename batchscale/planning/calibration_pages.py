"""The calibration, written: ``<store>/calibration/`` calibration.json (the record ``plan``
reads), calibration.csv (one row per study and predictor), calibration.md and
calibration.html (the per-predictor summary, the table, every definition in one line, and
one figure: predicted against fitted B*, log-log, with both intervals, the diagonal and
the within-2x band), and the console's lines."""

from __future__ import annotations

import math

import pandas as pd

from batchscale.core.critical_batch_size import DEFINITIONS
from batchscale.planning.calibration import (
    CALIBRATION_FOLDER,
    PREDICTORS,
    Calibration,
    write_calibration,
)

FIGURE = "calibration.svg"
MARKERS = {"b_simple": "o", "b_branched": "s"}


def table(calibration: Calibration) -> pd.DataFrame:
    """One row per study and predictor, as the CSV, the Markdown and the HTML show it
    (each estimate in the report's one notation, ``critical_batch_sizes.estimate_text``)."""
    from batchscale.analysis.statistics.critical_batch_sizes import estimate_text

    rows = []
    for r in calibration.rows:
        rows.append({
            "study": r.study, "workload": r.workload, "goal": r.goal,
            "predictor": DEFINITIONS[r.predicted.name].symbol,
            "predicted": estimate_text(r.predicted), "fitted B*": estimate_text(r.fitted),
            "predicted / fitted": (round(r.ratio, 3) if math.isfinite(r.ratio)
                                   else "not scored: B* one-sided" if not r.scored else None),
            "B* inside": r.covered, "intervals overlap": r.overlap,
            "probe examples": r.predicted.examples, "sweep examples": r.sweep_examples,
            "share of sweep": f"{100 * r.share:.3g}%" if math.isfinite(r.share) else "—",
            "source": r.source})
    return pd.DataFrame(rows)


def summary_lines(calibration: Calibration) -> list[str]:
    """What the console, the Markdown and the HTML say above the table."""
    records = calibration.records
    studies = len({r.study for r in calibration.rows})
    one_sided = len({r.study for r in calibration.rows if not r.scored})
    lines = [f"{studies} finished {'study' if studies == 1 else 'studies'} calibrated"
             + (f" ({one_sided} shown, not scored: their B* is bounded on one side only)"
                if one_sided else "")
             + (f", {len(calibration.skipped)} left out" if calibration.skipped else "")]
    lines += [record.sentence() for record in records]
    best = calibration.best
    lines.append(f"best-calibrated predictor: {best.symbol} (smallest median error in doublings; "
                 "`batchscale plan` in this store uses it)" if best else
                 "no predictor has a record on 2 or more studies yet: `batchscale plan` falls "
                 "back to B_simple")
    return lines


def definition_lines() -> list[str]:
    return [f"{DEFINITIONS[n].symbol}: {DEFINITIONS[n].definition}" for n in ("b_star_fit", *PREDICTORS)]


def figure(calibration: Calibration) -> bytes | None:
    """Predicted against fitted B* (module docstring); None without rows."""
    from batchscale.analysis.figures.plot_base import drawing

    return drawing(_figure)(calibration) if calibration.rows else None


def _figure(calibration: Calibration) -> bytes:
    import numpy as np

    from batchscale.analysis.figures.plot_base import figure as new_figure
    from batchscale.analysis.figures.plot_base import footnote, legend, log_axis, svg

    plt, (fig, ax) = new_figure()
    shown = [r for r in calibration.rows if math.isfinite(r.ratio)]
    finite = [v for r in shown for v in (r.fitted.value, r.predicted.value, r.fitted.low,
                                         r.predicted.low, r.fitted.high, r.predicted.high)
              if math.isfinite(v) and v > 0] or [1.0]
    low, high = min(finite) / 1.5, max(finite) * 1.5
    for name in PREDICTORS:
        mine = [r for r in shown if r.predicted.name == name]
        if not mine:
            continue
        x = np.array([r.fitted.value for r in mine])
        y = np.array([r.predicted.value for r in mine])
        xerr = np.array([[r.fitted.value - max(r.fitted.low, low), min(r.fitted.high, high)
                          - r.fitted.value] for r in mine]).T
        yerr = np.array([[r.predicted.value - max(r.predicted.low, low),
                          min(r.predicted.high, high) - r.predicted.value] for r in mine]).T
        ax.errorbar(x, y, xerr=np.clip(xerr, 0, None), yerr=np.clip(yerr, 0, None),
                    fmt=MARKERS.get(name, "o"), capsize=3, label=DEFINITIONS[name].symbol)
    line = np.array([low, high])
    ax.plot(line, line, color="0.3", lw=1, label="predicted = fitted")
    ax.fill_between(line, line / 2, line * 2, color="0.5", alpha=0.15, label="within 2x")
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    log_axis(ax, "x", 2)
    log_axis(ax, "y", 2)
    ax.set_xlabel("fitted B* of the sweep")
    ax.set_ylabel("predicted before the sweep")
    ax.set_title("critical batch size: predicted against fitted")
    ax.grid(True, which="both", alpha=0.3)
    legend(ax, loc="upper left")
    left_out = len({r.study for r in calibration.rows if not r.scored})
    rect = footnote(fig, [f"{left_out} {'study' if left_out == 1 else 'studies'} with a B* "
                          "bounded on one side only not shown (in the table)"] if left_out else [])
    return svg(plt, fig, rect)


def markdown(calibration: Calibration) -> str:
    from batchscale.analysis.pages.html import markdown_table

    lines = ["# Calibration: critical batch size predictors against fitted B*", ""]
    lines += [f"- {line}" for line in summary_lines(calibration)] + [""]
    if calibration.rows:
        lines += markdown_table(table(calibration)) + ["", f"![predicted against fitted]({FIGURE})", ""]
    lines += [f"- left out: {study}: {why}" for study, why in calibration.skipped]
    lines += ["", "## Definitions", ""] + [f"- {line}" for line in definition_lines()]
    return "\n".join(lines) + "\n"


def html(calibration: Calibration, image: bytes | None) -> str:
    from batchscale.analysis.pages.html import esc, figure, page, sortable_table

    body = ["<h1>Calibration: critical batch size predictors against fitted B*</h1><ul>"]
    body += [f"<li>{esc(line)}</li>" for line in summary_lines(calibration)] + ["</ul>"]
    if calibration.rows:
        body.append(sortable_table(table(calibration), "calibration"))
    if image:
        body.append(figure(image, "Each finished study's fitted B* (x) against each predictor's "
                                  "estimate before the sweep (y), with their intervals"))
    if calibration.skipped:
        body.append("<h2>Left out</h2><ul>" + "".join(
            f"<li>{esc(s)}: {esc(w)}</li>" for s, w in calibration.skipped) + "</ul>")
    body.append("<h2>Definitions</h2><ul>" + "".join(
        f"<li>{esc(line)}</li>" for line in definition_lines()) + "</ul>")
    return page("batchscale calibration", "".join(body))


def write_pages(fs, calibration: Calibration) -> str:
    """Write every file of the calibration; returns calibration.json's URL."""
    image = figure(calibration)
    url = write_calibration(fs, calibration)
    fs.write_text(f"{CALIBRATION_FOLDER}/calibration.csv", table(calibration).to_csv(index=False))
    fs.write_text(f"{CALIBRATION_FOLDER}/calibration.md", markdown(calibration))
    fs.write_text(f"{CALIBRATION_FOLDER}/calibration.html", html(calibration, image))
    if image:
        fs.write_bytes(f"{CALIBRATION_FOLDER}/{FIGURE}", image)
    return url


def console_lines(calibration: Calibration) -> list[str]:
    from batchscale.analysis.pages.sections import console_table

    out = summary_lines(calibration)
    if calibration.rows:
        out += console_table(table(calibration), ["study", "predictor", "predicted", "fitted B*",
                                                   "predicted / fitted", "share of sweep"])
    out += [f"left out: {study}: {why}" for study, why in calibration.skipped]
    return out + ["definitions:"] + [f"  {line}" for line in definition_lines()]
