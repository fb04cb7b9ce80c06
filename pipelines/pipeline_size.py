"""How big a compiled pipeline gets on a cluster: ParallelFor iterations and pods.

Kubeflow Pipelines struggles with big runs: DAG updates fail with many ParallelFor
iterations (kubeflow/pipelines #12131), the UI shows "no graph" near 1,000 pods (#2913),
and the Argo workflow object that carries every node's status grows towards etcd's
request limit (#4175). So the study pipeline's loops iterate over *lanes* (a fixed
number of pack tasks per round, each training its share of the round's packs; see
``batchscale.search.lanes``), and ``compile`` states the bound this module computes.

The pod count follows KFP 2.17's Argo compiler (``backend/src/v2/compiler/argocompiler/
dag.go``), where every driver is a pod of its own:

- a container task: a driver pod and an executor pod (2);
- a DAG task (a nested pipeline, an exit handler, a condition): a driver pod (1) plus
  its own tasks;
- a ParallelFor over N items: an iteration driver (1), then per item a driver for the
  loop body's DAG (1) plus the body's tasks;
- the root: a driver (1) plus its tasks.

N is known only at run time. A loop over lanes runs all its items at once, so its
``parallelismLimit`` is its bound, and ``size`` counts with it unless told otherwise.
TrainJob pods (multi-host packs) are not the pipeline's and are not counted here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from batchscale.pipelines.compiled_yaml import load_documents


@dataclass(frozen=True)
class PipelineSize:
    """``iterations``: ParallelFor iterations in all (at their bounds); ``pods``: pods
    of the run in all (KFP 2.17's Argo compiler, see the module docstring); ``loops``:
    how many ParallelFor loops the run passes through; ``size_bytes``: the compiled file."""

    iterations: int
    pods: int
    loops: int
    size_bytes: int

    def line(self) -> str:
        return (f"at most {self.iterations} pack tasks in {self.loops} loop(s) and "
                f"{self.pods} pods in all (KFP 2.17 counts a driver pod per task); "
                f"{self.size_bytes / 1024:.0f} KiB compiled")


def size(path: str, items_per_loop=None) -> PipelineSize:
    """The size of the compiled pipeline at ``path`` when each of its ParallelFor loops
    runs ``items_per_loop`` items (a number, or a function of the loop's task in the IR;
    None: its ``parallelismLimit``, the bound of a loop over lanes)."""
    with open(path) as fh:
        doc = next(d for d in load_documents(fh) if d and "components" in d)
    components = doc["components"]
    if items_per_loop is None:
        count = lambda task: task["iteratorPolicy"]["parallelismLimit"]  # noqa: E731
    else:
        count = items_per_loop if callable(items_per_loop) else (lambda _task: items_per_loop)
    totals = {"iterations": 0, "loops": 0}

    def dag_pods(dag: dict) -> int:
        pods = 0
        for task in dag.get("tasks", {}).values():
            component = components[task["componentRef"]["name"]]
            inner = dag_pods(component["dag"]) if "dag" in component else None
            if "parameterIterator" in task:
                n = int(count(task))
                totals["iterations"] += n
                totals["loops"] += 1
                pods += 1 + n * (1 + (inner or 0))
            elif inner is not None:
                pods += 1 + inner
            else:
                pods += 2
        return pods

    pods = 1 + dag_pods(doc["root"]["dag"])
    return PipelineSize(totals["iterations"], pods, totals["loops"], os.path.getsize(path))
