"""``batchscale workloads``: every workload with defaults, as a table or JSON.

Plain functions over the registries (no Keras, TensorFlow or kfp import), so listing
is instant.
"""

from __future__ import annotations

from batchscale.workloads import get_dataset
from batchscale.workloads.defaults import WORKLOADS


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
