"""Compare steps to result across studies: the paper's Figures 3–6 (and 15–17) for any studies.

``compare_studies`` loads each location (one of our studies, or a workload of the paper's
released database; see ``study_reader.load_study``), computes steps to result for one goal
per study (the same goal string for all, or each study's first goal) and returns a
``Comparison``:

- a long table: one row per study and batch size (study, goal, split, batch_size, trials,
  reached, steps_to_result, examples_to_result, best_trial, and
  ``normalized_steps_to_result`` when ``normalize_at`` is given);
- overlay figures: steps to result (normalised at ``normalize_at`` when given, as in
  Figures 3–6, plus the raw curves as in Figures 15–17) and examples to result;
- notes: curves left out of the normalised comparison, studies without the goal's metric,
  and where a study's early stopping makes a value an upper bound or unknown
  (``censoring``; a goal no trial of a study could show is refused by ``load_study``).

How it is shown and written (terminal text, compare.html, compare.md, compare.csv,
compare.json) is in ``compare_pages``; ``format_comparison`` and ``write_comparison`` are
importable from here too, as the CLI does.
"""

from __future__ import annotations

import math

import pandas as pd

from batchscale.analysis.figures.plots import EXAMPLES, STEPS, normalize_curves, steps_to_result_plot
from batchscale.analysis.pages.compare_pages import (
    FIGURE_EXAMPLES,
    FIGURE_NORMALIZED,
    FIGURE_STEPS,
    NORMALIZED,
    SPLIT_NAMES,
    comparison_json,
    format_comparison,
    write_comparison,
)
from batchscale.analysis.reading.censoring import protocol_label, study_protocol
from batchscale.analysis.reading.locations import private_root
from batchscale.analysis.reading.study_reader import load_study
from batchscale.analysis.statistics.censoring_notes import qualified_text
from batchscale.analysis.statistics.comparison import ComparedStudy, Comparison
from batchscale.analysis.statistics.regimes import fit_regimes
from batchscale.analysis.statistics.steps import SPLITS, crossings, goal_column, steps_to_result
from batchscale.core.goals import parse_goal
from batchscale.core.spec import SpecError

__all__ = ["ComparedStudy", "Comparison", "compare_studies", "comparison_json", "disambiguate",
           "format_comparison", "write_comparison", "NORMALIZED", "TABLE_COLUMNS"]

TABLE_COLUMNS = ["study", "goal", "split", "batch_size", "trials", "reached", STEPS, EXAMPLES,
                 "best_trial"]


def compare_studies(locations, goal: str | None = None, split: str | None = None,
                    normalize_at: int | None = None, num_trials: int | None = None,
                    fit: bool = False, goals: list[str] | None = None) -> Comparison:
    """Load and compare the studies at ``locations`` (local paths or gs:// URLs).

    ``goal``: a goal string (``batchscale.core.goals``: ``[SPLIT/]METRIC<VALUE`` or
    ``[SPLIT/]METRIC>VALUE``) used for every study; default: each study's first goal (its
    spec's, or the paper's Figure 1 goal). ``split``: the metric's split ("val" or "train";
    default: the goal's prefix, else "val"). ``normalize_at``: a batch size
    to normalise steps to result at (at least one study must have measured it).
    ``num_trials``: the first N trials per batch size (``load_study``). ``fit``: also fit
    S(B) = S_min (1 + B*/B) per study (``regimes.fit_regimes``) and draw it with its band.
    ``goals``: one goal per location instead of ``goal`` (a goal ladder: the same study at
    each goal); a location given more than once is then named by its goal.
    """
    locations = [str(loc) for loc in (locations or [])]
    if not locations:
        raise SpecError("compare: give at least one study location (STORE/STUDY or a folder of "
                        "the paper's database)")
    if goals is not None:
        if goal is not None or len(goals) != len(locations):
            raise SpecError("compare: give either one goal or one goal per location")
    prefix = parse_goal(goal)[1] if goal else None
    if split is not None and prefix is not None and split != prefix:
        raise SpecError(f"split: {split!r} contradicts the goal's prefix {prefix + '/'!r}; give one")
    split = split or prefix or "val"
    if split not in SPLITS:
        raise SpecError(f"split: {split!r} must be one of {', '.join(SPLITS)}")
    if normalize_at is not None and (isinstance(normalize_at, bool) or not isinstance(normalize_at, int)
                                     or normalize_at <= 0):
        raise SpecError(f"normalize_at: {normalize_at!r} must be a positive integer batch size")
    per_study = goals if goals is not None else [goal] * len(locations)
    studies = [load_study(loc, goals=[g] if g else None, num_trials=num_trials)
               for loc, g in zip(locations, per_study)]
    measured = sorted({b for s in studies for b in s.batch_sizes})
    if normalize_at is not None and normalize_at not in measured:
        raise SpecError(f"normalize_at: batch size {normalize_at} was not measured by any study "
                        f"(measured: {', '.join(map(str, measured)) or 'none'})")

    names = [s.name if goals is None or locations.count(loc) < 2 else s.goals[0].label
             for s, loc in zip(studies, locations)]
    names = disambiguate(names, [s.location for s in studies])
    entries, tables, curves, notes, fits = [], [], {}, [], {}
    for study, name in zip(studies, names):
        study_goal = study.goals[0]  # the given goal, checked against this study's data
        label = f"{name} ({study_goal.label})"
        table = steps_to_result(study, study_goal, split)
        table.insert(0, "study", name)
        tables.append(table)
        curves[label] = table
        if goal_column(study_goal, split) not in study.measurements.columns:
            notes.append(f"{label}: no {goal_column(study_goal, split)} column in its measurements, "
                         "so it never reaches the goal")
        elif table[STEPS].isna().all() and not (table["censored"] != "").any():
            notes.append(f"{label}: no batch size reached the goal")
        if (table["censored"] != "").any():  # early stopping hid some crossings
            protocol = protocol_label(study_protocol(study))
            notes.append(f"{label}: early stopping (protocol {protocol}): steps to "
                         f"result is {qualified_text(table)}")
        notes += [f"{label}: damaged file left out: {d.message}" for d in study.damaged]
        entry = ComparedStudy(label=label, study=name, name=study.name, location=study.location,
                              title=study.title, goal=study_goal.label, batch_sizes=study.batch_sizes,
                              private_root=private_root(study))
        if fit:
            entry.fit = fits[label] = fit_regimes(crossings(study, study_goal, split))
            if not entry.fit.fitted:
                notes.append(f"{label}: no regime fit: {entry.fit.reason}")
        entries.append(entry)

    table = pd.concat(tables, ignore_index=True)[TABLE_COLUMNS]
    normalized = normalize_curves(curves, normalize_at, STEPS)
    if normalize_at is not None:
        table[NORMALIZED] = math.nan
        for label, frame in normalized.curves.items():
            study = next(e.study for e in entries if e.label == label)
            values = frame.set_index("batch_size")[NORMALIZED]
            rows = table["study"] == study
            table.loc[rows, NORMALIZED] = table.loc[rows, "batch_size"].map(values).to_numpy()
        notes = normalized.notes + notes
    for entry in entries:
        entry.normalized = normalize_at is not None and entry.label in normalized.curves
    value = NORMALIZED if normalize_at is not None else STEPS
    wide = pd.DataFrame(index=pd.Index(measured, name="batch_size"))
    for entry in entries:
        rows = table[table["study"] == entry.study].set_index("batch_size")[value]
        wide[entry.label] = rows.reindex(measured).astype(float)

    return Comparison(goal=studies[0].goals[0].label if goal else None, split=split,
                      normalize_at=normalize_at, num_trials=num_trials, studies=entries,
                      table=table, wide=wide, figures=_figures(curves, entries, split, normalize_at, fits),
                      notes=notes, damaged=[d for s in studies for d in s.damaged], loaded=studies)


def _figures(curves, entries, split, normalize_at, fits) -> dict[str, bytes]:
    where = SPLIT_NAMES[split]
    goals = sorted({e.goal for e in entries})
    goal_text = f"{where} {goals[0]}" if len(goals) == 1 else f"each study's {where} goal"
    title = f"steps to result, {goal_text}"
    figures = {}
    if normalize_at is not None:
        figures[FIGURE_NORMALIZED] = steps_to_result_plot(
            curves, f"{title}, normalised at batch size {normalize_at}", fits=fits or None,
            normalize_at=normalize_at)
    figures[FIGURE_STEPS] = steps_to_result_plot(curves, title, fits=fits or None)
    figures[FIGURE_EXAMPLES] = steps_to_result_plot(
        curves, f"examples to result, {goal_text}", fits=fits or None, column=EXAMPLES)
    return figures


def disambiguate(names: list[str], locations: list[str]) -> list[str]:
    """Study names, made unique: a repeated name gets the part of its location that differs
    from the others with that name (``name [a]``), or ``#k`` when even that is the same."""
    out = list(names)
    for name in dict.fromkeys(names):
        idx = [i for i, n in enumerate(names) if n == name]
        if len(idx) < 2:
            continue
        parts = [locations[i].rstrip("/").split("/") for i in idx]
        shortest = min(len(p) for p in parts)
        pre = 0
        while pre < shortest and len({p[pre] for p in parts}) == 1:
            pre += 1
        suf = 0
        while suf < shortest - pre and len({p[len(p) - 1 - suf] for p in parts}) == 1:
            suf += 1
        middles = ["/".join(p[pre:len(p) - suf]) for p in parts]
        for k, (i, middle) in enumerate(zip(idx, middles)):
            unique = middle and middles.count(middle) == 1
            out[i] = f"{name} [{middle}]" if unique else f"{name} #{k + 1}"
    return out
