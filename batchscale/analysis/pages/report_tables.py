"""Two of the report's tables in the shape a reader scans: every trial, and budgets wide.

``trials_table``: one row per trial of the study (every status), with its metaparameters,
the steps it trained, the first step at which it beat the first goal on the validation
metric (blank: never, or unknown when ``censored``), why it stopped and whether early
stopping censored it; report.html shows it sortable, the report writes it as trials.csv.

``budgets_wide``: the best validation metric under each step and example budget
(Figure 11), one row per batch size and one column per budget, where ``Analysis.budgets``
and budgets.csv keep the long form (one row per budget and batch size) that code reads.
"""

from __future__ import annotations

import math

import pandas as pd

from batchscale.analysis.pages.html import fmt
from batchscale.analysis.pages.sections import HTML, Paragraph, Section, SortableTable, Table
from batchscale.analysis.reading.study_reader import KEYS
from batchscale.analysis.statistics.study_analysis import Analysis

TRIALS_FILE = "trials.csv"
FIRST = ("learning_rate", "momentum")  # then the other metaparameters, by name


def trials_table(analysis: Analysis) -> pd.DataFrame:
    """batch_size, trial_id, status, the metaparameters, steps_trained, ``first step
    <goal>`` (NaN: not reached or unknown), stop_reason, censored ("yes" or "")."""
    study = analysis.study
    goal = study.goals[0].label
    names = [n for n in FIRST if n in study.metaparameters]
    names += sorted(n for n in study.metaparameters if n not in FIRST)
    crossing = f"first step {goal}"
    table = study.trials[[*KEYS, "status", *names]].copy()
    table["steps_trained"] = pd.to_numeric(study.trials["steps"], errors="coerce")
    hits = analysis.goal_steps
    hits = hits[(hits["goal"] == goal) & (hits["split"] == "val")]
    hits = hits[[*KEYS, "step", "stop_reason", "censored"]].rename(columns={"step": crossing})
    table = table.merge(hits, on=KEYS, how="left")
    for column in ("steps_trained", crossing):  # whole steps; blank where there is none
        table[column] = pd.to_numeric(table[column], errors="coerce").round().astype("Int64")
    table["stop_reason"] = table["stop_reason"].fillna("").astype(str)
    table["censored"] = table["censored"].eq(True).map({True: "yes", False: ""})
    return table.sort_values(KEYS, ignore_index=True)


def budget_label(kind: str, budget: int, train_examples: int | None) -> str:
    """``≤ 1,024 steps`` / ``≤ 16,384 examples (4.1 epochs)``."""
    text = f"≤ {int(budget):,} {kind}"
    if kind == "examples" and train_examples:
        text += f" ({budget / train_examples:.2g} epochs)"
    return text


def budgets_wide(budgets: pd.DataFrame, train_examples: int | None = None) -> pd.DataFrame:
    """batch_size, then one column per budget (steps first, each kind ascending): the best
    value, ``(censored)`` where early stopping may hide a better one, ``—`` none."""
    if budgets is None or budgets.empty:
        return pd.DataFrame(columns=["batch_size"])
    order = {"steps": 0, "examples": 1}
    keys = sorted({(r.kind, int(r.budget)) for r in budgets.itertuples()},
                  key=lambda k: (order.get(k[0], 2), k[1]))
    out = pd.DataFrame({"batch_size": sorted({int(b) for b in budgets["batch_size"]})})
    for kind, budget in keys:
        rows = budgets[(budgets["kind"] == kind) & (budgets["budget"] == budget)]
        cells = {int(r.batch_size): _cell(r.best_value, bool(r.censored)) for r in rows.itertuples()}
        out[budget_label(kind, budget, train_examples)] = [cells.get(b, "—") for b in out["batch_size"]]
    return out


def _cell(value, censored: bool) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return fmt(float(value)) + (" (censored)" if censored else "")


def trials_section(analysis: Analysis) -> Section:
    """"All trials": the sortable table on the page, folded away when it is long; summary.md
    names trials.csv instead."""
    table = trials_table(analysis)
    return Section("trials", f"All trials ({len(table)})", [
        Paragraph(TRIALS_NOTE.format(goal=analysis.study.goals[0].label), note=True, media=(HTML,)),
        SortableTable(table, "trials-table", TRIALS_FILE, OPEN_UP_TO)], heading_media=(HTML,))


def budgets_section(analysis: Analysis) -> Section:
    """"Best validation metric under budgets", wide (Figure 11's numbers)."""
    wide = budgets_wide(analysis.budgets, analysis.study.train_examples)
    return Section("budgets", "Best validation metric under budgets",
                   [Table(wide), Paragraph(BUDGETS_NOTE, note=True)])


OPEN_UP_TO = 50  # trials shown unfolded; more start folded (<details>), the page stays short
TRIALS_NOTE = ("Every trial, whatever its status; click a column header to sort by it (again: "
               "the other way). first step: the first evaluation that beat {goal} on the "
               "validation metric (blank: never, or unknown where censored: early stopping "
               "ended the trial before it could). The same rows are in trials.csv.")
BUDGETS_NOTE = ("Per batch size, the best validation metric any counted trial reached within each "
                "budget of steps or of examples (Figure 11); (censored): a trial of that batch "
                "size stopped early inside the budget, so the true best may be better; "
                "budgets.csv has the same values in long form, with the trial and step.")
