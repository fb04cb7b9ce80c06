"""Benchmark: steady training throughput of a pack of one versus plain ``model.fit``.

Part 1 (the acceptance bar of trial packs): examples per second, compilation excluded,
of ``PackStep`` training ONE trial in long compiled chunks (``run_chunk``, e.g. 500
steps a call, after a warm-up call) against plain Keras: the same model built the same
way, ``keras.optimizers.SGD(learning_rate, momentum, nesterov=True)``,
``CategoricalCrossentropy(from_logits=True)``, one-hot labels, one long ``fit`` call over
the same number of steps after a warm-up ``fit``. Same data (mnist_5k's training
arrays), same batches, JAX backend, CPU. The two alternate (A B A B ...) in one process
so load from other work on the machine falls on both; the medians and their ratio are
printed per batch size.

Part 2 (where a compiled multi-step call pays): the same ``PackStep`` trained by one
long chunk per call, by ``run_chunk`` with 1-step chunks (one call and one host sync per
step), and by a plain jitted vmapped step without the loop (one asynchronous call per
step, synchronised at the end), for fc_128_128 and simple_cnn_base, interleaved too, with
plain ``model.fit`` as a reference.

Part 3 (what vmapping over trials does to a model's evaluation): ``PackStep.predict``
of K trials in one vmapped call versus one jitted call per trial.

    python benchmarks/pack_throughput.py [--quick] [--batch-sizes 8,32] [--repeats 5]
        [--steps 2000] [--chunk 500] [--cnn-steps 40] [--cnn-chunk 40] [--widths 1,4]
        [--no-chunking]
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import sys
import tempfile
import time
from functools import partial

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEARNING_RATE, MOMENTUM = 0.01, 0.9


def batch_indices(steps: int, batch_size: int, n: int, seed: int) -> np.ndarray:
    """(steps, batch) example indices: consecutive epochs of shuffled training examples."""
    rng = np.random.default_rng(seed)
    need = steps * batch_size
    order = np.concatenate([rng.permutation(n) for _ in range(-(-need // n))])[:need]
    return order.reshape(steps, batch_size).astype(np.int32)


class PackOfOne:
    """One trial's PackStep with its state, trained in chunks of a given length."""

    def __init__(self, model_name, pipeline, x_all, y_all):
        import keras

        from batchscale.training.vmapped_step import PackStep, initial_arrays, stack_hyper, stack_trials
        from batchscale.workloads import build_model

        keras.utils.set_random_seed(0)
        model = build_model(model_name, pipeline.input_shape, pipeline.num_outputs)
        self.step = PackStep(model, "constant", "nesterov_momentum", False, pipeline.num_outputs)
        slots = ("velocity",)  # nesterov_momentum's (optimizer_rules.SLOTS)
        self.state = stack_trials([initial_arrays(model, slots)], slots)
        self.hyper = stack_hyper([{"learning_rate": LEARNING_RATE, "momentum": MOMENTUM}], (),
                                 "nesterov_momentum")
        self.x_all, self.y_all = x_all, y_all
        self.done = 0
        self._plain = None

    def chunks(self, indices: np.ndarray, chunk: int) -> float:
        """Train ``indices`` (steps, batch) in ``run_chunk`` calls of ``chunk`` steps; seconds."""
        tick = time.perf_counter()
        for start in range(0, len(indices), chunk):
            part = indices[start:start + chunk][:, None, :]  # (steps, 1 trial, batch)
            self.state, finite = self.step.run_chunk(self.state, self.hyper, part, self.done,
                                                     self.x_all, self.y_all)
            self.done += len(part)
        seconds = time.perf_counter() - tick
        assert finite.all(), "the benchmark trial diverged"
        return seconds

    def plain_steps(self, indices: np.ndarray) -> float:
        """Train one step per call of a jitted vmapped step (no loop inside); seconds."""
        import jax
        import jax.numpy as jnp

        if self._plain is None:
            step_all = jax.vmap(self.step._one_trial, in_axes=(0, 0, 0, 0, 0, 0, None))

            def one(carry, hyper, batch, step, x_all, y_all):
                trainable, non_trainable, slots, loss = step_all(
                    *carry, hyper, x_all[batch], y_all[batch], step)
                return (trainable, non_trainable, slots), loss

            self._plain = jax.jit(one, donate_argnums=(0,))
        carry = (self.state.trainable, self.state.non_trainable, self.state.slots)
        device_indices = jnp.asarray(indices[:, None, :])
        tick = time.perf_counter()
        for i in range(len(indices)):
            carry, loss = self._plain(carry, self.hyper, device_indices[i], jnp.int32(self.done + i),
                                      self.x_all, self.y_all)
        jax.block_until_ready(carry)
        seconds = time.perf_counter() - tick
        from batchscale.training.vmapped_step import StackedState

        self.state = StackedState(list(carry[0]), list(carry[1]),
                                  {name: list(values) for name, values in carry[2].items()})
        self.done += len(indices)
        return seconds


class PlainFit:
    """The same model with Keras' own SGD (Nesterov momentum), trained by ``fit``."""

    def __init__(self, model_name, pipeline, x, one_hot):
        import keras

        from batchscale.workloads import build_model

        keras.utils.set_random_seed(0)
        self.model = build_model(model_name, pipeline.input_shape, pipeline.num_outputs)
        self.model.compile(
            optimizer=keras.optimizers.SGD(LEARNING_RATE, momentum=MOMENTUM, nesterov=True),
            loss=keras.losses.CategoricalCrossentropy(from_logits=True))
        self.x, self.one_hot = x, one_hot

    def fit(self, indices: np.ndarray) -> float:
        """One ``fit`` call over ``indices`` (steps, batch); seconds (slicing excluded)."""
        flat = indices.reshape(-1)
        x, y = self.x[flat], self.one_hot[flat]
        tick = time.perf_counter()
        self.model.fit(x, y, batch_size=indices.shape[1], epochs=1, shuffle=False, verbose=0)
        return time.perf_counter() - tick


def load_mnist_5k():
    from batchscale.store.layout import StudyStore
    from batchscale.workloads import get_dataset
    from batchscale.workloads.dataset_registry import open_pipeline
    from batchscale.workloads.prepare import prepare_dataset

    root = tempfile.mkdtemp(prefix="pack-throughput-")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    store = StudyStore(root)
    prepare_dataset(store, "mnist_5k", log=lambda *a: None)
    return open_pipeline(store, get_dataset("mnist_5k"))


def part_one(args, pipeline, x, one_hot, x_all, y_all) -> None:
    print(f"\nPart 1: fc_128_128, pack of one ({args.chunk}-step chunks) vs model.fit, "
          f"{args.steps} steps per measurement, {args.repeats} interleaved repetitions")
    table = []
    for batch_size in args.batch_sizes:
        pack = PackOfOne("fc_128_128", pipeline, x_all, y_all)
        fit = PlainFit("fc_128_128", pipeline, x, one_hot)
        warm = batch_indices(min(args.chunk, args.steps), batch_size, len(x), 1)
        pack.chunks(warm, args.chunk)
        fit.fit(warm)
        rates = {"pack": [], "fit": []}
        for repeat in range(args.repeats):
            indices = batch_indices(args.steps, batch_size, len(x), 10 + repeat)
            rates["pack"].append(indices.size / pack.chunks(indices, args.chunk))
            rates["fit"].append(indices.size / fit.fit(indices))
            print(f"  batch {batch_size} repeat {repeat + 1}: pack {rates['pack'][-1]:.0f} ex/s, "
                  f"fit {rates['fit'][-1]:.0f} ex/s", flush=True)
        table.append((batch_size, rates))
    print("\n| batch | pack of one ex/s (median) | model.fit ex/s (median) | pack/fit | "
          "pack/fit per repetition |")
    print("|---|---|---|---|---|")
    for batch_size, rates in table:
        p, f = statistics.median(rates["pack"]), statistics.median(rates["fit"])
        each = ", ".join(f"{a / b:.2f}" for a, b in zip(rates["pack"], rates["fit"]))
        print(f"| {batch_size} | {p:,.0f} | {f:,.0f} | {p / f:.2f} | {each} |")


def part_two(args, pipeline, x, one_hot, x_all, y_all) -> None:
    print(f"\nPart 2: one compiled multi-step call vs one call per step, {args.repeats} "
          "interleaved repetitions")
    table = []
    for model_name in ("fc_128_128", "simple_cnn_base"):
        steps, chunk = ((args.steps, args.chunk) if model_name.startswith("fc")
                        else (args.cnn_steps, args.cnn_chunk))
        for batch_size in args.batch_sizes:
            pack = PackOfOne(model_name, pipeline, x_all, y_all)
            fit = PlainFit(model_name, pipeline, x, one_hot)
            warm = batch_indices(2, batch_size, len(x), 1)
            pack.chunks(warm, 1)
            pack.plain_steps(warm)
            fit.fit(warm)
            rates = {"chunk": [], "run_chunk x1": [], "plain step": [], "fit": []}
            for repeat in range(args.repeats):
                indices = batch_indices(steps, batch_size, len(x), 10 + repeat)
                rates["chunk"].append(indices.size / pack.chunks(indices, chunk))
                rates["run_chunk x1"].append(indices.size / pack.chunks(indices, 1))
                rates["plain step"].append(indices.size / pack.plain_steps(indices))
                rates["fit"].append(indices.size / fit.fit(indices))
            line = ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in rates.items())
            print(f"  {model_name} batch {batch_size}: {line} ex/s", flush=True)
            table.append((model_name, batch_size, steps, chunk, rates))
    print("\n| model | batch | steps | one call of N steps, ex/s | run_chunk 1 step a call, ex/s "
          "| plain jitted step a call, ex/s | model.fit, ex/s | chunk / run_chunk x1 "
          "| chunk / plain step | chunk / fit |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model_name, batch_size, steps, chunk, rates in table:
        c, r, s, f = (statistics.median(rates[k]) for k in ("chunk", "run_chunk x1", "plain step", "fit"))
        print(f"| {model_name} | {batch_size} | {steps} (N = {chunk}) | {c:,.0f} | {r:,.0f} | "
              f"{s:,.0f} | {f:,.0f} | {c / r:.2f} | {c / s:.2f} | {c / f:.2f} |")


def predict_alone(model, trainable, non_trainable, inputs):
    return model.stateless_call(trainable, non_trainable, inputs, training=False)[0]


def predict_rates(step, alone, arrays, width, inputs, repeats) -> tuple[float, float]:
    """Median trial-examples per second: ``width`` trials' logits by one vmapped
    ``PackStep.predict`` call, and by one jitted call per trial (interleaved)."""
    from batchscale.training.vmapped_step import stack_trials

    state = stack_trials([arrays] * width, ("velocity",))
    trials = [([v[i] for v in state.trainable], [v[i] for v in state.non_trainable])
              for i in range(width)]
    rates = {"vmapped": [], "one by one": []}
    for repeat in range(repeats + 1):  # the first one compiles
        tick = time.perf_counter()
        step.predict(state, inputs, True)
        vmapped = time.perf_counter() - tick
        tick = time.perf_counter()
        for trainable, non_trainable in trials:
            np.asarray(alone(trainable, non_trainable, inputs))
        one_by_one = time.perf_counter() - tick
        if repeat:
            rates["vmapped"].append(width * len(inputs) / vmapped)
            rates["one by one"].append(width * len(inputs) / one_by_one)
    return statistics.median(rates["vmapped"]), statistics.median(rates["one by one"])


def part_three(args, pipeline, x) -> None:
    """Evaluation: ``PackStep.predict`` of K trials in one vmapped call versus one
    jitted call per trial (what vmapping a model over trials costs or saves)."""
    import jax
    import keras

    from batchscale.training.vmapped_step import PackStep, initial_arrays
    from batchscale.workloads import build_model

    print(f"\nPart 3: evaluation, K trials' logits of 1,024 examples, {args.repeats} interleaved "
          "repetitions")
    inputs = x[:1024]
    table = []
    for model_name in ("fc_128_128", "simple_cnn_base"):
        keras.utils.set_random_seed(0)
        model = build_model(model_name, pipeline.input_shape, pipeline.num_outputs)
        step = PackStep(model, "constant", "nesterov_momentum", False, pipeline.num_outputs)
        alone = jax.jit(partial(predict_alone, model))
        for width in args.widths:
            v, o = predict_rates(step, alone, initial_arrays(model, ("velocity",)), width, inputs,
                                 args.repeats)
            print(f"  {model_name} K={width}: vmapped {v:.0f}, one by one {o:.0f} trial-examples/s",
                  flush=True)
            table.append((model_name, width, v, o))
    print("\n| model | K | vmapped predict, trial-examples/s | one jitted call per trial | "
          "vmapped / one by one |")
    print("|---|---|---|---|---|")
    for model_name, width, v, o in table:
        print(f"| {model_name} | {width} | {v:,.0f} | {o:,.0f} | {v / o:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and 2 repetitions")
    parser.add_argument("--batch-sizes", default="8,32")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2000, help="steps per measurement, fc_128_128")
    parser.add_argument("--chunk", type=int, default=500, help="steps per run_chunk call, fc_128_128")
    parser.add_argument("--cnn-steps", type=int, default=40, help="steps per measurement, CNN")
    parser.add_argument("--cnn-chunk", type=int, default=40, help="steps per run_chunk call, CNN")
    parser.add_argument("--widths", default="1,4", help="pack sizes K of part 3 (16: +3 min, 14 GB)")
    parser.add_argument("--no-chunking", action="store_true", help="part 1 only")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.steps, args.chunk, args.cnn_steps, args.cnn_chunk = 2, 500, 250, 20, 20
        args.widths = "1,4"
    args.batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    args.widths = [int(k) for k in args.widths.split(",")]

    os.environ["KERAS_BACKEND"] = "jax"
    sys.path.insert(0, ROOT)
    import jax
    import jax.numpy as jnp

    print("Steady training throughput (compile excluded), JAX backend on "
          f"{jax.devices()[0].platform.upper()} ({os.cpu_count()} cores); no GPU was available "
          "(the device machine was not lent to this task). Shared machine: figures are noisy.")
    pipeline = load_mnist_5k()
    x, y = pipeline.arrays("train")
    one_hot = np.eye(pipeline.num_outputs, dtype=np.float32)[y]
    x_all, y_all = jnp.asarray(x), jnp.asarray(one_hot)
    part_one(args, pipeline, x, one_hot, x_all, y_all)
    if not args.no_chunking:
        part_two(args, pipeline, x, one_hot, x_all, y_all)
        part_three(args, pipeline, x)


if __name__ == "__main__":
    main()
