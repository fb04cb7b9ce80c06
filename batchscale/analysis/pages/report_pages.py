"""The study report rendered for people: report.html, summary.md and the terminal's table.

Both pages are the same sections in the same order (``report_sections``, each defined
once and rendered by ``sections``): the answer first, then the intro and every section;
report.html adds a table of contents linking each heading.
"""

from __future__ import annotations

import pandas as pd

from batchscale.analysis.pages import html as h
from batchscale.analysis.pages.answer_box import answer_section
from batchscale.analysis.pages.law_pages import laws_section
from batchscale.analysis.pages.pack_mode_page import pack_mode_section
from batchscale.analysis.pages.protocol_pages import early_stopping_section, rounds_section
from batchscale.analysis.pages.report_sections import (
    STEP_COLUMNS_LEFT_OUT_FIRST,
    counts_section,
    damaged_section,
    figures_section,
    intro_section,
    metaparameters_section,
    methods_section,
    regimes_section,
    search_space_section,
    step_columns,
    steps_sections,
    unfinished_section,
)
from batchscale.analysis.pages.report_tables import budgets_section, trials_section
from batchscale.analysis.pages.robustness_page import robustness_section
from batchscale.analysis.pages.sections import Section, Table, render_console, render_html, render_markdown
from batchscale.analysis.pages.time_pages import time_section
from batchscale.analysis.statistics.study_analysis import Analysis


def report_sections(analysis: Analysis) -> list[Section]:
    """Every section of the report below the answer, in reading order (None: left out)."""
    found = [intro_section(analysis), damaged_section(analysis), unfinished_section(analysis),
             early_stopping_section(analysis), regimes_section(analysis),
             search_space_section(analysis), time_section(analysis),
             pack_mode_section(analysis), figures_section(analysis),
             *steps_sections(analysis), robustness_section(analysis), counts_section(analysis),
             rounds_section(analysis), metaparameters_section(analysis), laws_section(analysis),
             budgets_section(analysis),
             trials_section(analysis), methods_section(analysis)]
    return [s for s in found if s is not None]


def report_html(analysis: Analysis) -> str:
    """report.html: the answer first, then the contents, then every section (each ``<h2>``
    with an id, which the contents link to)."""
    body = "\n".join(piece for s in report_sections(analysis) for piece in render_html(s))
    top = [f"<h1>{h.esc(analysis.study.title)}</h1>", *render_html(answer_section(analysis.answer)),
           h.contents(body)]
    return h.page(f"batchscale: {analysis.study.name}", "\n".join([*top, body]))


def report_markdown(analysis: Analysis) -> str:
    """summary.md: the answer first, then the sections of report.html without its figures,
    its optimal metaparameters (metaparameters.csv) and its table of every trial (trials.csv)."""
    lines = [f"# {analysis.study.title}", "", *render_markdown(answer_section(analysis.answer))]
    lines += [line for s in report_sections(analysis) for line in render_markdown(s)]
    return "\n".join(lines)


def format_table(summary: pd.DataFrame, width: int | None = None, more: str = "") -> str:
    """A plain-text table per goal and split, for the terminal (a steps_to_result.csv
    written before a column existed shows without it), fitted to ``width`` characters
    (None: every column; ``more``: how to see the columns left out to fit)."""
    columns = step_columns(summary)
    if "censored" in summary:
        summary = summary.assign(censored=summary["censored"].fillna(""))
    return "\n".join(line for (goal, split), group in summary.groupby(["goal", "split"], sort=False)
                     for line in render_console(Section(None, f"goal {goal} ({split})", [
                         Table(group, columns, leave_out_first=STEP_COLUMNS_LEFT_OUT_FIRST)]),
                         width, more))
