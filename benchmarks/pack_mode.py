"""The pack-mode probe on this machine: for a study's batch sizes, what ``pack_mode.probe_rates``
measures (vmapped against turns, training and evaluation), what it costs, and the choice.

    KERAS_BACKEND=jax .venv/bin/python benchmarks/pack_mode.py [SPEC] [--store DIR] [--repeats 2]
        [--batch-sizes 8,64,512] [--width N]

SPEC defaults to the quickstart; the store (default ./batchscale-store) must hold its data
set prepared (``batchscale prepare``) or it is prepared. Each repeat probes every batch
size once, in order (repeat 1: all batch sizes, then repeat 2: ...), so the repeats of one
batch size are minutes apart on a machine whose load varies. Prints one Markdown table
(an empty "eval ms/trial vmapped": not measured, as vmapped lost even with free
evaluations). "probe s" is the standalone probe, which compiles both modes; inside a pack
the chosen mode's compilation is the pack's own.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("KERAS_BACKEND", "jax")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("spec", nargs="?", default=None)
    parser.add_argument("--store", default="./batchscale-store")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--batch-sizes", default="")
    parser.add_argument("--width", type=int, default=0, help="default: the pack's would-be width")
    args = parser.parse_args()

    from batchscale.search.trials import make_trials
    from batchscale.store.layout import StudyStore
    from batchscale.training.keras_setup import select_backend
    from batchscale.training.pack_mode import MARGIN, TURNS, VMAPPED, choose, pack_width, standalone_probe
    from batchscale.validation import parse_spec
    from batchscale.validation.spec_files import load_spec_dict
    from batchscale.workloads.dataset_registry import dataset_for, open_pipeline
    from batchscale.workloads.prepare import prepare_dataset

    raw = load_spec_dict(args.spec)
    spec = parse_spec({**raw, "store": args.store})
    store = StudyStore(args.store)
    prepare_dataset(store, dataset_for(spec.workload), lambda *_: None)
    pipeline = open_pipeline(store, dataset_for(spec.workload), spec.workload.options)
    select_backend(spec.backend)
    sizes = [int(b) for b in args.batch_sizes.split(",") if b] or spec.batch_sizes
    trials = make_trials(spec)
    rows = []
    print(f"load average before: {os.getloadavg()}", flush=True)
    for repeat in range(args.repeats):
        for b in sizes:
            width = args.width or pack_width(spec, [t for t in trials if t.batch_size == b])
            tick = time.perf_counter()
            m = standalone_probe(spec, pipeline, b, width, lambda *_: None)
            wall = time.perf_counter() - tick
            r, s, e = m["rates"], m["step_rates"], m["evaluation_seconds"]
            rows.append((b, width, repeat + 1, s[VMAPPED], s[TURNS], s[VMAPPED] / s[TURNS],
                         1000 * e.get(VMAPPED, float("nan")) / width, 1000 * e[TURNS],
                         m["evaluations"], m["steps"],
                         r[VMAPPED], r[TURNS], r[VMAPPED] / r[TURNS], choose(r, MARGIN), wall))
            print(" | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in rows[-1]), flush=True)
    print(f"load average after: {os.getloadavg()}; margin {MARGIN}")
    print("| batch | width | repeat | step rate vmapped | step rate turns | ratio | eval ms/trial vmapped "
          "| eval ms/trial turns | evaluations | budget | trial rate vmapped | trial rate turns | ratio "
          "| chosen | probe s |")
    print("|" + "---|" * 15)
    for row in rows:
        print("| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in row) + " |")


if __name__ == "__main__":
    main()
