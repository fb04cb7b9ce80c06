"""Benchmark: training throughput of the real trainer on Keras' JAX and TensorFlow backends.

Runs ``run_trial`` (the same code a pipeline task runs) for a fixed number of steps on
mnist_5k, for each backend in its own process, and prints examples per second (training
only, evaluation excluded) and the JAX/TensorFlow ratio. This is how the default backend
was chosen; re-run it on new hardware:

    python benchmarks/backend_speed.py [--steps 300] [--models fc_128_128,simple_cnn_base]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILD = """
import json, sys
from batchscale.validation import parse_spec
from batchscale.workloads.prepare import prepare_dataset
from batchscale.core.spec import StudySpec, TrialSpec
from batchscale.store.layout import StudyStore
from batchscale.training.trainer import run_trial
root, backend, model = sys.argv[1:4]
batch_size, steps = int(sys.argv[4]), int(sys.argv[5])
store = StudyStore(root)
prepare_dataset(store, "mnist_5k", log=lambda *a: None)
name = f"bench-{backend}-{model}-{batch_size}"
spec = parse_spec({
    "name": name, "store": root, "backend": backend,
    "workload": {"dataset": "mnist_5k", "model": model, "optimizer": "nesterov_momentum"},
    "batch_sizes": [batch_size], "trials_per_batch_size": 1,
    "search_space": {"learning_rate": {"scale": "log", "min": 0.01, "max": 0.02}},
    "fixed": {"momentum": 0.9}, "max_steps": steps,
    "goals": [{"metric": "classification_error", "value": 0.0}],
    "evaluation": {"resolution": 0.5, "train_examples": 500}})
store.register_study(spec)
trial = TrialSpec(name, batch_size, 1, {"learning_rate": 0.01, "momentum": 0.9})
meta = run_trial(spec, trial, store, log=lambda *a: None)
print(json.dumps({"examples_per_second": meta["examples_per_second"], "wall_time": meta["wall_time"]}))
"""


def measure(root, backend, model, batch_size, steps) -> dict:
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"}
    command = [sys.executable, "-c", CHILD, root, backend, model, str(batch_size), str(steps)]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--models", default="fc_128_128,simple_cnn_base")
    parser.add_argument("--batch-sizes", default="32,256")
    args = parser.parse_args()
    print(f"{'model':>16} {'batch':>6} {'jax ex/s':>10} {'tf ex/s':>10} {'jax/tf':>7}")
    with tempfile.TemporaryDirectory() as root:
        for model in args.models.split(","):
            for batch_size in map(int, args.batch_sizes.split(",")):
                steps = args.steps if model.startswith("fc") else max(args.steps // 5, 20)
                jax = measure(root, "jax", model, batch_size, steps)["examples_per_second"]
                tf = measure(root, "tensorflow", model, batch_size, steps)["examples_per_second"]
                print(f"{model:>16} {batch_size:>6} {jax:>10.0f} {tf:>10.0f} {jax / tf:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
