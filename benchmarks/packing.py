"""Benchmark: trials per hour, one trial per process ("one-by-one") versus packs of K.

What one pod per trial costs is a fresh process per trial: interpreter start, imports,
data loading, model building and compilation, then a few seconds of training. A pack
(``run_pack``) pays those once for K trials and, on the JAX backend, trains them vmapped
in one jitted step. This script measures both as a pipeline task would run them: every
trial or pack in its own fresh Python process, its wall time taken from outside,
start-up and exit included.

Fair and bounded: every trial trains exactly ``--steps`` steps (the goal,
classification_error < 0, is unreachable; the learning-rate range is small enough that
no trial diverges: the table says how many trials ran their full budget), at the same
batch size, on mnist_5k, with the same evaluation grid, and the same trials (the same
metaparameters and seeds) whichever way they run. The one-by-one baseline runs only
``--one-by-one`` processes (3 by default) and reports the per-trial cost; packs run
trials 1..K, with ``width`` of them vmapped at once (``--widths``: run_pack's default, which
is one at a time on a CPU, and all K together). One-trial processes are interleaved with
the pack runs, so load from other work on the machine falls on both.

    python benchmarks/packing.py [--quick] [--models fc_128_128,simple_cnn_base]
        [--packs 1,4,16,64] [--cnn-packs 1,4] [--steps 200] [--cnn-steps 30]
        [--widths default,all] [--batch-size 32] [--one-by-one 3] [--resolution 0.25]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

CHILD = """
import json, sys
from batchscale.validation import parse_spec
from batchscale.search.trials import make_trials
from batchscale.store.layout import StudyStore
root, spec_path, mode, ids, width = sys.argv[1:6]
with open(spec_path) as f:
    spec = parse_spec(json.load(f))
store = StudyStore(root)
wanted = [int(i) for i in ids.split(",")]
trials = {t.trial_id: t for t in make_trials(spec)}
chosen = [trials[i] for i in wanted]
quiet = lambda *a, **k: None
if mode == "one":
    from batchscale.training.trainer import run_trial
    run_trial(spec, chosen[0], store, log=quiet)
else:
    from batchscale.training.packs import run_pack
    run_pack(spec, chosen, store, log=quiet, width=None if width == "default" else int(width))
"""


def study_dict(root: str, name: str, model: str, batch_size: int, steps: int, trials: int,
               resolution: float) -> dict:
    """A study whose trials all train exactly ``steps`` steps (unreachable goal)."""
    return {
        "name": name, "store": root, "backend": "jax",
        "workload": {"dataset": "mnist_5k", "model": model, "optimizer": "nesterov_momentum"},
        "batch_sizes": [batch_size], "trials_per_batch_size": trials,
        "search_space": {"learning_rate": {"scale": "log", "min": 0.003, "max": 0.03}},
        "fixed": {"momentum": 0.9}, "max_steps": steps,
        "goals": [{"metric": "classification_error", "value": 0.0}],
        "evaluation": {"resolution": resolution}, "seed": 0,
    }


def run_process(root: str, spec_path: str, mode: str, ids: list[int], width: str) -> float:
    """Wall seconds of one fresh process training ``ids`` (``mode``: one or pack;
    ``width``: trials vmapped at once, or "default" for run_pack's own choice)."""
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"}
    command = [sys.executable, "-c", CHILD, root, spec_path, mode, ",".join(map(str, ids)), width]
    tick = time.perf_counter()
    out = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - tick
    if out.returncode != 0:
        raise SystemExit(f"{mode} {ids} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    return wall


def read_back(store, spec, ids: list[int]) -> dict:
    """What the trainer wrote into each trial's metadata, summarised."""
    from batchscale.search.trials import make_trials

    trials = {t.trial_id: t for t in make_trials(spec)}
    metas = [store.read_metadata(spec, trials[i]) or {} for i in ids]

    def median(key):
        values = [m[key] for m in metas if m.get(key) is not None]
        return statistics.median(values) if values else None

    full = sum(1 for m in metas if m.get("status") == "COMPLETE" and m.get("steps") == spec.max_steps[
        spec.batch_sizes[0]])
    return {"full": full, "compile": median("compile_seconds"), "eval": median("evaluation_seconds"),
            "ex_s": median("examples_per_second"), "trainer": metas[0].get("trainer", "per-trial"),
            "vmap_width": metas[0].get("vmap_width")}


def plan(packs: list[int], widths: list[str], one_by_one: int) -> list[tuple[str, int, str]]:
    """Runs in order: one-trial processes interleaved with the packs, (mode, K, width);
    width "all" becomes K, and K = 1 runs once."""
    ones = [("one", 1, "default")] * one_by_one
    pack_runs = list(dict.fromkeys(("pack", k, str(k) if w == "all" else w)
                                   for k in packs for w in widths))
    if ("pack", 1, "1") in pack_runs and ("pack", 1, "default") in pack_runs:
        pack_runs.remove(("pack", 1, "1"))
    order = []
    while ones or pack_runs:
        if ones:
            order.append(ones.pop())
        if pack_runs:
            order.append(pack_runs.pop(0))
    return order


def fmt(value, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="fc_128_128 only, K = 1, 4, 16, 40 steps, 2 one-trial processes")
    parser.add_argument("--models", default="fc_128_128,simple_cnn_base")
    parser.add_argument("--packs", default="1,4,16,64", help="pack sizes K, fc models")
    parser.add_argument("--cnn-packs", default="1,4",
                        help="pack sizes K, other models (on CPU a vmapped CNN pack is slow: "
                             "K = 4 took about 6 min at 30 steps, so 16 and 64 only on request)")
    parser.add_argument("--steps", type=int, default=200, help="steps per trial, fc models")
    parser.add_argument("--cnn-steps", type=int, default=30, help="steps per trial, other models")
    parser.add_argument("--widths", default="default,all",
                        help="trials vmapped at once in a pack: 'default' (run_pack's own choice: "
                             "one on a CPU), 'all' (all K), or a number; comma-separated")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--one-by-one", type=int, default=3, help="one-trial processes timed")
    parser.add_argument("--resolution", type=float, default=0.25,
                        help="evaluation grid resolution (the spec's evaluation.resolution)")
    args = parser.parse_args()
    if args.quick:
        args.models, args.packs, args.steps, args.cnn_steps, args.one_by_one = (
            "fc_128_128", "1,4,16", 40, 10, 2)
    models = args.models.split(",")

    from batchscale.store.layout import StudyStore
    from batchscale.validation import parse_spec
    from batchscale.workloads.prepare import prepare_dataset

    print("Trials per hour on this machine: CPU only (JAX backend); no GPU was available "
          "(the device machine was not lent to this task).")
    print(f"mnist_5k, batch size {args.batch_size}, fixed steps per trial (fc: {args.steps}, "
          f"other models: {args.cnn_steps}), evaluation resolution {args.resolution}; every "
          "trial or pack in its own fresh process, wall time includes start-up and exit.")
    print(f"one-by-one: {args.one_by_one} one-trial processes timed (not K of them); their "
          "per-trial cost gives the one-by-one rate.")
    rows = []
    with tempfile.TemporaryDirectory() as root:
        store = StudyStore(root)
        prepare_dataset(store, "mnist_5k", log=lambda *a: None)
        for model in models:
            fc = model.startswith("fc")
            steps = args.steps if fc else args.cnn_steps
            packs = [int(k) for k in (args.packs if fc else args.cnn_packs).split(",")]
            most = max(packs + [args.one_by_one])
            for mode, k, width in plan(packs, args.widths.split(","), args.one_by_one):
                ones_done = sum(1 for r in rows if r["model"] == model and r["mode"] == "one-by-one")
                ids = [ones_done + 1] if mode == "one" else list(range(1, k + 1))
                name = f"bench-{model.replace('_', '-')}-{mode}-{k}-{width}-{ids[0]}"
                raw = study_dict(root, name, model, args.batch_size, steps, most, args.resolution)
                spec = parse_spec(raw)
                store.register_study(spec)
                spec_path = os.path.join(root, f"{name}.json")
                with open(spec_path, "w") as f:
                    json.dump(raw, f)
                wall = run_process(root, spec_path, mode, ids, width)
                row = {"model": model, "mode": "one-by-one" if mode == "one" else "pack", "k": k,
                       "trials": len(ids), "wall": wall, **read_back(store, spec, ids)}
                rows.append(row)
                print(f"  ran {model} {row['mode']} K={k} vmap width {row['vmap_width'] or '-'}: "
                      f"{wall:.1f}s", flush=True)
    print_table(rows)


def print_table(rows: list[dict]) -> None:
    print()
    print("| model | mode | K | trials | wall s | s/trial | trials/hour | speed-up | full budget "
          "| compile s | eval s | train ex/s per trial | x width |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for model in dict.fromkeys(r["model"] for r in rows):
        ones = [r for r in rows if r["model"] == model and r["mode"] == "one-by-one"]
        base_wall = sum(r["wall"] for r in ones)
        base_rate = 3600 * len(ones) / base_wall if ones else None
        if ones:
            print(f"| {model} | one-by-one | 1 | {len(ones)} | {base_wall:.1f} | "
                  f"{base_wall / len(ones):.1f} | {base_rate:.0f} | 1.00 | "
                  f"{sum(r['full'] for r in ones)}/{len(ones)} | - | - | "
                  f"{fmt(statistics.median(r['ex_s'] for r in ones), '.0f')} | - |")
        for r in rows:
            if r["model"] != model or r["mode"] != "pack":
                continue
            rate = 3600 * r["trials"] / r["wall"]
            label = f"pack ({r['trainer']}, width {r['vmap_width'] or '-'})"
            print(f"| {model} | {label} | {r['k']} | {r['trials']} | {r['wall']:.1f} | "
                  f"{r['wall'] / r['trials']:.2f} | {rate:.0f} | "
                  f"{fmt(rate / base_rate if base_rate else None)} | {r['full']}/{r['trials']} | "
                  f"{fmt(r['compile'])} | {fmt(r['eval'])} | {fmt(r['ex_s'], '.0f')} | "
                  f"{fmt(r['ex_s'] and r['ex_s'] * (r['vmap_width'] or 1), '.0f')} |")
    print()
    print("wall s: the processes' wall time from outside (start-up, imports, data loading, "
          "compilation, training, evaluation, writing, exit); trials/hour = 3600 x trials / wall; "
          "speed-up: trials/hour over one-by-one's. full budget: trials COMPLETE after every step "
          "of their budget. compile s, eval s, train ex/s: medians over the pack's trials of the "
          "compile_seconds, evaluation_seconds (of the trial's vmapped group: width trials "
          "evaluated together) and examples_per_second (per trial, compile excluded) run_pack "
          "wrote into each trial's metadata.json (run_trial writes only examples_per_second, its "
          "first compiling call included); x width: that rate times the vmap width, the training "
          "throughput of the trials training at once. Shared 2-core machine: figures are noisy.")


if __name__ == "__main__":
    main()
