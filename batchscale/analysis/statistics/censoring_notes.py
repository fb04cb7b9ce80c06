"""The report's words on early stopping: what each steps-to-result table is based on.

A table of steps to result under an early-stopping protocol must never read "not
reached" where the truth is "unknown". For every goal and split whose numbers early
stopping could have touched (a goal the study's goals do not imply, the training split,
or any batch size ``censoring.qualifiers`` marks), one note says, per batch size, whether
the value is exact, an upper bound (and how many trials stopped before it) or unknown
(stopped early). The same notes go to report.html, summary.md, summary.json
(``censoring``) and the console.
"""

from __future__ import annotations

import pandas as pd

from batchscale.analysis.reading.censoring import (
    STOPPED_EARLY,
    UPPER_BOUND,
    implied,
    protocol_label,
    stop_table,
    stopping_goals,
    study_protocol,
)
from batchscale.core.protocols import PAPER, StoppingProtocol, all_protocols, early_stop_reasons

SPLIT_NAMES = {"val": "validation", "train": "training"}


def _sizes(rows: pd.DataFrame) -> str:
    return ", ".join(str(int(b)) for b in rows["batch_size"])


def _trials(count: int) -> str:
    return f"{count} trial{'s' if count != 1 else ''}"


def qualified_text(group: pd.DataFrame) -> str:
    """"exact at batch size(s) ...; an upper bound at ...; unknown (stopped early) at ..."
    for one goal and split's rows of a steps table (with ``censored``, ``stopped_early``);
    "" when nothing was reached and nothing stopped early."""
    marks = group["censored"].fillna("")
    exact = group[(marks == "") & group["steps_to_result"].notna()]
    upper = group[marks == UPPER_BOUND]
    unknown = group[marks == STOPPED_EARLY]
    parts = []
    if len(exact):
        parts.append(f"exact at batch size(s) {_sizes(exact)} (every trial that stopped early "
                     "stopped at or after the value found)")
    if len(upper):
        each = ", ".join(f"{int(r.batch_size)} ({_trials(int(r.stopped_early))} stopped early "
                         "before it)" for r in upper.itertuples())
        parts.append(f"an upper bound at {each}")
    if len(unknown):
        parts.append(f"unknown (stopped early) at {_sizes(unknown)}: no trial beat the goal "
                     "and some stopped before they could, which is not 'not reached'")
    return "; ".join(parts)


def censoring_notes(study, steps: pd.DataFrame) -> list[str]:
    """One note per goal and split of ``steps`` (``all_steps_to_result``'s table) that
    early stopping could have touched; [] when no trial stopped early."""
    reasons = stop_table(study)["stop_reason"]
    early = int(reasons.isin(early_stop_reasons()).sum())
    if not early or "censored" not in steps:
        return []
    protocol, own = protocol_label(study_protocol(study)), stopping_goals(study)
    goals = {g.label: g for g in study.goals}
    own_text = ", ".join(g.label for g in own) or "none recorded"
    notes = []
    for (label, split), group in steps.groupby(["goal", "split"], sort=False):
        goal = goals.get(label)
        marks = group["censored"].fillna("")
        if goal is not None and implied(goal, own, split) and not (marks != "").any():
            continue
        if split != "val":
            basis = (f"measured on the {SPLIT_NAMES.get(split, split)} metric, which the early "
                     f"stop (protocol {protocol}, goals {own_text} on validation) does not watch")
        elif goal is not None and not implied(goal, own, split):
            basis = (f"not implied by the goals the trials stopped at ({own_text}, protocol "
                     f"{protocol}); {early} of {len(reasons)} trials stopped early")
        else:
            basis = f"{early} of {len(reasons)} trials stopped early (protocol {protocol})"
        text = qualified_text(group) or ("not reached at any batch size (every trial that "
                                         "could have reached it ran to its budget or diverged)")
        note = f"{label} ({SPLIT_NAMES.get(split, split)}): {basis}. Steps to result is {text}."
        if (marks == UPPER_BOUND).any() and split == "val":
            note += " The regime fit uses these upper bounds."
        notes.append(note)
    return notes


# Measured on the quickstart (benchmarks/README.md, stopping protocols): the same steps to
# result under goal and race, B* 457 [248, 865] under goal and full, 413 [283, 777] under race.
def approximate_fit_note(found: tuple[StoppingProtocol, ...]) -> str:
    """The regime-fit note for the protocols whose fit is approximate (``fit_approximate``:
    they stopped trials other than the best before those crossed), naming a protocol of
    the same family whose fit is exact, when there is one."""
    approximate = [p for p in found if p.fit_approximate]
    names = "+".join(p.name for p in approximate)
    exact = [q.name for q in all_protocols() if q.early_stopping and not q.fit_approximate
             and any(p.may_switch_to(q) for p in approximate)]
    instead = f"; protocol {exact[0]} gives the fit that {PAPER.name} would" if exact else ""
    return (f"protocol {names}: steps to result is exact, but the regime fit's intervals and its "
            f"best-of-n correction also use the crossings of trials other than the best, which "
            f"{names} stopped before they crossed, so S_min, B* and their intervals are "
            f"approximate{instead}")
