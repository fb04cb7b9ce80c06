"""An experiment compiled as one pipeline against its studies compiled one by one.

    .venv/bin/python benchmarks/experiment_compile.py [EXPERIMENT] [--preset nvidia-l4]

Compiles EXPERIMENT (default figure4_paper) with ``compile_experiment_pipeline`` and each
of its studies with ``compile_pipeline`` (the pipeline a study alone would run), then
prints for each: the YAML's size, the task definitions in its DAGs, and the tasks a fresh
run starts in round 1 (data preparation, one planner per round, the pack tasks of round 1
at the preset's pack size, the fan-in). Later rounds add pack tasks only where a study's
results ask for them, the same count either way.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import yaml

from batchscale.pipelines.experiment import compile_experiment_pipeline
from batchscale.pipelines.placement import pack_size_for
from batchscale.pipelines.study import compile_pipeline
from batchscale.search.packs import make_packs
from batchscale.validation.experiment_spec import parse_experiment
from batchscale.validation.spec_files import load_spec_dict


def dag_tasks(path: str) -> int:
    """Task definitions over every DAG of the compiled pipeline (root and nested)."""
    doc = next(yaml.safe_load_all(open(path)))
    count = len(doc["root"]["dag"]["tasks"])
    count += sum(len(c.get("dag", {}).get("tasks", {})) for c in doc["components"].values())
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", nargs="?", default="figure4_paper")
    parser.add_argument("--preset", default="nvidia-l4")
    args = parser.parse_args()
    experiment = parse_experiment(load_spec_dict(args.experiment), "gs://bucket/prefix")
    packs = {s.label: len(make_packs(s.spec, pack_size_for(s.spec, args.preset)))
             for s in experiment.studies}
    with tempfile.TemporaryDirectory() as folder:
        one = compile_experiment_pipeline(experiment, os.path.join(folder, "experiment.yaml"),
                                          preset=args.preset)
        rows = [("experiment (one pipeline)", os.path.getsize(one), dag_tasks(one),
                 1 + experiment.max_rounds + sum(packs.values()) + 1)]
        for study in experiment.studies:
            path = compile_pipeline(study.spec, os.path.join(folder, f"{study.label}.yaml"),
                                    preset=args.preset)
            rows.append((f"study {study.label} alone", os.path.getsize(path), dag_tasks(path),
                         1 + study.spec.max_rounds + packs[study.label] + 1))
    print(f"{args.experiment}: {len(experiment.studies)} studies, {experiment.trials} trials in "
          f"round 1, preset {args.preset}, pack tasks in round 1: "
          + ", ".join(f"{k} {v}" for k, v in packs.items()))
    print(f"{'pipeline':<36} {'YAML bytes':>10} {'DAG tasks':>9} {'round-1 run tasks':>17}")
    for name, size, tasks, run in rows:
        print(f"{name:<36} {size:>10,} {tasks:>9} {run:>17}")
    alone = rows[1:]
    print(f"{'studies alone, together':<36} {sum(r[1] for r in alone):>10,} "
          f"{sum(r[2] for r in alone):>9} {sum(r[3] for r in alone):>17}")
    print(f"Kubeflow runs: 1 for the experiment, {len(alone)} for the studies alone")


if __name__ == "__main__":
    main()
