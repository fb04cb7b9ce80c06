"""Compare an experiment's studies and state its findings: the paper's Figures 2-7 for any
experiment (``core.experiment``: a base study and one axis).

``compare_experiment`` runs ``compare_studies`` over the experiment's studies (with the
regime fit, normalised at the experiment's ``normalize_at``; a goal axis: its one study once
per goal), then states the findings (``statistics.findings``; a data_size axis: B*(D),
``statistics.b_star_exponent``). ``report_experiment`` writes them into
``<experiment folder>/comparison/`` (comparison.html, .md, .json, .csv and the figures as
SVG) and returns the texts and metrics the Kubeflow UI shows; ``format_experiment`` is the
console's text.
"""

from __future__ import annotations

import json
import math

from batchscale.analysis.compare import compare_studies
from batchscale.analysis.figures.plots_experiment import b_star_by_data_size_plot
from batchscale.analysis.figures.plots_robustness import kth_best_overlay_plot, ordinal
from batchscale.analysis.pages.experiment_pages import (
    FIGURE_B_STAR,
    FIGURE_KTH_BEST,
    experiment_html,
    experiment_json,
    experiment_markdown,
    experiment_metrics,
    format_experiment,
)
from batchscale.analysis.statistics.experiment_comparison import (
    ExperimentComparison,
    curves_of,
    experiment_findings,
)
from batchscale.analysis.statistics.intervals import AT_LEAST, AT_MOST, INTERVAL, VALUE, regime_bound
from batchscale.analysis.statistics.robustness import robustness_table
from batchscale.core.experiment import COMPARISON_FOLDER, ExperimentSpec
from batchscale.store.filesystem import open_root

__all__ = ["COMPARISON_FOLDER", "ExperimentComparison", "compare_experiment", "format_experiment",
           "report_experiment"]



def compare_experiment(experiment: ExperimentSpec) -> ExperimentComparison:
    """Read the experiment's studies from its folder, compare them and state the findings."""
    locations = experiment.locations()
    if experiment.axis.kind == "goal":
        goals = [str(g) for g in experiment.axis.values]
        comparison = compare_studies(locations * len(goals), goals=goals, fit=True,
                                     normalize_at=experiment.normalize_at)
    else:
        comparison = compare_studies(locations, fit=True, normalize_at=experiment.normalize_at)
    curves = curves_of(comparison)
    findings, exponent = experiment_findings(experiment, curves)
    figures = dict(comparison.figures)
    if exponent is not None:
        points = b_star_points([s.value for s in experiment.studies], curves)
        alpha = exponent.alpha
        figures[FIGURE_B_STAR] = b_star_by_data_size_plot(
            points, exponent.alpha.value if alpha.value is not None else float("nan"), exponent.c,
            f"{experiment.name}: fitted critical batch size B* against training examples", alpha.text())
    robustness = _robustness(experiment, comparison)
    if robustness:
        figures[FIGURE_KTH_BEST] = kth_best_overlay_plot(
            robustness, experiment.robustness_k,
            f"{experiment.name}: best and {ordinal(experiment.robustness_k)} trial")
    return ExperimentComparison(experiment, comparison, curves, findings, exponent, figures,
                                robustness=robustness)


def b_star_points(sizes, curves) -> list[tuple[float, float, float, float]]:
    """(D, B*, low, high) per data size for the B*(D) figure, in the one notation the
    pages write (``intervals.regime_bound``): a B* the data bound from below only is drawn
    at its lower bound, open upwards (high inf), from above only at its upper bound, open
    downwards (low 0); an undetermined or unfitted one is left out."""
    points = []
    for size, curve in zip(sizes, curves):
        if curve.fit is None or not curve.fit.fitted:
            continue
        shown = regime_bound(curve.fit.b_star)
        if shown.kind == AT_LEAST:
            points.append((float(size), shown.low, shown.low, math.inf))
        elif shown.kind == AT_MOST:
            points.append((float(size), shown.high, 0.0, shown.high))
        elif shown.kind in (INTERVAL, VALUE):
            low, high = (shown.low, shown.high) if shown.kind == INTERVAL else (math.nan, math.nan)
            points.append((float(size), shown.value, low, high))
    return points


def _robustness(experiment: ExperimentSpec, comparison) -> dict:
    """Each compared curve's robustness table (the k-th best trial per batch size, the share
    of trials reaching the goal: ``statistics.robustness``), by the curve's study name, from
    the studies the comparison read (each with its compared goal first)."""
    return {entry.study: robustness_table(study, study.goals[0], comparison.split,
                                          experiment.robustness_k)
            for entry, study in zip(comparison.studies, comparison.loaded)}


def report_experiment(experiment: ExperimentSpec) -> tuple[ExperimentComparison, dict]:
    """Compare the experiment and write ``<experiment folder>/comparison/``; returns the
    comparison and ``written``: file name -> URL (also as ``html``, ``markdown``, ``json``,
    ``csv``), ``folder``, and ``pages`` (``html``, ``markdown``: the texts) and ``metrics``
    (name -> number) for the Kubeflow UI."""
    result = compare_experiment(experiment)
    return result, write_experiment(result)


def write_experiment(result: ExperimentComparison) -> dict:
    """Write the comparison's files into its experiment's ``comparison`` folder (other files
    there are left alone)."""
    fs = open_root(f"{result.experiment.folder}/{COMPARISON_FOLDER}")
    clean = result.comparison.without_roots
    html, markdown = experiment_html(result), experiment_markdown(result)
    texts = {"comparison.html": html, "comparison.md": markdown,
             "comparison.csv": result.comparison.table.to_csv(index=False),
             "comparison.json": clean(json.dumps(experiment_json(result), indent=2, allow_nan=False))}
    written = {}
    for name, text in texts.items():
        fs.write_text(name, text)
        written[name] = fs.url(name)
    for name, image in result.figures.items():
        fs.write_bytes(name, image)
        written[name] = fs.url(name)
    for key, name in (("html", "comparison.html"), ("markdown", "comparison.md"),
                      ("json", "comparison.json"), ("csv", "comparison.csv")):
        written[key] = written[name]  # as a study's report names its pages
    written["folder"] = fs.url("")
    written["pages"] = {"html": html, "markdown": markdown}
    written["metrics"] = experiment_metrics(result)
    return written
