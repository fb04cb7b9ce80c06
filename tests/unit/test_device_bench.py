"""benchmarks/device_bench.py's pure parts: its time budget (deadlines, the predicted cost
of a cell, a cell the deadline cannot afford skipped and marked), and the one table and
JSON document it writes. Nothing here trains: the smoke mode itself runs in CI
(.ci/run), after the test command, and prints the table."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from device_bench_table import (  # noqa: E402
    Budget,
    cell_cost,
    cells_table,
    document,
    exit_status,
    failed,
    measured,
    predicted_compile,
    predicted_unit_seconds,
    skipped,
)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_each_part_has_its_deadline_and_what_one_leaves_passes_on():
    clock = Clock()
    weights = {"profile": 0.1, "cells fc_128_128": 0.4, "cells simple_cnn_base": 0.3,
               "study": 0.5}
    budget = Budget(200, ["profile", "cells fc_128_128", "study"], weights, clock)
    assert budget.left("profile") == pytest.approx(20)  # the parts that run share it all
    clock.now += 5  # the profile took 5 s of its 20: the cells have until 100 s in
    assert budget.left("cells fc_128_128") == pytest.approx(95)
    clock.now += 250
    assert budget.left("study") == pytest.approx(-55) and budget.used() == pytest.approx(255)


def test_a_cells_cost_is_predicted_from_the_cells_before_it():
    history = [measured("fc_128_128", 8, 4, "vmapped", [0.002], 1.5, 100, None),
               skipped("fc_128_128", 8, 16, "vmapped", "budget")]
    # scaled with the work (K x batch) from the last measured cell, never down
    assert predicted_unit_seconds(history, 8 * 4 * 10, 1.0) == pytest.approx(0.02)
    assert predicted_unit_seconds(history, 1, 1.0) == pytest.approx(0.002)
    assert predicted_unit_seconds([], 64, 0.5) == 0.5
    assert predicted_compile(history, 3.0) == 1.5 and predicted_compile([], 3.0) == 3.0
    # compile, the first and a calibration unit, then the repeats (never under one unit each)
    assert cell_cost(2.0, 0.01, 0.1, 3) == pytest.approx(2.0 + 0.02 + 0.3)
    assert cell_cost(2.0, 1.0, 0.1, 3) == pytest.approx(2.0 + 2.0 + 3.0)


def test_a_cell_the_deadline_cannot_afford_is_skipped_and_says_why():
    from device_bench_cells import run_cell

    spec = SimpleNamespace(workload=SimpleNamespace(model="simple_cnn_base"))
    args = SimpleNamespace(target=0.1, repeats=3)
    history = [measured("simple_cnn_base", 8, 1, "turns", [0.5], 4.0, 6, None)]
    cell = run_cell(spec, None, None, None, "turns", 4, 64, history, None, args, lambda: 10.0)
    assert cell["status"] == "skipped" and cell["width"] == 4 and cell["batch_size"] == 64
    # a step 32x the work of the last measured one: 16 s; 4 s compile + 2 + 3 units
    assert cell["why"] == "budget (about 84 s predicted, 10 s left)"


def test_a_scanned_cell_is_sized_by_the_same_trials_packstep_cells():
    """Its first call is a whole scan: a slow step measured beside it (the Simple CNN on a
    CPU) makes it one step long, and its cost counts that step."""
    from device_bench_cells import run_cell

    spec = SimpleNamespace(workload=SimpleNamespace(model="simple_cnn_base"))
    args = SimpleNamespace(target=0.1, repeats=2)
    beside = (measured("simple_cnn_base", 8, 1, "vmapped", [2.0], 4.0, 2, None),)
    cell = run_cell(spec, None, None, None, "scanned", 1, 8, [], None, args, lambda: 5.0,
                    None, beside)
    assert cell["why"] == "budget (about 11 s predicted, 5 s left)"  # 3 + 2 x 2 + 2 x 2


def test_a_measured_cell_has_its_rates_and_effective_flops():
    cell = measured("fc_128_128", 32, 4, "vmapped", [0.004, 0.001, 0.002], 0.7, 300, 1e9)
    assert cell["seconds_per_step"] == 0.002  # the median pack step
    assert (cell["seconds_per_step_min"], cell["seconds_per_step_max"]) == (0.001, 0.004)
    assert cell["trial_steps_per_second"] == pytest.approx(2000)
    assert cell["examples_per_second"] == pytest.approx(64000)
    assert cell["tflops"] == pytest.approx(2.0)
    even = measured("fc_128_128", 32, 1, "turns", [0.004, 0.002], 0.7, 20, None)
    assert even["seconds_per_step"] == pytest.approx(0.003) and even["tflops"] is None


def test_the_table_has_a_row_per_cell_and_marks_what_was_not_measured():
    cells = [measured("fc_128_128", 8, 1, "vmapped", [0.0002], 0.5, 1000, 4e6),
             measured("fc_128_128", 8, 1, "turns", [0.0004], 0.4, 1000, 4e6),
             measured("fc_128_128", 8, 1, "scanned", [0.0001], 0.3, 1000, 4e6),
             skipped("fc_128_128", 8, 4, "vmapped", "budget (about 9 s predicted, 1 s left)"),
             failed("fc_128_128", 8, 4, "scanned", RuntimeError("RESOURCE_EXHAUSTED: 9 GiB\nmore"))]
    profile = [{"model": "fc_128_128", "batch_size": 8, "status": "measured",
                "seconds_per_step": 0.00015}]
    lines = cells_table(cells, profile).splitlines()
    assert len(lines) == 2 + 2 and lines[0].startswith("| model | batch | K |")
    one, four = lines[2], lines[3]
    assert "| 5,000 (0.2 ms) | 2,500 (0.4 ms) | 10,000 (0.1 ms) | 2.00 | 0.50 |" in one
    assert one.endswith("| 0.5 / 0.4 / 0.3 | 0.15 |")  # compile seconds, the probe's ms
    assert "skipped (budget)" in four and "failed (RuntimeError: out of memory)" in four
    assert four.endswith("| - |") and "| - | - |" in four  # no turns cell, no ratios


def test_the_document_is_one_table_with_the_machine_and_the_study_and_is_json():
    result = {"environment": {"device_kind": "NVIDIA H100 80GB HBM3", "platform": "gpu",
                              "devices": 1, "cpu_count": 16, "load_average": (0.1, 0.2, 0.3),
                              "jax": "0.11.2", "date": "2026-11-26T21:00:00Z"},
              "arguments": {"budget": 330.0}, "total_seconds": 301.2, "finished": False,
              "cells": [skipped("simple_cnn_base", 4096, 64, "vmapped", "budget")],
              "profile": [], "errors": ["study: ValueError: bad"],
              "study": {"what": "quickstart", "status": "stopped", "why": "at its deadline"}}
    text = document(result)
    assert text.startswith("NVIDIA H100 80GB HBM3 (gpu, 1 device(s)), 16 CPU cores, load "
                           "average ? before, 0.10/0.20/0.30 now, jax 0.11.2")
    assert text.count("| model | batch | K |") == 1 and "skipped (budget)" in text
    assert "Study (quickstart): stopped: at its deadline" in text
    assert "FAILED part study: ValueError: bad" in text
    assert text.rstrip().endswith("301 s in all (budget 330.0 s); finished: false")
    json.dumps(result)


def test_the_exit_status_fails_ci_when_a_part_raised_or_the_smoke_mode_measured_nothing():
    ok = measured("fc_128_128", 8, 1, "vmapped", [0.002, 0.001], 0.7, 100, None)
    broken = failed("fc_128_128", 8, 4, "turns", RuntimeError("no such attribute"))
    budget = skipped("simple_cnn_base", 64, 4, "vmapped", "budget")
    assert exit_status({"cells": [ok, budget], "profile": [ok]}, smoke=True) == 0
    assert exit_status({"cells": [ok], "errors": ["study: ValueError: bad"]}, smoke=False) == 1
    assert exit_status({"cells": [ok, broken], "profile": []}, smoke=True) == 1
    assert exit_status({"cells": [ok, broken], "profile": []}, smoke=False) == 0  # a GPU's OOM
    assert exit_status({"cells": [budget], "profile": []}, smoke=True) == 1  # nothing measured
