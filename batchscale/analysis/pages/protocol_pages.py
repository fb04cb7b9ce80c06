"""The report's sections on how the study was run: its stopping protocol and search rounds.

Rendered from a ``report.Analysis`` (read only, like ``report_pages``): "Early stopping"
(what each steps table is based on, ``censoring_notes``), "Search rounds" (per batch size
and round, ``search_rounds.rounds_table``, and whether each batch size has the
non-divergent trials its spec wants) and the methods' paragraph on the protocol with the
trained steps against what ``full`` would have trained (``training_cost``).
"""

from __future__ import annotations

from batchscale.analysis.pages import html as h
from batchscale.analysis.reading.censoring import early_stopping
from batchscale.analysis.statistics.training_cost import cost_sentence

ROUND_PAGE_COLUMNS = ["batch_size", "round", "trial_ids", "non_divergent", "search_space",
                      "reason", "best_trial", "steps_to_result", "edge_warning"]

CENSORING_METHOD = (
    "Neither early stop changes steps to the study's goals, nor to a goal they imply (same "
    "metric, no stricter) on the validation metric. For any other goal or the training "
    "metric, a trial that stopped early without beating the goal is censored at its last "
    "step: steps to result is exact where every such trial stopped at or after the value "
    "found, an upper bound where some stopped before it, and unknown ('stopped early', not "
    "'not reached') where no trial beat the goal and some stopped early (the steps tables' "
    "censored column). A best value under a budget is censored when a trial of its batch "
    "size stopped early inside the budget (hollow in Figure 11).")


def protocol_methods(analysis) -> str:
    """The methods' paragraph: the protocol, what it censors, what it trained."""
    rules = " ".join(f"Protocol {p.name}: {p.method}" for p in analysis.protocol)
    text = rules + (f" {CENSORING_METHOD}" if early_stopping(analysis.protocol) else "")
    cost = cost_sentence(analysis.cost)
    return f"{text} {cost}".strip()


def early_stopping_html(analysis) -> list[str]:
    if not analysis.censoring:
        return []
    return ['<h2 id="early-stopping">Early stopping</h2>', h.warnings(analysis.censoring)]


def early_stopping_markdown(analysis) -> list[str]:
    if not analysis.censoring:
        return []
    return ["## Early stopping", "", *(f"- **{n}**" for n in analysis.censoring), ""]


def _rounds(analysis):
    table = analysis.rounds
    if table is None or table.empty:
        return None
    return table.astype(object).where(table.notna(), None)


def rounds_html(analysis) -> list[str]:
    """The "Search rounds" section: one row per batch size and round, then the notes."""
    table = _rounds(analysis)
    if table is None:
        return []
    return ['<h2 id="search-rounds">Search rounds</h2>', h.table(table, ROUND_PAGE_COLUMNS),
            *(f'<p class="note">{h.esc(n)}</p>' for n in analysis.round_notes)]


def rounds_markdown(analysis) -> list[str]:
    table = _rounds(analysis)
    if table is None:
        return []
    return ["## Search rounds", "", *h.markdown_table(table, ROUND_PAGE_COLUMNS), "",
            *(f"- {n}" for n in analysis.round_notes), *([""] if analysis.round_notes else [])]
