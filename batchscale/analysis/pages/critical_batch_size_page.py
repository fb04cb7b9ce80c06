"""The report's "Critical batch size: four definitions" section: every definition of
``core.critical_batch_size`` side by side (``statistics.critical_batch_sizes``), one row
each: its symbol, its value with its interval and level, the compute it spent (examples,
and their share of the examples the sweep trained) and its definition in one line; then
each probe's prediction against the fitted B*, and for a definition not measured, how to
measure it. One ``Section``, rendered to report.html, summary.md and the console (which
rebuilds it from summary.json, ``from_summary``); the figure (``plots_cbs``) on the page.
"""

from __future__ import annotations

import pandas as pd

from batchscale.analysis.figures.plots_cbs import CBS_FIGURE
from batchscale.analysis.pages.sections import (
    CONSOLE,
    HTML,
    MARKDOWN,
    PAGES,
    Figures,
    Notes,
    Paragraph,
    Section,
    Table,
)
from batchscale.analysis.statistics.critical_batch_sizes import CriticalBatchSizes, estimate_text
from batchscale.analysis.statistics.study_analysis import Analysis
from batchscale.analysis.statistics.training_cost import count_text
from batchscale.core.critical_batch_size import DEFINITIONS, SWEEP

TITLE = "Critical batch size: four definitions"
DOC = "docs/critical-batch-size.md"
INTRO = ("Papers mean different numbers by \"the critical batch size\" and rarely say which; on "
         "one curve they differ by 5x or more. Each row is one definition, with the interval "
         "its estimate has and the compute it spent; {doc} says how they relate. Goal: {goal} "
         "(validation).")
COLUMNS = ["symbol", "value [interval]", "compute spent", "definition"]


def b_star_line(others: str = DOC) -> str:
    """What a table's B* is, in its definition's one line, and where the other definitions
    of a critical batch size are (``others``)."""
    d = DEFINITIONS["b_star_fit"]
    return (f"{d.symbol}, the {d.label}: {d.definition}. The other definitions of a critical "
            f"batch size (20%-overhead, gradient noise scale, branched): {others}.")


def with_level(est) -> str:
    """``457 [248, 865] (95%)``; ``—`` alone."""
    text = estimate_text(est)
    return text if text == "—" else f"{text} ({est.level:.0%})"


def _spent(cbs: CriticalBatchSizes, est) -> str:
    examples, share = cbs.spent(est)
    sweep = est.definition.source == SWEEP
    whose = "the sweep's" if sweep else "the probe's"
    if examples is None:
        return f"{whose}: not recorded"
    text = f"{whose}: {count_text(int(examples))} examples"
    if sweep:
        return text
    return text + (f" ({share:.1%} of the sweep's)" if share is not None else "")


def cbs_table(cbs: CriticalBatchSizes) -> pd.DataFrame:
    """One row per definition, in ``DEFINITIONS`` order; one not measured says so."""
    rows = []
    for name, d in DEFINITIONS.items():
        est = cbs.get(name)
        if est is None:
            rows.append({"symbol": d.symbol, "value [interval]": "not measured",
                         "compute spent": "—", "definition": d.definition})
            continue
        rows.append({"symbol": d.symbol, "value [interval]": with_level(est),
                     "compute spent": _spent(cbs, est), "definition": d.definition})
    return pd.DataFrame(rows, columns=COLUMNS)


def prediction_lines(cbs: CriticalBatchSizes) -> list[str]:
    """Per probe estimate: predicted / fitted, and whether B* lies in its interval."""
    b_star, lines = cbs.get("b_star_fit"), []
    for p in cbs.predictions:
        est = cbs.get(p.name)
        symbol = DEFINITIONS[p.name].symbol
        head = f"{symbol} predicted before the sweep: {with_level(est)}"
        if b_star is None:
            lines.append(f"{head}; no fitted B* to compare it with")
            continue
        line = f"{head}; fitted B*: {with_level(b_star)}"
        if p.ratio is None:
            why = f" ({b_star.note})" if b_star.note else ""
            lines.append(f"{line}; no ratio: the fit bounds B* on one side only or not at "
                         f"all{why}")
            continue
        line += f"; predicted / fitted = {symbol}/B* = {p.ratio:.3g}"
        if p.inside is not None:
            line += (f"; B* {'inside' if p.inside else 'outside'} {symbol}'s interval")
        lines.append(line)
    return lines


def _console(cbs: CriticalBatchSizes) -> list[str]:
    """A line per definition, for a terminal: ``B* = 457 [248, 865] (95%); the sweep's:
    1.2M examples — B* of S(B) = ...``."""
    out = []
    for name, row in zip(DEFINITIONS, cbs_table(cbs).itertuples(index=False)):
        spent = "" if row[2] == "—" else f"; {row[2]}"
        equals = " " if row[1][:1] in "≥≤" else " = "  # B* ≥ 715, not B* = ≥ 715
        out.append(f"  {row[0]}{equals}{row[1]}{spent} — {DEFINITIONS[name].definition}")
    return out


def cbs_section(cbs: CriticalBatchSizes | None, figures=()) -> Section | None:
    """The section (None: nothing to show). ``figures``: (name, SVG, caption) for the page."""
    if cbs is None:
        return None
    notes = [f"{DEFINITIONS[n].symbol}: {e.note}" for n in DEFINITIONS
             for e in [cbs.get(n)] if e is not None and e.note]
    missing = [f"{DEFINITIONS[n].symbol}: {why}" for n, why in cbs.missing.items()]
    return Section("critical-batch-size", TITLE, [
        Paragraph(INTRO.format(doc=DOC, goal=cbs.goal), note=True, media=PAGES),
        Table(cbs_table(cbs), COLUMNS, media=PAGES),
        Paragraph(f"critical batch size, by definition (goal {cbs.goal}, validation; {DOC}):",
                  media=(CONSOLE,)),
        Paragraph("\n".join(_console(cbs)), media=(CONSOLE,)),
        *(Paragraph(line) for line in prediction_lines(cbs)),
        Notes(missing), Notes(notes, media=PAGES),
        *([Figures(list(figures), media=(HTML,))] if figures else []),
        *([Figures(list(figures), media=(MARKDOWN,))] if figures else [])],
        heading_media=PAGES)


def critical_batch_size_section(analysis: Analysis) -> Section | None:
    """The report's section, from ``Analysis.critical_batch_sizes``."""
    figures = [(CBS_FIGURE, *analysis.figures[CBS_FIGURE])] if CBS_FIGURE in analysis.figures else []
    return cbs_section(analysis.critical_batch_sizes, figures)
