"""The report's "Robustness" section: next to the best trial, the k-th best trial's steps to
result per batch size and the share of trials that reached the goal, with its interval
(``statistics.robustness``; the paper's §5.1 asks how robustly a batch size reaches it).
Bounds that early stopping leaves are written as bounds (``≤``, ``≥``, "stopped early").
"""

from __future__ import annotations

import pandas as pd

from batchscale.analysis.figures.plots_robustness import ROBUSTNESS_FIGURE, ordinal
from batchscale.analysis.pages.sections import PAGES, Figures, Notes, Paragraph, Section, Subheading, Table
from batchscale.analysis.reading.censoring import protocol_label
from batchscale.analysis.statistics.robustness import (
    LOWER_BOUND,
    ROBUSTNESS_FILE,
    censored_column,
    share_text,
    step_text,
    steps_column,
)
from batchscale.analysis.statistics.study_analysis import Analysis

TITLE = "Robustness"
EXPLAINED = (
    "Steps to result is the best trial's. Beside it, per batch size: the 2nd, 3rd, ... best "
    "trial's first step beating the goal (ties count once each; — where fewer trials reached) "
    "and the share of trials, diverged ones included, that beat the goal at all, with its "
    "Wilson 95% interval (a share of a few trials is rough). A wide gap between the best and "
    "the k-th best, or a small share, says the best trial was a lucky one. {file} has every "
    "column, the share among complete trials too.")
CENSORED = (
    "Early stopping ended some trials before they beat the goal ({protocol}): they might have "
    "beaten it later, so a share marked ≥ is a lower bound (its interval reaches up to every "
    "such trial reaching), a step marked ≤ an upper bound (a trial stopped before it), and "
    "\"stopped early\" is unknown rather than not reached.")


def shown_table(table: pd.DataFrame, k: int) -> pd.DataFrame:
    """One goal's ``robustness_table`` as the report shows it: counts, the share with its
    interval, and each k-th best step as text (``robustness.step_text``)."""
    rows = []
    for _, row in table.iterrows():
        shown = {"batch_size": int(row["batch_size"]), "trials": int(row["trials"]),
                 "reached": int(row["reached"]), "share reached [95%]": share_text(row)}
        for j in range(1, k + 1):
            shown[ordinal(j)] = step_text(row.get(steps_column(j)), row.get(censored_column(j), ""))
        rows.append(shown)
    return pd.DataFrame(rows)


def robustness_section(analysis: Analysis) -> Section | None:
    """"Robustness": per goal (validation) the table, the figure of the first goal
    (report.html; summary.md names it) and, under early stopping, what the bounds mean
    (None: nothing computed)."""
    table, k = analysis.robustness, analysis.robustness_k
    if table is None or table.empty:
        return None
    goals = list(dict.fromkeys(table["goal"]))
    blocks = [Paragraph(EXPLAINED.format(file=ROBUSTNESS_FILE), note=True)]
    for goal in goals:
        rows = table[table["goal"] == goal]
        if len(goals) > 1:
            blocks.append(Subheading(f"goal {goal}"))
        blocks.append(Table(shown_table(rows, k)))
    if (table["share_censored"] == LOWER_BOUND).any():
        blocks.append(Notes([CENSORED.format(protocol=f"protocol {protocol_label(analysis.protocol)}")]))
    figure = analysis.figures.get(ROBUSTNESS_FIGURE)
    if figure is not None:
        blocks.append(Figures([(ROBUSTNESS_FIGURE, figure[0], figure[1])], media=PAGES))
    return Section("robustness", TITLE, blocks)
