"""The study report: every number and figure of the analysis, for one loaded workload.

``analyse`` computes (no writing) an ``Analysis``: steps to result for every goal on
validation and training metrics (Figures 1, 2, 12), the regime fit with bootstrap
intervals, best validation metric under step and example budgets (Figure 11), the optimal
metaparameters and the learning-rate x momentum scatter (Figures 8, 9, 13, 21, 22),
search-space edge warnings, per-batch-size trial counts, the per-trial goal table, the
files the reader could not use (``study.damaged``, ``study_files``) and, for our studies,
the trials the spec expects that are not finished (``completeness``).
``write_report`` puts it under one folder (local or gs://): report.html (self-contained;
the answer first, ``answer``, then a table of contents), summary.md, summary.json
(``report_summary``, which also gives the Kubeflow metrics), CSV tables (goal_steps.csv,
trials.csv, time_to_result.csv and step_times.csv among them) and the figures as SVG
files, none of them naming the local folder the study was read from (``locations``).
Time and cost to result (``time_to_result``) are of the first goal on the validation
metric, with step times from the trials and the study's probes (``step_times``); the
plan's predicted noise scale is set beside the fitted B* (``time_pages.predicted_noise_scale``).
Only those files are written; trials are never touched. ``report_study`` does both for
``batchscale report`` and the pipeline's aggregate step. A report for goals asked for
(``report --goal``) goes beside the study's own, in ``report/goal-<goals>/``
(``report_location``), never over it. A file or folder in the way of a report file
(``report/`` a file, ``report/summary.json`` a folder) is refused in one line naming it,
before anything is written: ``StoreDamaged`` for the study's report folder, ``InputError``
for an ``out`` folder given.
"""

from __future__ import annotations

import json
import os
import re

import pandas as pd

from batchscale.analysis.figures.plots_laws import LAWS_FIGURE, metaparameter_laws_plot
from batchscale.analysis.figures.plots_robustness import robustness_figures
from batchscale.analysis.figures.report_figures import report_figures, time_figures
from batchscale.analysis.pages.report_summary import kfp_metrics, plain, summary_json
from batchscale.analysis.pages.report_tables import TRIALS_FILE, trials_table
from batchscale.analysis.pages.time_pages import predicted_noise_scale
from batchscale.analysis.reading.censoring import stop_table, study_protocol, trial_censoring
from batchscale.analysis.reading.completeness import UnfinishedTrial, unfinished_trials
from batchscale.analysis.reading.locations import private_root, without_root
from batchscale.analysis.reading.study_files import damaged_trials
from batchscale.analysis.reading.study_reader import Study, load_study
from batchscale.analysis.statistics.censoring_notes import approximate_fit_note, censoring_notes
from batchscale.analysis.statistics.goal_steps import GOAL_STEPS_FILE, goal_steps_table
from batchscale.analysis.statistics.metaparameter_law_fits import LAWS_CAPTION, metaparameter_laws
from batchscale.analysis.statistics.metaparameters import edge_warnings, optimal_metaparameters, trial_counts
from batchscale.analysis.statistics.regimes import fit_regimes
from batchscale.analysis.statistics.robustness import ROBUSTNESS_FILE, all_robustness
from batchscale.analysis.statistics.search_rounds import (
    rounds_table,
    trial_cap_notes,
)
from batchscale.analysis.statistics.step_times import read_probes, read_study_plan, step_time_profile
from batchscale.analysis.statistics.steps import (
    all_steps_to_result,
    best_under_budget,
    crossings,
    default_budgets,
)
from batchscale.analysis.statistics.study_analysis import Analysis
from batchscale.analysis.statistics.time_to_result import spec_price, time_and_cost
from batchscale.analysis.statistics.training_cost import training_cost
from batchscale.core.errors import InputError, StoreDamaged
from batchscale.core.trial_state import continues
from batchscale.store.filesystem import open_root
from batchscale.store.layout import StudyStore

__all__ = ["REPORT_FILES", "Analysis", "analyse", "goal_folder", "kfp_metrics", "report_location",
           "report_study", "summary_json", "write_report"]

REPORT_FILES = ("report.html", "summary.md", "summary.json", "steps_to_result.csv",
                "budgets.csv", "metaparameters.csv", "trial_counts.csv", GOAL_STEPS_FILE,
                "time_to_result.csv", "step_times.csv", TRIALS_FILE, ROBUSTNESS_FILE)


def analyse(study: Study, step_budgets=None, example_budgets=None, resamples: int = 1000,
            seed: int = 0, price: float = 0.0, robustness_k: int = 3) -> Analysis:
    """Every table, fit, warning and figure of the report (see ``Analysis``). ``price``
    (> 0): USD per device-hour for cost to result, over the spec's and the price table's;
    ``robustness_k``: how many of the best trials the robustness section shows."""
    steps = all_steps_to_result(study)
    primary = study.goals[0]
    val = {g.label: steps[(steps["goal"] == g.label) & (steps["split"] == "val")] for g in study.goals}
    crossed = {g.label: crossings(study, g, "val") for g in study.goals}
    fits = {label: fit_regimes(table, resamples=resamples, seed=seed) for label, table in crossed.items()}
    reached = crossed[primary.label].assign(reached=lambda t: t["step"].notna())
    trials = study.trials.merge(reached[["batch_size", "trial_id", "reached"]],
                                on=["batch_size", "trial_id"], how="left")
    trials["reached"] = trials["reached"].astype("boolean").fillna(False).astype(bool)
    stops = stop_table(study)
    censored = trial_censoring(study, primary, "val", stops)[["batch_size", "trial_id", "censored"]]
    trials = trials.merge(censored.rename(columns={"censored": "stopped_early"}),
                          on=["batch_size", "trial_id"], how="left")
    trials["stopped_early"] = trials["stopped_early"].astype("boolean").fillna(False).astype(bool)
    optimal = optimal_metaparameters(val[primary.label], study.optimizer)
    warnings = edge_warnings(trials, val[primary.label], study.search_space)
    counts = trial_counts(trials)
    budgets = pd.concat([
        best_under_budget(study, primary.metric, step_budgets or default_budgets(study, "steps"),
                          "steps", direction=primary.direction),
        best_under_budget(study, primary.metric,
                          example_budgets or default_budgets(study, "examples"), "examples",
                          direction=primary.direction)], ignore_index=True)
    notes = [f"{label}: {note}" for label, fit in fits.items() for note in _fit_notes(fit)]
    protocol = study_protocol(study)
    if any(p.fit_approximate for p in protocol) and any(fit.fitted for fit in fits.values()):
        notes.append(approximate_fit_note(protocol))
    figures = report_figures(study, steps, val, fits, budgets, optimal, trials, protocol)
    time_cost = time_and_cost(val[primary.label], crossed[primary.label],
                              step_time_profile(study.metadata, read_probes(study)),
                              fits[primary.label], spec_price(study), price, resamples, seed)
    figures.update(time_figures(time_cost, study.name))
    robust = all_robustness(study, robustness_k)
    figures.update(robustness_figures(robust[robust["goal"] == primary.label],
                                      f"{study.name}: {primary.label}"))
    laws = metaparameter_laws(study, trials, crossed[primary.label], val[primary.label], warnings)
    figures[LAWS_FIGURE] = (metaparameter_laws_plot(laws, f"{study.name}: {primary.label}"),
                            LAWS_CAPTION)
    return Analysis(study=study, steps=steps, fits=fits, optimal=optimal, warnings=warnings,
                    counts=counts, budgets=budgets, trials=trials, notes=notes, figures=figures,
                    goal_steps=goal_steps_table(study), unfinished=_unfinished(study),
                    protocol=protocol, censoring=censoring_notes(study, steps),
                    rounds=rounds_table(study, crossed[primary.label]),
                    round_notes=trial_cap_notes(study), cost=training_cost(study),
                    time_cost=time_cost, predicted_noise_scale=predicted_noise_scale(
                        read_study_plan(study), fits[primary.label]),
                    robustness=robust, robustness_k=robustness_k, laws=laws)


def _unfinished(study: Study) -> list[UnfinishedTrial]:
    """Our study's unfinished trials, read from its store; the statuses the reader already
    read are not read again."""
    if study.spec is None:
        return []
    known = {}
    for meta in study.metadata.to_dict("records"):
        key = (int(meta["batch_size"]), int(meta["trial_id"]))
        budget = study.spec.max_steps.get(key[0], 0)
        # stopped at a budget since raised: unfinished, it continues from its checkpoint
        known[key] = "INCOMPLETE" if continues(meta, budget) else str(meta["status"])
    return unfinished_trials(study.spec, StudyStore(study.spec.store), known,
                             left_out=damaged_trials(study.damaged))



def _fit_notes(fit) -> list[str]:
    return list(fit.notes) if fit.fitted else [f"no regime fit: {fit.reason}"]


def report_location(study: Study, asked: bool = False) -> str:
    """Where a study's report goes by default: ``<study>/report`` in its store (ours) or
    ``<workload>/report`` beside the batch-size folders (the paper's layout); with goals
    ``asked`` for (``report --goal``), ``goal_folder`` of the study's goals inside it, so
    that the study's own report is never overwritten by another goal's."""
    if study.spec is not None:
        base = f"{study.spec.store.rstrip('/')}/{study.spec.name}/report"
    else:
        base = f"{study.location.rstrip('/')}/report"
    return f"{base}/{goal_folder(study.goals)}" if asked else base


def goal_folder(goals) -> str:
    """``goal-<label>[+<label>...]``, each goal's label with ``<`` as ``-below-`` and ``>``
    as ``-above-``, other characters a file name should not hold as ``-``:
    ``classification_error<0.3`` -> ``goal-classification_error-below-0.3``."""
    labels = [str(getattr(g, "label", g)).replace("<", "-below-").replace(">", "-above-")
              for g in goals]
    return "goal-" + "+".join(re.sub(r"[^A-Za-z0-9._-]+", "-", label) for label in labels)


def write_report(analysis: Analysis, out: str | None = None, asked: bool = False) -> dict:
    """Write the report files under ``out`` (default ``report_location``, ``asked``: for
    goals asked for); returns their URLs (html, markdown, goal_steps, folder) and, under
    "pages", the HTML and Markdown texts. Neither those nor summary.json name the local
    folder the study was read from (``locations``)."""
    fs = open_root(out or report_location(analysis.study, asked))
    try:
        return _write_files(analysis, fs)
    except (FileExistsError, NotADirectoryError, IsADirectoryError) as err:
        raise _in_the_way(err, given=out is not None) from None


def check_report_folder(location: str, given: bool = False) -> None:
    """Refuse, before the analysis, a local report folder that a file stands in the way of
    (the folder or one above it a file, a report file's name a folder); ``write_report``
    refuses what appears later the same way."""
    if "://" in location:
        return
    folder = os.path.abspath(os.path.expanduser(location))
    above = folder
    while not os.path.lexists(above) and os.path.dirname(above) != above:
        above = os.path.dirname(above)
    if not os.path.isdir(above):
        raise _in_the_way(above, given)
    for name in REPORT_FILES:
        if os.path.isdir(os.path.join(folder, name)):
            raise _in_the_way(os.path.join(folder, name), given)


def _in_the_way(blocked: OSError | str, given: bool) -> ValueError:
    """A file where the report needs a folder, or a folder where it writes a file: one line
    naming it (summary.json, the first file written, fails before any other is written)."""
    path = blocked if isinstance(blocked, str) else os.fsdecode(blocked.filename2 or blocked.filename or "")
    while path and not os.path.lexists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    what = ("is a folder where the report writes a file" if os.path.isdir(path)
            else "is a file where the report needs a folder")
    if given:
        return InputError(f"--out: {path} {what}; allowed: a folder, or a path that does not exist")
    return StoreDamaged(f"{path} {what}; move it away or delete it, then run the same "
                        "command again (the report is written anew from the trials)")


def _write_files(analysis: Analysis, fs) -> dict:
    from batchscale.analysis.pages.report_pages import report_html, report_markdown

    root = private_root(analysis.study)
    doc = summary_json(analysis)
    fs.write_text("summary.json", without_root(json.dumps(plain(doc), indent=2, allow_nan=False),
                                               root))
    fs.write_text("steps_to_result.csv", analysis.steps.to_csv(index=False))
    fs.write_text("budgets.csv", analysis.budgets.to_csv(index=False))
    fs.write_text("metaparameters.csv", analysis.optimal.to_csv(index=False))
    fs.write_text("trial_counts.csv", analysis.counts.to_csv(index=False))
    fs.write_text(GOAL_STEPS_FILE, analysis.goal_steps.to_csv(index=False))
    fs.write_text(TRIALS_FILE, trials_table(analysis).to_csv(index=False))
    fs.write_text(ROBUSTNESS_FILE, analysis.robustness.to_csv(index=False))
    if analysis.time_cost is not None:
        fs.write_text("time_to_result.csv", analysis.time_cost.table.to_csv(index=False))
        fs.write_text("step_times.csv", analysis.time_cost.profile.table.to_csv(index=False))
    for name, (png, _caption) in analysis.figures.items():
        fs.write_bytes(name, png)
    page = without_root(report_html(analysis), root)
    markdown = without_root(report_markdown(analysis), root)
    fs.write_text("summary.md", markdown)
    fs.write_text("report.html", page)
    return {"html": fs.url("report.html"), "markdown": fs.url("summary.md"),
            "goal_steps": fs.url(GOAL_STEPS_FILE), "folder": fs.url(""),
            "pages": {"html": page, "markdown": markdown}}


def report_study(location: str, out: str | None = None, goals=None, num_trials: int | None = None,
                 statuses: tuple[str, ...] = ("COMPLETE",), step_budgets=None, example_budgets=None,
                 resamples: int = 1000, seed: int = 0,
                 price: float = 0.0, robustness_k: int = 3) -> tuple[Analysis, dict]:
    """Load the study at ``location``, analyse it and write its report; returns (analysis,
    written URLs). What ``batchscale report`` and the pipeline's aggregate step run;
    ``goals`` given, the report goes beside the study's own (``report_location``).
    ``price`` (> 0): USD per device-hour for cost to result (0: the spec's, else the table's);
    ``robustness_k``: the k-th best trials the robustness section shows (1 .. k)."""
    study = load_study(location, goals=goals, num_trials=num_trials, statuses=statuses)
    check_report_folder(out or report_location(study, bool(goals)), given=out is not None)
    analysis = analyse(study, step_budgets, example_budgets, resamples=resamples, seed=seed,
                       price=price, robustness_k=robustness_k)
    return analysis, write_report(analysis, out, asked=bool(goals))


