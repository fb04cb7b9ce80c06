"""Benchmark: the user-model path (a user's Keras model function on their .npz) on whatever
device JAX sees: the step time of one trial, and what a vmapped pack of trials trains.

The workload is the example of docs/your-workload.md (examples/your_workload: model.py's
``build``, study.yaml, and the .npz that make_npz.py writes), read through the same doors
a study uses: ``load_spec_dict`` and ``parse_spec``, ``prepare_dataset`` into a scratch
store, ``open_pipeline``, and the pack engine (``PackStep`` via ``step_timing.probe_pack``,
and ``packs.run_pack``). Nothing here needs kfp, TensorFlow or a cloud client, so the
script runs on a bare accelerator machine with only JAX, Keras and their needs.

1. Step time of one trial at each ``--batch-sizes``: ``PackStep.run_chunk`` one trial wide
   (the step-time profile's own step), a first call that compiles (its compile time kept
   apart), then ``--repeats`` timed chunks of about ``--seconds`` each; the median. Beside
   it, what the project's own probe (``step_timing.time_steps``) records for the report.
2. Pack throughput at ``--pack-batch``: K trials (different learning rates) vmapped in one
   ``PackStep`` for each K of ``--widths``: compile seconds, then trial-steps per second
   (K x steps / seconds) over ``--repeats`` timed chunks, steady state only.
3. ``run_pack`` end to end (``--study-trials`` trials at ``--pack-batch``, ``--study-steps``
   steps each, an unreachable goal so every trial trains its whole budget): wall seconds,
   trials per hour, and what the trials' metadata says (compile, evaluation, training).

Every timing blocks on the device's results (``run_chunk`` reads its finite flags back;
the state is waited on too). Prints Markdown tables and writes ``user_model_gpu.json``
and ``user_model_gpu.md`` into ``--out`` (default: ``$OUT``, else the current folder)
after each part, so a part that fails on a scarce device run loses only itself (the JSON
says ``"finished": false`` until the end).

    KERAS_BACKEND=jax python benchmarks/user_model_gpu.py --data mnist_5k.npz [--quick]
        [--batch-sizes 8,32,256,2048] [--widths 1,8,32,64] [--pack-batch 128]
        [--study-trials 16] [--study-steps 500] [--study-widths default,all] [--out DIR]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timezone

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = os.path.join(ROOT, "examples", "your_workload", "study.yaml")
ABSENT_ON_DEVICE = ("tensorflow", "kfp", "google.cloud.storage", "mlxtend", "tensorflow_datasets")


def load_workload(spec_path: str, data: str | None, root: str, changes: dict):
    """(spec, pipeline): the user's study spec with ``changes``, its data prepared into a
    scratch store at ``root``. A relative model file is read against the repository root
    (where study.yaml's paths start); ``data`` replaces the spec's data path."""
    from batchscale.store.layout import StudyStore
    from batchscale.validation import load_spec_dict, parse_spec
    from batchscale.validation.workload_spec import absolute_paths
    from batchscale.workloads.dataset_registry import dataset_for, open_pipeline
    from batchscale.workloads.prepare import prepare_dataset

    raw = load_spec_dict(spec_path)
    raw["workload"] = dict(raw["workload"])
    if data is not None:
        raw["workload"]["dataset"] = {**raw["workload"]["dataset"], "path": os.path.abspath(data)}
    raw.update(store=root, **changes)
    spec = parse_spec(raw)
    spec = replace(spec, workload=absolute_paths(spec.workload, ROOT))
    store = StudyStore(root)
    prepare_dataset(store, dataset_for(spec.workload), log=lambda *a: None)
    return spec, store, open_pipeline(store, dataset_for(spec.workload), spec.workload.options)


def trial_parameters(spec, width: int) -> list[dict]:
    """The metaparameters of a benchmark's ``width`` trials: learning rates spread over the
    lower half of the searched range (``step_timing.probe_parameters``), nothing diverges."""
    from batchscale.training.step_timing import probe_parameters

    quantiles = np.linspace(0.1, 0.4, width) if width > 1 else [0.25]
    return [probe_parameters(spec, float(q)) for q in quantiles]


class Chunks:
    """K trials' ``PackStep`` with its state and data orders: times ``run_chunk`` calls."""

    def __init__(self, spec, pipeline, width: int, x_all, y_all):
        from batchscale.training.step_timing import probe_pack

        _, self.step, self.state, self.hyper = probe_pack(spec, pipeline,
                                                          trial_parameters(spec, width))
        self.spec, self.pipeline, self.x_all, self.y_all = spec, pipeline, x_all, y_all
        self.orders, self.done, self.finite, self.seed = {}, 0, True, spec.seed

    def sibling(self, params: dict, seed: int) -> Chunks:
        """Another trial (``params``, its data order from ``seed``) through this pack's
        compiled step, from a copy of the pack's state before it trained: how trials take
        turns through one width-1 step."""
        import jax.numpy as jnp

        from batchscale.training.vmapped_step import StackedState, stack_hyper

        other = copy.copy(self)
        state = self.state
        other.state = StackedState([jnp.copy(a) for a in state.trainable],
                                   [jnp.copy(a) for a in state.non_trainable],
                                   {k: [jnp.copy(a) for a in v] for k, v in state.slots.items()})
        other.hyper = stack_hyper([params], (), self.spec.workload.optimizer)
        other.orders, other.done, other.finite, other.seed = {}, 0, True, seed
        return other

    def run(self, batch_size: int, steps: int) -> tuple[float, float]:
        """Train ``steps`` steps; (seconds, of them compiling), waited on to the end."""
        import jax

        from batchscale.workloads.data_order import EpochPermutations

        width = len(self.hyper["learning_rate"])
        if batch_size not in self.orders:
            self.orders[batch_size] = [EpochPermutations(self.pipeline.num_train_examples,
                                                         batch_size, self.seed + i)
                                       for i in range(width)]
        indices = np.stack([o.take(steps).reshape(steps, batch_size)
                            for o in self.orders[batch_size]], 1)
        compiled = self.step.compile_seconds
        tick = time.perf_counter()
        self.state, finite = self.step.run_chunk(self.state, self.hyper, indices, self.done,
                                                 self.x_all, self.y_all)
        jax.block_until_ready(self.state.trainable)
        seconds = time.perf_counter() - tick
        self.done += steps
        self.finite = self.finite and bool(finite.all())
        return seconds, self.step.compile_seconds - compiled

    def timed(self, batch_size: int, target: float, repeats: int) -> dict:
        """Compile and warm up, calibrate a chunk of about ``target`` seconds, then time
        ``repeats`` chunks: seconds per step (median, spread) and the compile time."""
        first, compile_seconds = self.run(batch_size, 5)
        probe, _ = self.run(batch_size, 20)
        steps = int(np.clip(target / max(probe / 20, 1e-7), 3, 20_000))
        per_step = [self.run(batch_size, steps)[0] / steps for _ in range(repeats)]
        return {"compile_seconds": compile_seconds, "first_call_seconds": first,
                "steps_per_repeat": steps, "seconds_per_step": statistics.median(per_step),
                "seconds_per_step_min": min(per_step), "seconds_per_step_max": max(per_step),
                "all_finite": self.finite}


def step_times(spec, pipeline, x_all, y_all, args) -> list[dict]:
    """Part 1: one trial, each batch size (one PackStep, as ``time_steps`` uses)."""
    from batchscale.training.keras_setup import training_scope
    from batchscale.training.step_timing import time_steps

    rows = []
    with training_scope(spec.backend, spec.workload.precision, 1, print):
        one = Chunks(spec, pipeline, 1, x_all, y_all)
        for batch_size in args.batch_sizes:
            row = {"batch_size": batch_size, **one.timed(batch_size, args.seconds, args.repeats)}
            row["examples_per_second"] = batch_size / row["seconds_per_step"]
            rows.append(row)
            print(f"  step time, batch {batch_size}: {1e3 * row['seconds_per_step']:.3f} ms "
                  f"(compile {row['compile_seconds']:.2f} s)", flush=True)
    for row in rows:  # the project's probe, as a study's report records it
        record = time_steps(spec, pipeline, [row["batch_size"]], log=lambda *a: None)[0]
        row["probe_seconds_per_step"] = record["seconds_per_step"]
        row["device_kind"] = record["device_kind"]
    return rows


def pack_rates(spec, pipeline, x_all, y_all, args) -> list[dict]:
    """Part 2: K trials vmapped, one batch size, for each K."""
    from batchscale.training.keras_setup import training_scope

    rows = []
    with training_scope(spec.backend, spec.workload.precision, 1, print):
        for width in args.widths:
            pack = Chunks(spec, pipeline, width, x_all, y_all)
            row = {"width": width, "batch_size": args.pack_batch,
                   **pack.timed(args.pack_batch, args.seconds, args.repeats)}
            row["trial_steps_per_second"] = width / row["seconds_per_step"]
            row["examples_per_second"] = row["trial_steps_per_second"] * args.pack_batch
            rows.append(row)
            print(f"  pack of {width} at batch {args.pack_batch}: "
                  f"{row['trial_steps_per_second']:,.0f} trial-steps/s "
                  f"(compile {row['compile_seconds']:.2f} s)", flush=True)
    one = rows[0]["trial_steps_per_second"] if rows and rows[0]["width"] == 1 else None
    for row in rows:
        row["speedup_over_one"] = row["trial_steps_per_second"] / one if one else None
    return rows


def study_pack(args, scratch: str, width_asked: str) -> dict:
    """Part 3: ``run_pack`` of the user's trials, end to end into a scratch store, with
    ``width_asked`` trials vmapped at once ('default': a study's choice; 'all': every trial)."""
    from batchscale.search.trials import make_trials
    from batchscale.training.packs import run_pack

    changes = {"name": "gpubench", "batch_sizes": [args.pack_batch],
               "trials_per_batch_size": args.study_trials, "max_steps": args.study_steps,
               "goals": ["classification_error<0"]}  # unreachable: every trial trains its budget
    spec, store, _ = load_workload(args.spec, args.data, scratch, changes)
    store.register_study(spec)
    trials = [t for t in make_trials(spec) if t.batch_size == args.pack_batch]
    width = (None if width_asked == "default" else len(trials) if width_asked == "all"
             else int(width_asked))
    lines: list[str] = []
    tick = time.perf_counter()
    metas = run_pack(spec, trials, store, log=lambda *a: lines.append(" ".join(map(str, a))),
                     width=width)
    wall = time.perf_counter() - tick

    def median(key):
        values = [m[key] for m in metas if m.get(key) is not None]
        return statistics.median(values) if values else None

    return {"trials": len(trials), "steps": args.study_steps, "batch_size": args.pack_batch,
            "width_asked": width_asked, "vmap_width": metas[0].get("vmap_width"),
            "trainer": metas[0].get("trainer"), "wall_seconds": wall,
            "trials_per_hour": 3600 * len(trials) / wall,
            "full_budget": sum(m.get("steps") == args.study_steps for m in metas),
            "statuses": sorted({m.get("status") for m in metas}),
            "compile_seconds": median("compile_seconds"),
            "evaluation_seconds": median("evaluation_seconds"),
            "train_seconds": median("train_seconds"),
            # the first group's: data loading and model builds (a later group's adds the
            # groups trained before it)
            "pack_setup_seconds": min(m.get("pack_setup_seconds", 0.0) for m in metas),
            "examples_per_second_per_trial": median("examples_per_second"),
            "log_tail": lines[-5:]}


def environment(absent: tuple[str, ...] = ABSENT_ON_DEVICE) -> dict:
    """The machine, the versions and the load; ``absent``: modules the accelerator machine
    lacks, listed where this process imported them anyway."""
    import jax
    import keras

    device = jax.devices()[0]
    load = os.getloadavg()
    return {"date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "platform": device.platform, "device_kind": device.device_kind,
            "devices": len(jax.devices()), "cpu_count": os.cpu_count(), "load_average": load,
            "python": platform.python_version(), "jax": jax.__version__,
            "keras": keras.__version__, "keras_backend": keras.backend.backend(),
            # none of these is on the accelerator machine: the path must not need them
            "absent_there_but_imported": sorted(m for m in absent if m in sys.modules)}


def write_results(out: str, name: str, result: dict, text: str, final: bool) -> None:
    """``<name>.json`` (every number; ``finished`` false until the end) and ``<name>.md``
    (the tables) into ``out``."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{name}.json"), "w") as fh:
        json.dump({**result, "finished": final}, fh, indent=1, default=str)
    with open(os.path.join(out, f"{name}.md"), "w") as fh:
        fh.write(text + "\n")


def _load(triple) -> str:
    return "/".join(f"{x:.2f}" for x in triple) if triple else "?"


def tables(result: dict) -> str:
    env = result["environment"]
    out = [f"{env['device_kind']} ({env['platform']}, {env['devices']} device(s)), "
           f"{env['cpu_count']} CPU cores, load average {_load(env['load_average_before'])} "
           f"before, {_load(env['load_average'])} after, jax {env['jax']}, "
           f"keras {env['keras']}, {env['date']}", "",
           "| batch | ms/step (median) | min-max | examples/s | probe ms/step | compile s |",
           "|---|---|---|---|---|---|"]
    for r in result["step_times"]:
        out.append(f"| {r['batch_size']} | {1e3 * r['seconds_per_step']:.3f} | "
                   f"{1e3 * r['seconds_per_step_min']:.3f}-{1e3 * r['seconds_per_step_max']:.3f} | "
                   f"{r['examples_per_second']:,.0f} | {1e3 * r['probe_seconds_per_step']:.3f} | "
                   f"{r['compile_seconds']:.2f} |")
    if not result["packs"]:
        return "\n".join(out)
    out += ["", "| pack K | batch | ms/step of the pack | trial-steps/s | examples/s | "
            "x over K=1 | compile s | finite |", "|---|---|---|---|---|---|---|---|"]
    for r in result["packs"]:
        speedup = "-" if r["speedup_over_one"] is None else f"{r['speedup_over_one']:.2f}"
        out.append(f"| {r['width']} | {r['batch_size']} | {1e3 * r['seconds_per_step']:.3f} | "
                   f"{r['trial_steps_per_second']:,.0f} | {r['examples_per_second']:,.0f} | "
                   f"{speedup} | {r['compile_seconds']:.2f} | {r['all_finite']} |")
    if result["studies"]:
        out += ["", "| run_pack: trials x steps | batch | vmap width | wall s | trials/hour | "
                "full budget | compile s | eval s | train s | setup s | ex/s per trial |",
                "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in result["studies"]:
        out += [f"| {s['trials']} x {s['steps']} | {s['batch_size']} | {s['vmap_width']} | "
                f"{s['wall_seconds']:.1f} | {s['trials_per_hour']:,.0f} | "
                f"{s['full_budget']}/{s['trials']} | {s['compile_seconds']:.2f} | "
                f"{s['evaluation_seconds']:.2f} | {s['train_seconds']:.2f} | "
                f"{s['pack_setup_seconds']:.2f} | {s['examples_per_second_per_trial']:,.0f} |"]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default=SPEC, help="the user's study spec (YAML)")
    parser.add_argument("--data", help="the .npz (default: the spec's dataset path)")
    parser.add_argument("--out", default=os.environ.get("OUT") or ".", help="folder for the results")
    parser.add_argument("--batch-sizes", default="8,32,256,2048")
    parser.add_argument("--widths", default="1,8,32,64")
    parser.add_argument("--pack-batch", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.5, help="about this long per timed chunk")
    parser.add_argument("--study-trials", type=int, default=16, help="run_pack's trials; 0: skip")
    parser.add_argument("--study-steps", type=int, default=500)
    parser.add_argument("--study-widths", default="default",
                        help="run_pack's vmap widths, one run each: 'default' (a study's: 1 on a "
                             "CPU, the user model's pack capacity on an accelerator), 'all' (every "
                             "trial at once) or a number; comma-separated")
    parser.add_argument("--quick", action="store_true",
                        help="3 repeats of 0.2 s; run_pack: at most 8 trials x 200 steps")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.seconds, args.study_steps = 3, 0.2, 200
        args.study_trials = min(args.study_trials, 8)
    args.batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    args.widths = [int(k) for k in args.widths.split(",")]
    os.environ.setdefault("KERAS_BACKEND", "jax")
    sys.path.insert(0, ROOT)
    import jax.numpy as jnp

    from batchscale.training.keras_setup import select_backend
    from batchscale.training.task_losses import loss_targets

    select_backend("jax")
    scratch = tempfile.mkdtemp(prefix="user-model-gpu-")
    started, load_before = time.perf_counter(), os.getloadavg()
    result = {"arguments": dict(vars(args)), "step_times": [], "packs": [], "studies": []}

    def save(final: bool = False) -> str:
        """Write what is measured so far (a part that fails on the device loses only itself)."""
        result["total_seconds"] = time.perf_counter() - started
        result["environment"] = {**environment(), "load_average_before": load_before}
        text = tables(result)
        write_results(args.out, "user_model_gpu", result, text, final)
        return text

    try:
        spec, _, pipeline = load_workload(args.spec, args.data, os.path.join(scratch, "a"),
                                          {"backend": "jax"})
        x, y = pipeline.arrays("train")
        x_all = jnp.asarray(x)
        y_all = jnp.asarray(loss_targets(pipeline.task, y, pipeline.num_outputs))
        result["workload"] = {
            "model": spec.workload.model, "data": spec.workload.data.path, "task": pipeline.task,
            "train_examples": int(len(x)), "input_shape": list(pipeline.input_shape),
            "optimizer": spec.workload.optimizer, "precision": spec.workload.precision}
        print(f"{result['workload']['model']} on {result['workload']['data']} "
              f"({len(x)} training examples), {environment()['device_kind']}", flush=True)
        result["step_times"] = step_times(spec, pipeline, x_all, y_all, args)
        save()
        result["packs"] = pack_rates(spec, pipeline, x_all, y_all, args)
        save()
        for i, width in enumerate(args.study_widths.split(",") if args.study_trials else []):
            result["studies"].append(study_pack(args, os.path.join(scratch, f"b{i}"), width))
            s = result["studies"][-1]
            print(f"  run_pack, {s['trials']} trials, vmap width {s['vmap_width']}: "
                  f"{s['wall_seconds']:.1f} s", flush=True)
            save()
        text = save(final=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"\n{text}\n\n{result['total_seconds']:.0f} s in all; "
          f"written: {os.path.join(args.out, 'user_model_gpu.json')}")

if __name__ == "__main__":
    main()
