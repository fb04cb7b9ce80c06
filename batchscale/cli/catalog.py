"""``batchscale workloads`` and ``batchscale presets``: what a study can be made of.

  batchscale workloads [--json]     the workloads with defaults: goal, search space, budgets
  batchscale presets                the trainer placement presets (GPU, TPU, CPU node pools)

Plain functions over the registries (no Keras, TensorFlow or kfp import), so listing
is instant.
"""

from __future__ import annotations

import argparse
import json

from batchscale.workloads import get_dataset
from batchscale.workloads.defaults import WORKLOADS


def add_commands(sub) -> None:
    """Register ``workloads`` and ``presets`` on the CLI's subparsers."""
    wl = sub.add_parser("workloads", help="list the workloads with defaults (goal, search space, budgets)")
    wl.add_argument("--json", action="store_true", help="one JSON object per workload")
    wl.set_defaults(func=cmd_workloads)
    pre = sub.add_parser("presets", help="list the trainer placement presets (accelerators, node pools)")
    pre.set_defaults(func=cmd_presets)


def cmd_workloads(args: argparse.Namespace) -> int:
    rows = workload_rows()
    print(json.dumps(rows, indent=2) if args.json else format_workloads(rows))
    return 0


def cmd_presets(args: argparse.Namespace) -> int:
    from batchscale.pipelines.placement import format_presets

    print(format_presets())
    return 0


def workload_rows() -> list[dict]:
    """One dict per workload: what a spec naming only (dataset, model) would run."""
    rows = []
    for w in WORKLOADS:
        info = get_dataset(w.dataset)
        train = info.split_sizes["train"]
        goal = w.goal
        sign = ">" if goal.get("direction") == "maximize" else "<"
        rows.append({
            "workload": w.key,
            "task": info.task,
            "data": info.source,
            "optimizer": w.optimizer,
            "schedule": w.schedule,
            "goal": f"val/{goal['metric']} {sign} {goal['value']:g}",
            "trials": w.trials,
            "batch_sizes": f"{w.batch_sizes[0]}..{w.batch_sizes[-1]}",
            "max_steps": f"{w.budget(w.batch_sizes[0], train)}..{w.budget(w.batch_sizes[-1], train)}",
            "searched": ", ".join(sorted(w.search_space)),
            "accelerators": ", ".join(w.accelerators),
            "note": w.note,
        })
    return rows


def format_workloads(rows: list[dict]) -> str:
    """A fixed-width text table (notes on the line below each workload)."""
    columns = ("workload", "task", "data", "optimizer", "schedule", "goal", "trials",
               "batch_sizes", "max_steps", "accelerators")
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    for r in rows:
        lines.append("  ".join(str(r[c]).ljust(widths[c]) for c in columns).rstrip())
        lines.append(f"    searched: {r['searched']}" + (f"; {r['note']}" if r["note"] else ""))
    return "\n".join(lines)
