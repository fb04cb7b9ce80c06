"""The report's sections on how the study was run: its stopping protocol and search rounds.

Sections (``sections.Section``) of a ``study_analysis.Analysis``: "Early stopping"
(what each steps table is based on, ``censoring_notes``), "Search rounds" (per batch size
and round, ``search_rounds.rounds_table``, and whether each batch size has the
non-divergent trials its spec wants) and the methods' paragraph on the protocol with the
trained steps against what ``full`` would have trained (``training_cost``).
"""

from __future__ import annotations

from batchscale.analysis.pages.sections import Notes, Section, Table, Warnings
from batchscale.analysis.reading.censoring import early_stopping
from batchscale.analysis.statistics.study_analysis import Analysis
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


def protocol_methods(analysis: Analysis) -> str:
    """The methods' paragraph: the protocol, what it censors, what it trained."""
    rules = " ".join(f"Protocol {p.name}: {p.method}" for p in analysis.protocol)
    text = rules + (f" {CENSORING_METHOD}" if early_stopping(analysis.protocol) else "")
    cost = cost_sentence(analysis.cost)
    return f"{text} {cost}".strip()


def early_stopping_section(analysis: Analysis) -> Section | None:
    """"Early stopping": what each steps table is based on (none: nothing stopped early)."""
    if not analysis.censoring:
        return None
    return Section("early-stopping", "Early stopping", [Warnings(analysis.censoring)])


def rounds_section(analysis: Analysis) -> Section | None:
    """"Search rounds": one row per batch size and round, then the notes."""
    table = analysis.rounds
    if table is None or table.empty:
        return None
    shown = table.astype(object).where(table.notna(), None)
    return Section("search-rounds", "Search rounds",
                   [Table(shown, ROUND_PAGE_COLUMNS), Notes(analysis.round_notes)])
