"""The study report: every number and figure of the analysis, for one loaded workload.

``analyse`` computes (no writing) an ``Analysis``: steps to result for every goal on
validation and training metrics (Figures 1, 2, 12), the regime fit with bootstrap
intervals, best validation metric under step and example budgets (Figure 11), the optimal
metaparameters and the learning-rate x momentum scatter (Figures 8, 9, 13, 21, 22),
search-space edge warnings, per-batch-size trial counts, the per-trial goal table, the
files the reader could not use (``study.damaged``, ``study_files``) and, for our studies,
the trials the spec expects that are not finished (``completeness``).
``write_report`` puts it under one folder (local or gs://): report.html (self-contained),
summary.md, summary.json, CSV tables (goal_steps.csv, time_to_result.csv and
step_times.csv among them) and the figures as SVG files. Time and cost to result
(``time_to_result``) are of the first goal on the validation metric, with step times from
the trials and the study's probes (``step_times``); the plan's predicted noise scale is
set beside the fitted B* (``time_pages.predicted_noise_scale``). Only those files are
written; trials are never touched. ``report_study`` does both
for ``batchscale report`` and the pipeline's aggregate step.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import pandas as pd

from batchscale.analysis.censoring import stop_table, study_protocol, trial_censoring
from batchscale.analysis.censoring_notes import censoring_notes
from batchscale.analysis.completeness import UnfinishedTrial, unfinished_trials
from batchscale.analysis.goal_steps import GOAL_STEPS_FILE, goal_steps_table
from batchscale.analysis.metaparameters import edge_warnings, optimal_metaparameters, trial_counts
from batchscale.analysis.regimes import RegimeFit, fit_regimes
from batchscale.analysis.report_figures import report_figures, time_figures
from batchscale.analysis.search_rounds import batch_rounds, planned_ids, rounds_table, trial_cap_notes
from batchscale.analysis.step_times import read_probes, read_study_plan, step_time_profile
from batchscale.analysis.steps import all_steps_to_result, best_under_budget, crossings, default_budgets
from batchscale.analysis.study_files import Damage, damaged_trials
from batchscale.analysis.study_reader import Study, load_study
from batchscale.analysis.time_pages import predicted_noise_scale
from batchscale.analysis.time_to_result import TimeCost, spec_price, time_and_cost
from batchscale.analysis.training_cost import training_cost
from batchscale.core.trial_state import continues
from batchscale.store.filesystem import open_root
from batchscale.store.layout import StudyStore

REPORT_FILES = ("report.html", "summary.md", "summary.json", "steps_to_result.csv",
                "budgets.csv", "metaparameters.csv", "trial_counts.csv", GOAL_STEPS_FILE,
                "time_to_result.csv", "step_times.csv")


@dataclass
class Analysis:
    """Everything the report shows, for one study (what ``analyse`` returns).

    ``steps``: steps to result per goal, split and batch size (``steps.SUMMARY_COLUMNS``);
    ``fits``: goal label -> regime fit on the validation metric; ``optimal``: the best
    trial's metaparameters per batch size with the scaling heuristics (first goal);
    ``warnings``: search-space edge warnings (dicts as summary.json holds them, each with a
    ``message``); ``counts``: trials per batch size; ``budgets``: best validation metric
    under step and example budgets (``censored``: early stopping may hide a better one);
    ``trials``: ``study.trials`` with ``reached`` and ``stopped_early`` flags (first goal,
    validation); ``notes``: caveats of the fits; ``figures``: file name -> (SVG, caption);
    ``goal_steps``: the per-trial goal table (``goal_steps.goal_steps_table``);
    ``unfinished``: the trials the study's spec expects that are missing or not finished
    (``completeness.unfinished_trials``; always empty without a spec: the paper's data);
    ``damaged``: the files the study reader could not use, each with what it left out.
    ``protocol``: the study's stopping protocol (``censoring.study_protocol``);
    ``censoring``: what each steps table is based on under it (``censoring_notes``);
    ``rounds``: per batch size and search round, what it searched and found
    (``search_rounds.rounds_table``), ``round_notes``: whether each batch size has the
    non-divergent trials the spec wants; ``cost``: trained steps and examples against what
    protocol full would have trained (``training_cost``). ``time_cost``: time and cost to
    result per batch size with the step-time profile and the fastest, cheapest and device
    limit (``time_to_result.TimeCost``, first goal, validation; None: not computed);
    ``predicted_noise_scale``: plan.json's B_simple beside the fitted B* (None: no plan).
    """

    study: Study
    steps: pd.DataFrame
    fits: dict[str, RegimeFit]
    optimal: pd.DataFrame
    warnings: list[dict]
    counts: pd.DataFrame
    budgets: pd.DataFrame
    trials: pd.DataFrame
    notes: list[str]
    figures: dict[str, tuple[bytes, str]]
    goal_steps: pd.DataFrame
    unfinished: list[UnfinishedTrial] = field(default_factory=list)
    protocol: str = "full"
    censoring: list[str] = field(default_factory=list)
    rounds: pd.DataFrame = field(default_factory=pd.DataFrame)
    round_notes: list[str] = field(default_factory=list)
    cost: dict = field(default_factory=dict)
    time_cost: TimeCost | None = None
    predicted_noise_scale: dict | None = None

    @property
    def damaged(self) -> list[Damage]:
        return self.study.damaged

    @property
    def expected_trials(self) -> int | None:
        """How many trials the study's spec and search rounds ask for (None without a
        spec): every id of each batch size's rounds, at least trials_per_batch_size."""
        spec = self.study.spec
        if spec is None:
            return None
        rounds = {b: batch_rounds(self.study.study_json.get(b) or {}, [], spec.trials_per_batch_size)
                  for b in spec.batch_sizes}
        return sum(len(planned_ids(r)) for r in rounds.values())


def analyse(study: Study, step_budgets=None, example_budgets=None, resamples: int = 1000,
            seed: int = 0, price: float = 0.0) -> Analysis:
    """Every table, fit, warning and figure of the report (see ``Analysis``). ``price``
    (> 0): USD per device-hour for cost to result, over the spec's and the price table's."""
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
    optimal = optimal_metaparameters(val[primary.label])
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
    if "race" in protocol and any(fit.fitted for fit in fits.values()):
        notes.append(RACE_FIT_NOTE)
    figures = report_figures(study, steps, val, fits, budgets, optimal, trials, protocol)
    time_cost = time_and_cost(val[primary.label], crossed[primary.label],
                              step_time_profile(study.metadata, read_probes(study)),
                              fits[primary.label], spec_price(study), price, resamples, seed)
    figures.update(time_figures(time_cost, study.name))
    return Analysis(study=study, steps=steps, fits=fits, optimal=optimal, warnings=warnings,
                    counts=counts, budgets=budgets, trials=trials, notes=notes, figures=figures,
                    goal_steps=goal_steps_table(study), unfinished=_unfinished(study),
                    protocol=protocol, censoring=censoring_notes(study, steps),
                    rounds=rounds_table(study, crossed[primary.label]),
                    round_notes=trial_cap_notes(study), cost=training_cost(study),
                    time_cost=time_cost, predicted_noise_scale=predicted_noise_scale(
                        read_study_plan(study), fits[primary.label]))


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


# Measured on the quickstart (benchmarks/README.md, stopping protocols): the same steps to
# result under goal and race, B* 457 [248, 865] under goal and full, 413 [283, 777] under race.
RACE_FIT_NOTE = (
    "protocol race: steps to result is exact, but the regime fit's intervals and its "
    "best-of-n correction also use the crossings of trials other than the best, which race "
    "stopped before they crossed, so S_min, B* and their intervals are approximate; protocol "
    "goal gives the fit that full would")


def _fit_notes(fit) -> list[str]:
    return list(fit.notes) if fit.fitted else [f"no regime fit: {fit.reason}"]


def summary_json(analysis: Analysis) -> dict:
    """The report's numbers as one JSON document (what summary.json holds); the keys on
    early stopping, rounds and training cost come last (older readers see a prefix)."""
    study = analysis.study

    def records(frame):
        return json.loads(frame.to_json(orient="records"))

    return {
        "study": study.name, "location": study.location, "layout": study.layout,
        "workload": {"dataset": study.dataset, "model": study.model, "optimizer": study.optimizer},
        "counted_statuses": list(study.counted), "goals": [g.label for g in study.goals],
        "steps_to_result": records(analysis.steps),
        "regimes": {label: fit.to_dict() for label, fit in analysis.fits.items()},
        "optimal_metaparameters": records(analysis.optimal),
        "budgets": records(analysis.budgets), "trial_counts": records(analysis.counts),
        "search_space_warnings": analysis.warnings, "notes": analysis.notes,
        "expected_trials": analysis.expected_trials,
        "unfinished": [u.to_dict() for u in analysis.unfinished],
        "damaged": [d.to_dict() for d in analysis.damaged],
        "protocol": analysis.protocol, "censoring": analysis.censoring,
        "search_rounds": records(analysis.rounds), "search_round_notes": analysis.round_notes,
        "training_cost": analysis.cost,
        "time_and_cost": analysis.time_cost and analysis.time_cost.to_dict(),
        "predicted_noise_scale": analysis.predicted_noise_scale,
    }



def report_location(study: Study) -> str:
    """Where a study's report goes by default: ``<study>/report`` in its store (ours) or
    ``<workload>/report`` beside the batch-size folders (the paper's layout)."""
    if study.spec is not None:
        return f"{study.spec.store.rstrip('/')}/{study.spec.name}/report"
    return f"{study.location.rstrip('/')}/report"


def write_report(analysis: Analysis, out: str | None = None) -> dict:
    """Write the report files under ``out`` (default report_location); returns their URLs
    (html, markdown, goal_steps, folder) and, under "pages", the HTML and Markdown texts."""
    from batchscale.analysis.report_pages import report_html, report_markdown

    fs = open_root(out or report_location(analysis.study))
    doc = summary_json(analysis)
    fs.write_text("summary.json", json.dumps(_plain(doc), indent=2, allow_nan=False))
    fs.write_text("steps_to_result.csv", analysis.steps.to_csv(index=False))
    fs.write_text("budgets.csv", analysis.budgets.to_csv(index=False))
    fs.write_text("metaparameters.csv", analysis.optimal.to_csv(index=False))
    fs.write_text("trial_counts.csv", analysis.counts.to_csv(index=False))
    fs.write_text(GOAL_STEPS_FILE, analysis.goal_steps.to_csv(index=False))
    if analysis.time_cost is not None:
        fs.write_text("time_to_result.csv", analysis.time_cost.table.to_csv(index=False))
        fs.write_text("step_times.csv", analysis.time_cost.profile.table.to_csv(index=False))
    for name, (png, _caption) in analysis.figures.items():
        fs.write_bytes(name, png)
    page, markdown = report_html(analysis), report_markdown(analysis)
    fs.write_text("summary.md", markdown)
    fs.write_text("report.html", page)
    return {"html": fs.url("report.html"), "markdown": fs.url("summary.md"),
            "goal_steps": fs.url(GOAL_STEPS_FILE), "folder": fs.url(""),
            "pages": {"html": page, "markdown": markdown}}


def _plain(value):
    """JSON-ready: NaN and infinities become null, numpy scalars Python numbers."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def report_study(location: str, out: str | None = None, goals=None, num_trials: int | None = None,
                 statuses: tuple[str, ...] = ("COMPLETE",), step_budgets=None, example_budgets=None,
                 resamples: int = 1000, seed: int = 0,
                 price: float = 0.0) -> tuple[Analysis, dict]:
    """Load the study at ``location``, analyse it and write its report; returns (analysis,
    written URLs). What ``batchscale report`` and the pipeline's aggregate step run.
    ``price`` (> 0): USD per device-hour for cost to result (0: the spec's, else the table's)."""
    study = load_study(location, goals=goals, num_trials=num_trials, statuses=statuses)
    analysis = analyse(study, step_budgets, example_budgets, resamples=resamples, seed=seed,
                       price=price)
    return analysis, write_report(analysis, out)


def kfp_metrics(analysis: Analysis) -> dict[str, float]:
    """The headline numbers as flat scalar metrics for the Kubeflow UI's Metrics view."""
    metrics = {"damaged_files": float(len(analysis.damaged))}
    cost = analysis.cost or {}
    for key in ("trials", "trained_steps", "full_steps", "fraction_of_full_steps"):
        if isinstance(cost.get(key), (int, float)):  # what the protocol trained
            metrics[key] = float(cost[key])
    if analysis.rounds is not None and len(analysis.rounds):
        metrics["search_rounds_added"] = float((analysis.rounds["round"] > 1).sum())
    if analysis.expected_trials is not None:
        metrics["unfinished_trials"] = float(len(analysis.unfinished))
    metrics.update(analysis.time_cost.metrics() if analysis.time_cost else {})
    for row in analysis.steps.dropna(subset=["steps_to_result"]).itertuples():
        metrics[f"{row.split}/{row.goal}/steps_to_result/b{row.batch_size}"] = float(row.steps_to_result)
    for label, fit in analysis.fits.items():
        if not fit.fitted:
            continue
        for name in ("s_min", "b_star", "perfect_scaling_end", "max_useful_batch_size"):
            est = getattr(fit, name)
            for part in ("value", "low", "high"):
                value = float(getattr(est, part))
                if math.isfinite(value):
                    metrics[f"val/{label}/{name}" + ("" if part == "value" else f"/{part}")] = value
    return metrics

