"""benchmarks/user_model_gpu.py, the user-model path's speed study, runs end to end in a
fresh interpreter (a subprocess, hence this tier) on the example model and a small .npz:
its three parts measure, its JSON holds them, and it never imports what the accelerator
machine it is meant for lacks (TensorFlow, kfp, the GCS client, mlxtend). A device run is
a few scarce minutes; this keeps the script from breaking unseen before one."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def test_the_user_model_benchmark_runs_and_needs_nothing_the_device_lacks(tmp_path):
    rng = np.random.default_rng(0)
    data = tmp_path / "tiny.npz"
    np.savez(data, x_train=rng.integers(0, 256, (320, 28, 28, 1), dtype=np.uint8),
             y_train=rng.integers(0, 10, 320))
    out = tmp_path / "out"
    command = [sys.executable, str(REPO / "benchmarks" / "user_model_gpu.py"), "--data", str(data),
               "--out", str(out), "--batch-sizes", "8,64", "--widths", "1,3", "--repeats", "1",
               "--seconds", "0.01", "--study-trials", "2", "--study-steps", "20",
               "--study-widths", "default,all"]
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "| pack K |" in run.stdout and (out / "user_model_gpu.md").exists()
    result = json.loads((out / "user_model_gpu.json").read_text())

    assert result["finished"] and result["environment"]["absent_there_but_imported"] == []
    assert result["workload"]["model"].endswith("examples/your_workload/model.py:build")
    assert [r["batch_size"] for r in result["step_times"]] == [8, 64]
    for row in result["step_times"] + result["packs"]:
        assert 0 < row["seconds_per_step"] < 1 and row["compile_seconds"] > 0 and row["all_finite"]
    assert all(0 < r["probe_seconds_per_step"] < 1 for r in result["step_times"])
    assert [r["width"] for r in result["packs"]] == [1, 3]
    assert result["packs"][0]["speedup_over_one"] == 1.0
    assert math.isclose(result["packs"][1]["trial_steps_per_second"],
                        3 / result["packs"][1]["seconds_per_step"])
    # run_pack end to end: a study's width on this CPU (one), then both trials at once
    assert [s["vmap_width"] for s in result["studies"]] == [1, 2]
    for study in result["studies"]:
        assert study["trainer"] == "vmapped" and study["full_budget"] == 2
        assert study["statuses"] == ["COMPLETE"] and study["wall_seconds"] > 0
