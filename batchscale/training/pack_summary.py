"""What one pack task shows in the Kubeflow UI: Metrics of its trials and a Markdown table.

KFP 2.17 gives every iteration of a ParallelFor the same static display name (runtime
display names are an open feature request, kubeflow/pipelines #14008), so a pack task is
told apart by what it outputs: its Markdown names the pack (id, batch size, trial ids) and
lists each trial's status, stop reason, steps, first step at the study's first goal and
best validation value; its Metrics hold the counts, the pack's best steps to result and
each trial's numbers, which the UI can compare across runs.

A mixed pack (trials of several batch sizes, ``PackSpec.mixed``) names every batch size
with its trials, gives its table a batch-size column, and tells its Metrics apart by
batch size: ``b8_trial_3_steps_to_result``, and steps to result per batch size
(``b8_best_steps_to_result``), since a fewest steps over batch sizes means nothing. A
pack of one batch size keeps the names above, so the UI compares it with older runs.

A pack task trains a lane of packs (``search.lanes``): a lane of one pack shows as that
pack; a lane of several shows as one table of all their trials, headed ``Lane K`` and
grouped by batch size as a mixed pack's are (``training.pack_task``).
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
                   store: StudyStore, title: str | None = None) -> PackSummary:
    """The summary of ``pack``'s trials; ``title`` names a lane of several packs
    (``training.pack_task``), whose trials ``pack`` gathers by batch size."""
    goal = spec.goals[0]
    watched = f"val/{goal.metric}"
    better = min if goal.direction == "minimize" else max
    name = _metric_prefix(pack)
    statuses = [m.get("status", "INCOMPLETE") for m in metas]
    metrics: dict[str, float] = {
        "trials": len(trials), "complete": statuses.count("COMPLETE"),
        "infeasible": statuses.count("INFEASIBLE"),
        "unfinished": sum(s not in ("COMPLETE", "INFEASIBLE") for s in statuses),
        "train_seconds": round(sum(m.get("train_seconds") or 0.0 for m in metas), 3),
    }
    table, reached = [], {}  # batch size -> steps to result of its trials that reached the goal
    for trial, meta in zip(trials, metas):
        rows = store.read_measurements(spec, trial)
        step = first_step_reaching(rows, goal, "val") if meta.get("status") == "COMPLETE" else None
        values = [r[watched] for r in rows if isinstance(r.get(watched), float) and math.isfinite(r[watched])]
        best = better(values) if values else None
        if step is not None:
            reached.setdefault(trial.batch_size, []).append(step)
            metrics[f"{name(trial.batch_size)}trial_{trial.trial_id}_steps_to_result"] = step
        if best is not None:
            metrics[f"{name(trial.batch_size)}trial_{trial.trial_id}_best_val_{goal.metric}"] = round(best, 6)
        table.append(([str(trial.batch_size)] if pack.mixed else []) + _row(trial, meta, step, best))
    metrics["reached_goal"] = sum(map(len, reached.values()))
    for batch_size, steps in reached.items():
        metrics[f"{name(batch_size)}best_steps_to_result"] = min(steps)
    parameters = sorted({k for t in trials for k in t.parameters})
    head = [*(["batch size"] if pack.mixed else []), "trial", "status", "stop reason", "steps",
            f"reached {goal.label} at", f"best {watched}", *parameters]
    lines = [
        f"### {title}: {_holds(pack, lane=True)}" if title else f"### Pack {pack.pack_id}: {_holds(pack)}",
        "",
        f"Study `{spec.name}` ({spec.workload.label}"
        f"), protocol {spec.protocol}. " + _fewest(pack, reached, goal.label),
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
    return PackSummary(metrics, "\n".join(lines) + "\n", f"{title or pack.pack_id}: {counts}")


def _metric_prefix(pack: PackSpec):
    """The prefix of a trial's Metrics names: none in a pack of one batch size (the names
    older runs have), ``b<batch size>_`` in a mixed pack (trial ids repeat across sizes)."""
    return (lambda batch_size: f"b{batch_size}_") if pack.mixed else (lambda _: "")


def _holds(pack: PackSpec, lane: bool = False) -> str:
    """What the pack holds, in words: ``batch size 16, trials 1, 2, 3``, or for a mixed
    pack ``batch sizes 8 (trials 1, 2), 16 (trials 1, 2), planned as one mixed pack``
    (whether they shared one step is the trainer's call, in each trial's metadata)."""
    if not pack.mixed:
        return f"batch size {pack.batch_size}, trials {', '.join(map(str, pack.trial_ids))}"
    parts = ", ".join(f"{b} (trials {', '.join(map(str, ids))})" for b, ids in pack.parts)
    return f"batch sizes {parts}" + ("" if lane else ", planned as one mixed pack")


def _fewest(pack: PackSpec, reached: dict[int, list[int]], goal: str) -> str:
    """The pack's fewest steps to the goal: one number in a pack of one batch size, one
    per batch size in a mixed pack."""
    if not reached:
        return f"No trial of this pack reached {goal}."
    if not pack.mixed:
        return f"Fewest steps to {goal} in this pack: **{min(min(s) for s in reached.values())}**."
    return f"Fewest steps to {goal} in this pack: " + "; ".join(
        f"batch size {b}: **{min(reached[b])}**" if b in reached else f"batch size {b}: none"
        for b in pack.batch_sizes) + "."


def _row(trial: TrialSpec, meta: dict, step: int | None, best: float | None) -> list[str]:
    return [str(trial.trial_id), str(meta.get("status", "INCOMPLETE")), str(meta.get("stop_reason", "")),
            str(meta.get("steps", "")), "" if step is None else str(step), _number(best)]


def _number(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
