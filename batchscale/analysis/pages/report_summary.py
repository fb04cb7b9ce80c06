"""The report's numbers for machines: summary.json (``summary_json``) and the Kubeflow UI's
Metrics (``kfp_metrics``), from a ``study_analysis.Analysis`` (both read only its
fields). Estimates are given in the one interval notation of ``intervals``: summary.json's
regimes carry a ``text`` beside the numbers, and a metric never stands in for an end the
data do not bound.
"""

from __future__ import annotations

import json
import math

from batchscale.analysis.reading.censoring import protocol_label
from batchscale.analysis.reading.locations import shown_location
from batchscale.analysis.statistics.intervals import regime_bound
from batchscale.analysis.statistics.study_analysis import Analysis


def summary_json(analysis: Analysis) -> dict:
    """The report's numbers as one JSON document (what summary.json holds); the keys on
    early stopping, rounds, training cost, time and the answer come last (older readers
    see a prefix), then robustness (``statistics.robustness``). ``location``: as the report
    names it (``locations.shown_location``)."""
    study = analysis.study

    def records(frame):
        return json.loads(frame.to_json(orient="records"))

    return {
        "study": study.name, "location": shown_location(study), "layout": study.layout,
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
        "protocol": protocol_label(analysis.protocol), "censoring": analysis.censoring,
        "search_rounds": records(analysis.rounds), "search_round_notes": analysis.round_notes,
        "training_cost": analysis.cost,
        "time_and_cost": analysis.time_cost and analysis.time_cost.to_dict(),
        "predicted_noise_scale": analysis.predicted_noise_scale,
        "answer": analysis.answer.to_dict(),
        "robustness_k": analysis.robustness_k, "robustness": records(analysis.robustness),
        "metaparameter_laws": plain(analysis.laws.to_dict()) if analysis.laws else None,
    }


def plain(value):
    """JSON-ready: NaN and infinities become null, numpy scalars Python numbers."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def kfp_metrics(analysis: Analysis) -> dict[str, float]:
    """The headline numbers as flat scalar metrics for the Kubeflow UI's Metrics view. A
    regime estimate publishes the parts its text shows (``intervals.regime_bound``):
    ``…/b_star``, ``…/b_star/low``, ``…/b_star/high`` for ``457 [248, 865]``; only
    ``…/low`` for ``≥ 248`` and only ``…/high`` for ``≤ 865``; nothing when undetermined."""
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
            shown = regime_bound(getattr(fit, name), steps=name == "s_min").numbers()
            for part, value in shown.items():
                metrics[f"val/{label}/{name}" + ("" if part == "value" else f"/{part}")] = value
    return metrics
