"""Benchmark: batch sizes 2/4/8 as one mixed-batch pack against separate packs (CPU or any device).

Part 1 (steady throughput): trial-steps per second of one mixed group (one trial per
batch size, every batch padded to the largest, ``training.mixed_step.MixedStep``) against
the same trials as separate groups, each batch size in the mode its own pack uses
(``mixed_probe.separate_width``: one trial at a time on a CPU), timed as the pack-mode probe
times them (``mixed_probe._seconds_per_step``: ``step_timing.timed_steps`` after a
warm-up chunk). Mixed and separate alternate (A B A B ...) in one process, so load from
other work on the machine falls on both; medians and their ratio are printed.

Part 2 (a small real pack): wall time of ``run_pack`` training one trial per batch size
from scratch, mixed (one group) against separate (one pack of each batch size after
another in the same task), each in a fresh store, alternating. The study's step-time
records are written beforehand in both, so the mixed pack's once-per-study step-time
probes are left out; part 3 times what a study pays once.

Part 3 (what a study pays once): the pack-mode probe (``mixed_probe.mixed_chosen`` in a
store without a record) for the batch sizes, and for 8/16 (the quickstart's small batch
sizes, probed after its first pack of batch size 8).

    python benchmarks/mixed_packs.py [--model fc_128_128] [--dataset mnist_5k]
        [--batch-sizes 2,4,8] [--repeats 5] [--steps 400]
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _spec(root: str, args, batch_sizes, steps: int):
    from batchscale.validation import parse_spec

    return parse_spec({
        "name": "mixed", "store": root, "protocol": "goal", "max_rounds": 1,
        "workload": {"dataset": args.dataset, "model": args.model,
                     "optimizer": "nesterov_momentum"},
        "batch_sizes": batch_sizes, "trials_per_batch_size": 1,
        "search_space": {"learning_rate": {"scale": "log", "min": 0.003, "max": 0.03}},
        "fixed": {"momentum": 0.9},
        "goals": [{"metric": "classification_error", "value": 0.0001}],  # never reached
        "max_steps": steps, "evaluation": {"resolution": 0.05, "train_examples": 1000},
        "seed": 0, "backend": "jax"})


def _store(shared: str, args, batch_sizes, steps: int):
    """A fresh registered study sharing the prepared data set of ``shared``."""
    from batchscale.store.layout import StudyStore

    root = tempfile.mkdtemp(prefix="mixed-bench-")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    shutil.copytree(os.path.join(shared, "datasets"), os.path.join(root, "datasets"),
                    copy_function=os.link)
    spec = _spec(root, args, batch_sizes, steps)
    store = StudyStore(root)
    store.register_study(spec)
    return spec, store


def steady(spec, pipeline, sizes, repeats: int, quiet) -> None:
    from batchscale.training.keras_setup import training_scope
    from batchscale.training.mixed_probe import _seconds_per_step
    from batchscale.training.mixed_step import MixedStep
    from batchscale.training.step_timing import device_arrays

    x_all, y_all = device_arrays(pipeline)
    rates = {"mixed": [], "separate": []}
    with training_scope(spec.backend, spec.workload.precision, 1, quiet):
        for _ in range(repeats):
            mixed = _seconds_per_step(spec, pipeline, sizes, MixedStep, x_all, y_all, 2.0)
            rates["mixed"].append(len(sizes) / mixed)
            separate = sum(_seconds_per_step(spec, pipeline, [b], None, x_all, y_all, 2.0)
                           for b in sizes)
            rates["separate"].append(len(sizes) / separate)
    m, s = statistics.median(rates["mixed"]), statistics.median(rates["separate"])
    print(f"steady, batch sizes {'/'.join(map(str, sizes))}: trial-steps/s mixed {m:.0f} "
          f"(runs {', '.join(f'{r:.0f}' for r in rates['mixed'])}), separate {s:.0f} "
          f"(runs {', '.join(f'{r:.0f}' for r in rates['separate'])}): mixed/separate {m / s:.2f}x")


def real_pack(shared: str, args, sizes, quiet) -> None:
    from batchscale.search.trials import make_trials
    from batchscale.store.profiles import write_pack_mode, write_step_times
    from batchscale.training.keras_setup import hardware
    from batchscale.training.mixed_probe import mode_record
    from batchscale.training.packs import run_pack
    from batchscale.training.step_timing import now_iso

    walls = {"mixed": [], "separate": []}
    for _ in range(args.repeats):
        for mode in ("mixed", "separate"):
            spec, store = _store(shared, args, sizes, args.steps)
            write_pack_mode(store.fs, spec.name, mode_record(
                spec, sizes, {"mixed": 1.0, "separate": 1.0}, mode, now_iso(), "benchmark"))
            # the once-per-study step-time probes are timed apart (part 3): not here
            write_step_times(store.fs, spec.name, [
                {"batch_size": b, "devices": 1, "seconds_per_step": 1e-4, "steps": 30,
                 "precision": spec.workload.precision, **hardware(1), "measured": now_iso(),
                 "source": "benchmark"} for b in sizes])
            tick = time.perf_counter()
            metas = run_pack(spec, make_trials(spec), store, log=quiet)
            walls[mode].append(time.perf_counter() - tick)
            assert {m["vmap_width"] for m in metas} == ({len(sizes)} if mode == "mixed" else {1})
    m, s = statistics.median(walls["mixed"]), statistics.median(walls["separate"])
    print(f"real pack, one trial at each of {'/'.join(map(str, sizes))}, {args.steps} steps each, "
          f"from scratch: wall s mixed {m:.2f} (runs {', '.join(f'{w:.2f}' for w in walls['mixed'])}), "
          f"separate {s:.2f} (runs {', '.join(f'{w:.2f}' for w in walls['separate'])}): "
          f"separate/mixed {s / m:.2f}x")


def probe_cost(shared: str, args, sizes, quiet) -> None:
    from batchscale.training.mixed_probe import mixed_chosen
    from batchscale.training.packs import _open, mixed_width

    for batch_sizes in (sizes, [8, 16]):
        spec, store = _store(shared, args, batch_sizes, args.steps)
        pipeline = _open(spec, store)
        lines = []
        tick = time.perf_counter()
        mixed_chosen(spec, store, pipeline, batch_sizes, mixed_width(spec, batch_sizes, None),
                     lines.append)
        print(f"pack-mode probe of {'/'.join(map(str, batch_sizes))}: "
              f"{time.perf_counter() - tick:.2f} s ({lines[-1]})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="fc_128_128")
    parser.add_argument("--dataset", default="mnist_5k")
    parser.add_argument("--batch-sizes", default="2,4,8")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()
    sys.path.insert(0, ROOT)
    os.environ.setdefault("KERAS_BACKEND", "jax")
    os.environ.setdefault("BATCHSCALE_PACK_MODE", "turns")  # separate packs: one trial at a time
    from batchscale.store.layout import StudyStore
    from batchscale.training.packs import _open
    from batchscale.workloads.prepare import prepare_dataset

    def quiet(*_):
        pass

    sizes = [int(b) for b in args.batch_sizes.split(",")]
    shared = tempfile.mkdtemp(prefix="mixed-bench-data-")
    atexit.register(shutil.rmtree, shared, ignore_errors=True)
    prepare_dataset(StudyStore(shared), args.dataset, log=quiet)
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
          f"{os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs; {args.model} on {args.dataset}")
    spec, store = _store(shared, args, sizes, args.steps)
    steady(spec, _open(spec, store), sizes, args.repeats, quiet)
    real_pack(shared, args, sizes, quiet)
    probe_cost(shared, args, sizes, quiet)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
