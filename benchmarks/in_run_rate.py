"""Benchmark: a pack's training rate inside a real trial against its steady rate, and what
one evaluation costs, for two versions of the code, interleaved.

For the quickstart's workload (fc_128_128 on mnist_5k, Nesterov momentum, JAX, CPU) at each
batch size, one worker process per code version and repetition measures:

- steady: examples per second of a pack of one trained in long ``run_chunk`` calls
  (compilation excluded; after a warm-up call);
- in run: one real trial (``packs.run_pack``, the ``full`` protocol: every step of the
  quickstart's budget, evaluated at the quickstart's grid, resolution 0.05), its training
  examples per second over every ``_Loop._train`` call (host work on the batch indices
  included, compilation excluded) and the median seconds of one ``_Loop._evaluate``;
  ``share``: training's part of training plus evaluation.

Workers alternate old, new, old, new ... (``--repeats`` rounds), so load from other work on
the shared machine falls on both; each version is imported from its own source tree
(``PYTHONPATH``), e.g. a worktree of main at the commit before the change:

    git worktree add --detach /tmp/old <commit>
    .venv/bin/python benchmarks/in_run_rate.py --old /tmp/old [--new .] [--repeats 3]
        [--batch-sizes 8,64,256,4000]
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

HERE = os.path.dirname(os.path.abspath(__file__))
QUICKSTART_MAX_STEPS = {8: 5000, 16: 4000, 32: 3000, 64: 2000, 128: 1500, 256: 1000, 512: 800,
                        1024: 600, 2048: 500, 4000: 400}


def steady_steps(batch_size: int) -> int:
    """Steps of one steady measurement: about 0.3-3 s at each batch size on 2 cores."""
    return max(40, min(2000, 250_000 // batch_size))


# ---- worker: one code version, every batch size ---------------------------------------
def _timed(owner, name: str, log: list, compile_of=None):
    """Wrap ``owner.name`` to append each call's seconds (less the compilation it did,
    read from ``compile_of(self)``) and its arguments to ``log``."""
    original = getattr(owner, name)

    def wrapper(self, *args, **kwargs):
        before = compile_of(self) if compile_of else 0.0
        tick = time.perf_counter()
        out = original(self, *args, **kwargs)
        seconds = time.perf_counter() - tick - ((compile_of(self) - before) if compile_of else 0.0)
        log.append((args, seconds))
        return out

    setattr(owner, name, wrapper)


def worker(batch_sizes: list[int]) -> dict:
    os.environ["KERAS_BACKEND"] = "jax"
    sys.path.insert(0, HERE)
    from pack_throughput import PackOfOne, batch_indices, load_mnist_5k

    import batchscale
    from batchscale.search.trials import make_trials
    from batchscale.store.layout import StudyStore
    from batchscale.training import pack_loop
    from batchscale.training.packs import run_pack
    from batchscale.validation import parse_spec
    from batchscale.workloads.prepare import prepare_dataset

    trains, evaluations = [], []
    _timed(pack_loop._Loop, "_train", trains, lambda loop: loop.step_fn.compile_seconds)
    _timed(pack_loop._Loop, "_evaluate", evaluations)
    root = tempfile.mkdtemp(prefix="in-run-rate-")
    spec = parse_spec({
        "name": "rate", "store": root, "protocol": "full",
        "workload": {"dataset": "mnist_5k", "model": "fc_128_128", "optimizer": "nesterov_momentum"},
        "batch_sizes": batch_sizes, "trials_per_batch_size": 1, "schedule": "constant",
        "search_space": {"learning_rate": {"scale": "log", "min": 0.02, "max": 0.021}},
        "fixed": {"momentum": 0.9, "label_smoothing": 0.0},
        "goals": [{"metric": "classification_error", "value": 0.08}],
        "max_steps": {b: QUICKSTART_MAX_STEPS[b] for b in batch_sizes},
        "evaluation": {"resolution": 0.05, "train_examples": 1000}, "seed": 0, "backend": "jax"})
    store = StudyStore(root)
    prepare_dataset(store, "mnist_5k", log=lambda *a: None)
    store.register_study(spec)
    pipeline = load_mnist_5k()
    import jax.numpy as jnp
    import numpy as np

    x, y = pipeline.arrays("train")
    x_all, y_all = jnp.asarray(x), jnp.asarray(np.eye(pipeline.num_outputs, dtype=np.float32)[y])
    out = {"code": os.path.dirname(os.path.dirname(batchscale.__file__))}
    for batch_size in batch_sizes:
        pack = PackOfOne("fc_128_128", pipeline, x_all, y_all)
        steps = steady_steps(batch_size)
        pack.chunks(batch_indices(steps, batch_size, len(x), 1), steps)  # compiles
        seconds = pack.chunks(batch_indices(steps, batch_size, len(x), 2), steps)
        steady = steps * batch_size / seconds
        del trains[:], evaluations[:]
        [meta] = run_pack(spec, [t for t in make_trials(spec) if t.batch_size == batch_size],
                          store, log=lambda *a: None, width=1)
        assert meta["status"] == "COMPLETE", meta["status"]
        train_seconds = sum(s for _, s in trains)
        eval_seconds = [s for _, s in evaluations]
        trained = sum(args[1] for args, _ in trains)
        out[str(batch_size)] = {
            "steady": steady, "in_run": trained * batch_size / train_seconds,
            "eval_ms": 1e3 * statistics.median(eval_seconds), "evaluations": len(eval_seconds),
            "calls": len(trains), "train_s": train_seconds, "eval_s": sum(eval_seconds[1:]),
            "first_eval_s": eval_seconds[0]}
    return out


# ---- driver: old and new interleaved --------------------------------------------------
def run_worker(code: str, batch_sizes: list[int]) -> dict:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(code), "KERAS_BACKEND": "jax"}
    done = subprocess.run([sys.executable, __file__, "--worker", ",".join(map(str, batch_sizes))],
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"worker for {code} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", help="source tree of the old code (a worktree)")
    parser.add_argument("--new", default=os.path.dirname(HERE), help="source tree of the new code")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-sizes", default="8,64,256,4000")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker([int(b) for b in args.worker.split(",")])))
        return
    if not args.old:
        parser.error("--old is required (a source tree of the code to compare with)")
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, load "
          f"average {os.getloadavg()[0]:.1f}; old {args.old}, new {args.new}; "
          f"{args.repeats} interleaved rounds", flush=True)
    results: dict[str, list[dict]] = {"old": [], "new": []}
    for repeat in range(args.repeats):
        for name in ("old", "new"):
            results[name].append(run_worker(getattr(args, name), batch_sizes))
            got = results[name][-1]
            line = ", ".join(f"{b}: {got[str(b)]['in_run'] / got[str(b)]['steady']:.2f} "
                             f"{got[str(b)]['eval_ms']:.2f} ms" for b in batch_sizes)
            print(f"  round {repeat + 1} {name} ({got['code']}): in-run/steady, evaluation: {line}",
                  flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    print("\n| batch | code | steady ex/s | in-run ex/s | in-run / steady | one evaluation, ms "
          "| evaluations | training share of train + eval | compiled calls |")
    print("|---|---|---|---|---|---|---|---|---|")
    medians = {}
    for b in map(str, batch_sizes):
        for name in ("old", "new"):
            runs = [r[b] for r in results[name]]
            med = {k: statistics.median(r[k] for r in runs)
                   for k in ("steady", "in_run", "eval_ms", "train_s", "eval_s")}
            medians[b, name] = med
            ratio = statistics.median(r["in_run"] / r["steady"] for r in runs)
            share = statistics.median(r["train_s"] / (r["train_s"] + r["eval_s"]) for r in runs)
            print(f"| {b} | {name} | {med['steady']:,.0f} | {med['in_run']:,.0f} | {ratio:.2f} | "
                  f"{med['eval_ms']:.2f} | {runs[0]['evaluations']} | {share:.2f} | "
                  f"{runs[0]['calls']} |")
    print("\n| batch | new/old in-run ex/s (per round) | new/old evaluation time (per round) |")
    print("|---|---|---|")
    for b in map(str, batch_sizes):
        rate = [n[b]["in_run"] / o[b]["in_run"] for o, n in zip(results["old"], results["new"])]
        cost = [n[b]["eval_ms"] / o[b]["eval_ms"] for o, n in zip(results["old"], results["new"])]
        print(f"| {b} | {statistics.median(rate):.2f} ({', '.join(f'{r:.2f}' for r in rate)}) | "
              f"{statistics.median(cost):.2f} ({', '.join(f'{c:.2f}' for c in cost)}) |")


if __name__ == "__main__":
    main()
