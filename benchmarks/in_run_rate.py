"""Benchmark: a pack's training rate inside a real trial's evaluation grid against its steady
rate, and what one evaluation costs, old code against new, interleaved step by step.

For the quickstart's workload (fc_128_128 on mnist_5k, Nesterov momentum, learning rate
0.02, momentum 0.9, JAX, CPU, a pack of one as a CPU trains it) at each batch size:

- steady: examples per second of ``run_chunk`` over long chunks (``--steady-steps``),
  compilation excluded (a warm-up call first);
- in run: the trial trained through the quickstart's evaluation grid (its step budget,
  resolution 0.05) as ``pack_loop._Loop`` does: chunks of at most ``chunk_steps`` steps
  (the loop's own rule: up to 4x the last chunk, about ``CHUNK_SECONDS`` a call) ending at
  each evaluation step, each chunk's batch indices taken from the trial's
  ``EpochPermutations`` and sent as ``_Loop._train`` sends them (old: ``np.stack`` of the
  takes, a ``chunk_capacity`` buffer; new: written into an ``index_buffer``); examples per
  second over those calls, compilation excluded;
- one evaluation: the median seconds of the pack's evaluation at each grid step (old:
  ``evaluate_pack`` over ``PackStep.predict``; new: ``evaluator.PackEvaluation``, whose
  first evaluation moves the batches to the device);
- share: training's part of training plus evaluation inside the run (the first
  evaluation, which compiles, left out).

Old and new run in ONE process, alternating at every evaluation interval (which goes
first alternates too), so load from other work on the shared machine falls on both alike.
The old ``PackStep`` is loaded from the old source tree's vmapped_step.py (``--old``: a
worktree of main at the commit before the change); the rest (the evaluator, the metrics,
the data) is this tree's, where ``evaluate_pack`` is unchanged. The two trials train the
same steps on the same data, so at every evaluation their rows must be equal to the bit:
the benchmark checks it and stops at the first difference.

    git worktree add --detach /tmp/old <commit>
    .venv/bin/python benchmarks/in_run_rate.py --old /tmp/old [--batch-sizes 8,64,256,4000]
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
QUICKSTART_MAX_STEPS = {8: 5000, 16: 4000, 32: 3000, 64: 2000, 128: 1500, 256: 1000, 512: 800,
                        1024: 600, 2048: 500, 4000: 400}
HYPER = {"learning_rate": 0.02, "momentum": 0.9}


def load_old_step_module(tree: str):
    """The old tree's vmapped_step.py as its own module (it imports only modules this change
    left as they were: names, optimizer_rules, schedules, task_losses)."""
    path = os.path.join(tree, "batchscale", "training", "vmapped_step.py")
    spec = importlib.util.spec_from_file_location("old_vmapped_step", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


class Version:
    """One version's pack of one: its PackStep, state, data order and timings."""

    def __init__(self, name, module, model, arrays, pipeline, x_all, y_all, batch_size, seed):
        from batchscale.training.evaluator import Evaluator
        from batchscale.workloads.data_order import EpochPermutations

        self.name, self.module, self.x_all, self.y_all = name, module, x_all, y_all
        slots = ("velocity",)
        self.step_fn = module.PackStep(model, "constant", "nesterov_momentum", False,
                                       pipeline.num_outputs)
        self.state = module.stack_trials([arrays], slots)
        self.hyper = module.stack_hyper([HYPER], (), "nesterov_momentum")
        self.order = EpochPermutations(pipeline.num_train_examples, batch_size, seed)
        self.evaluators = [Evaluator(None, pipeline, 1000, seed)]
        self.evaluation = None
        self.train_seconds = 0.0
        self.eval_seconds: list[float] = []

    def train(self, step: int, n: int, batch_size: int) -> float:
        """``_Loop._train``'s host work and call, old or new; seconds less compilation."""
        compile_before = self.step_fn.compile_seconds
        tick = time.perf_counter()
        if self.name == "old":
            indices = np.stack([self.order.take(n).reshape(n, -1)], 1)
            self.state, finite = self.step_fn.run_chunk(self.state, self.hyper, indices, step,
                                                        self.x_all, self.y_all)
        else:
            from batchscale.training.chunk_buffers import index_buffer

            indices = index_buffer(n, 1, batch_size)
            indices[:n, 0] = self.order.take(n).reshape(n, -1)
            self.state, finite = self.step_fn.run_chunk(self.state, self.hyper, indices, step,
                                                        self.x_all, self.y_all, steps=n)
        seconds = time.perf_counter() - tick - (self.step_fn.compile_seconds - compile_before)
        assert finite.all(), "the benchmark trial diverged"
        self.train_seconds += seconds
        return seconds

    def evaluate(self, step: int) -> dict:
        from batchscale.training.evaluator import PackEvaluation, evaluate_pack

        tick = time.perf_counter()
        if self.name == "old":
            rows = evaluate_pack(self.evaluators, lambda x, shared: self.step_fn.predict(
                self.state, x, shared, self.x_all), step, 0.0)
        else:
            if self.evaluation is None:
                self.evaluation = PackEvaluation(self.evaluators, self.step_fn, self.x_all)
            rows = self.evaluation(self.state, step, 0.0)
        self.eval_seconds.append(time.perf_counter() - tick)
        return {k: v for k, v in rows[0].items() if k != "wall_time"}


def steady_rate(version: Version, batch_size: int, steps: int, seed: int) -> float:
    from pack_throughput import batch_indices

    indices = batch_indices(steps, batch_size, int(version.x_all.shape[0]), seed)[:, None, :]
    compile_before = version.step_fn.compile_seconds
    tick = time.perf_counter()
    version.state, _ = version.step_fn.run_chunk(version.state, version.hyper, indices, 0,
                                                 version.x_all, version.y_all)
    seconds = time.perf_counter() - tick - (version.step_fn.compile_seconds - compile_before)
    return steps * batch_size / seconds


def one_batch_size(old_module, new_module, pipeline, x_all, y_all, batch_size: int,
                   steady_steps: int, repeats: int) -> dict:
    import keras

    from batchscale.training.evaluation_grid import evaluation_steps
    from batchscale.training.pack_loop import CHUNK_SECONDS
    from batchscale.workloads import build_model

    keras.utils.set_random_seed(0)
    model = build_model("fc_128_128", pipeline.input_shape, pipeline.num_outputs)
    arrays = new_module.initial_arrays(model, ("velocity",))

    def pair():
        out = []
        for name, module in (("old", old_module), ("new", new_module)):
            out.append(Version(name, module, model, arrays, pipeline, x_all, y_all, batch_size, 0))
        return out

    steady = {"old": [], "new": []}
    versions = pair()
    for v in versions:  # warm-up: compiles the long chunk
        steady_rate(v, batch_size, steady_steps, 1)
    for repeat in range(repeats):
        for v in (versions if repeat % 2 == 0 else versions[::-1]):
            steady[v.name].append(steady_rate(v, batch_size, steady_steps, 2 + repeat))

    versions = pair()
    grid = evaluation_steps(QUICKSTART_MAX_STEPS[batch_size], 0.05)
    chunk_steps, step, calls = 1, 0, 0
    for turn, target in enumerate(grid):
        while step < target:
            n = min(target - step, chunk_steps)
            seconds = [v.train(step, n, batch_size)
                       for v in (versions if turn % 2 == 0 else versions[::-1])]
            per_step = min(seconds) / n
            chunk_steps = int(max(1, min(4 * n, CHUNK_SECONDS / max(per_step, 1e-6))))
            step, calls = step + n, calls + 1
        rows = {v.name: v.evaluate(step) for v in (versions if turn % 2 == 0 else versions[::-1])}
        for name, value in rows["old"].items():
            other = rows["new"][name]
            if not (value == other or (math.isnan(value) and math.isnan(other))):
                raise SystemExit(f"batch {batch_size} step {step}: {name} old {value!r}, new {other!r}")
    out = {}
    for v in versions:
        out[v.name] = {
            "steady": statistics.median(steady[v.name]),
            "in_run": step * batch_size / v.train_seconds,
            "eval_ms": 1e3 * statistics.median(v.eval_seconds),
            "first_eval_ms": 1e3 * v.eval_seconds[0],
            "share": v.train_seconds / (v.train_seconds + sum(v.eval_seconds[1:])),
            "compiled": len(v.step_fn._compiled)}
    out["evaluations"], out["calls"] = len(grid), calls
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="source tree of the old code (a worktree)")
    parser.add_argument("--batch-sizes", default="8,64,256,4000")
    parser.add_argument("--steady-repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ["KERAS_BACKEND"] = "jax"
    sys.path.insert(0, HERE)
    import jax
    import jax.numpy as jnp
    from pack_throughput import load_mnist_5k

    from batchscale.training import vmapped_step

    old_module = load_old_step_module(args.old)
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, JAX on "
          f"{jax.devices()[0].platform.upper()}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}; old vmapped_step: {old_module.__file__}", flush=True)
    pipeline = load_mnist_5k()
    x, y = pipeline.arrays("train")
    x_all, y_all = jnp.asarray(x), jnp.asarray(np.eye(pipeline.num_outputs, dtype=np.float32)[y])
    table = []
    for batch_size in (int(b) for b in args.batch_sizes.split(",")):
        steady_steps = max(40, min(2000, 250_000 // batch_size))
        got = one_batch_size(old_module, vmapped_step, pipeline, x_all, y_all, batch_size,
                             steady_steps, args.steady_repeats)
        table.append((batch_size, got))
        print(f"  batch {batch_size}: rows equal at all {got['evaluations']} evaluations; "
              + "; ".join(f"{n} in-run/steady {got[n]['in_run'] / got[n]['steady']:.2f}, "
                          f"evaluation {got[n]['eval_ms']:.2f} ms" for n in ("old", "new")),
              flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    print("\n| batch | code | steady ex/s | in-run ex/s | in-run / steady | one evaluation, ms "
          "(first) | training share of train + eval | compiled loops | evaluations, chunks |")
    print("|---|---|---|---|---|---|---|---|---|")
    for batch_size, got in table:
        for name in ("old", "new"):
            g = got[name]
            print(f"| {batch_size} | {name} | {g['steady']:,.0f} | {g['in_run']:,.0f} | "
                  f"{g['in_run'] / g['steady']:.2f} | {g['eval_ms']:.2f} ({g['first_eval_ms']:.0f}) "
                  f"| {g['share']:.2f} | {g['compiled']} | {got['evaluations']}, {got['calls']} |")
    print("\n| batch | new/old in-run ex/s | new/old one evaluation |")
    print("|---|---|---|")
    for batch_size, got in table:
        print(f"| {batch_size} | {got['new']['in_run'] / got['old']['in_run']:.2f} | "
              f"{got['new']['eval_ms'] / got['old']['eval_ms']:.2f} |")


if __name__ == "__main__":
    main()
