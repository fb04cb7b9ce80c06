"""What one pack task shows in the Kubeflow UI: Metrics of its trials and a Markdown table.

KFP 2.17 gives every iteration of a ParallelFor the same static display name (runtime
display names are an open feature request, kubeflow/pipelines #14008), so a pack task is
told apart by what it outputs: its Markdown names the pack (id, batch size, trial ids) and
lists each trial's status, stop reason, steps, first step at the study's first goal and
best validation value; its Metrics hold the counts, the pack's best steps to result and
each trial's numbers, which the UI can compare across runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from batchscale.core.goals import first_step_reaching
from batchscale.core.spec import PackSpec, StudySpec, TrialSpec
from batchscale.store.event_files import TENSORBOARD_DIR
from batchscale.store.layout import StudyStore


@dataclass(frozen=True)
class PackSummary:
    """``metrics``: KFP Metrics (name -> number; a value that does not exist is left out,
    never a stand-in number); ``markdown``: the pack's page; ``line``: one line of counts."""

    metrics: dict[str, float]
    markdown: str
    line: str


def summarize_pack(spec: StudySpec, pack: PackSpec, trials: list[TrialSpec], metas: list[dict],
                   store: StudyStore) -> PackSummary:
    goal = spec.goals[0]
    watched = f"val/{goal.metric}"
    better = min if goal.direction == "minimize" else max
    rows_by_trial = {t.trial_id: store.read_measurements(spec, t) for t in trials}
    statuses = [m.get("status", "INCOMPLETE") for m in metas]
    metrics: dict[str, float] = {
        "trials": len(trials), "complete": statuses.count("COMPLETE"),
        "infeasible": statuses.count("INFEASIBLE"),
        "unfinished": sum(s not in ("COMPLETE", "INFEASIBLE") for s in statuses),
        "train_seconds": round(sum(m.get("train_seconds") or 0.0 for m in metas), 3),
    }
    table, reached = [], []
    for trial, meta in zip(trials, metas):
        rows = rows_by_trial[trial.trial_id]
        step = first_step_reaching(rows, goal, "val") if meta.get("status") == "COMPLETE" else None
        values = [r[watched] for r in rows if isinstance(r.get(watched), float) and math.isfinite(r[watched])]
        best = better(values) if values else None
        if step is not None:
            reached.append(step)
            metrics[f"trial_{trial.trial_id}_steps_to_result"] = step
        if best is not None:
            metrics[f"trial_{trial.trial_id}_best_val_{goal.metric}"] = round(best, 6)
        table.append(_row(trial, meta, step, best))
    metrics["reached_goal"] = len(reached)
    if reached:
        metrics["best_steps_to_result"] = min(reached)
    ids = ", ".join(str(t.trial_id) for t in trials)
    parameters = sorted({k for t in trials for k in t.parameters})
    head = ["trial", "status", "stop reason", "steps", f"reached {goal.label} at", f"best {watched}",
            *parameters]
    lines = [
        f"### Pack {pack.pack_id}: batch size {pack.batch_size}, trials {ids}",
        "",
        f"Study `{spec.name}` ({spec.workload.label}"
        f"), protocol {spec.protocol}. "
        + (f"Fewest steps to {goal.label} in this pack: **{min(reached)}**." if reached
           else f"No trial of this pack reached {goal.label}."),
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *("| " + " | ".join(cells + [_number(t.parameters.get(p)) for p in parameters]) + " |"
          for cells, t in zip(table, trials)),
        "",
        f"Live curves: `tensorboard --logdir {store.url(spec.name)}/{TENSORBOARD_DIR}`",
    ]
    counts = ", ".join(f"{n} {s}" for s, n in sorted(
        {s: statuses.count(s) for s in set(statuses)}.items()))
    return PackSummary(metrics, "\n".join(lines) + "\n", f"{pack.pack_id}: {counts}")


def _row(trial: TrialSpec, meta: dict, step: int | None, best: float | None) -> list[str]:
    return [str(trial.trial_id), str(meta.get("status", "INCOMPLETE")), str(meta.get("stop_reason", "")),
            str(meta.get("steps", "")), "" if step is None else str(step), _number(best)]


def _number(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
