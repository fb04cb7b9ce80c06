"""A quickstart-like study written by hand, for tests of the report's answer and pages.

Our layout (``tests.unit.test_censoring.write_store``), protocol race, batch sizes 8 to
512, four trials each, steps to result on the curve S(B) = 20 (1 + 300/B): trial 1 beats
the goal classification_error<0.08 at S(B) and stops (goal), trial 2 at 1.25 S(B), trial 3
is stopped by the race at S(B) without beating it, trial 4 diverges. Every trial trained
alone on 2 CPU cores, at 0.002 (1 + B/128) s per step, so time and cost to result exist.
B* = 300 puts the maximum useful batch size (10 B*) beyond the largest batch size, 512:
the data bound it from below only. Every trial also has a searched ``weight_decay``.
"""

from __future__ import annotations

import json
import math

from batchscale.store.filesystem import open_root
from tests.unit.test_censoring import WORKLOAD, write_store

NAME = "quickstart"
S_MIN, B_STAR, BUDGET, CORES = 20.0, 300.0, 1600, 2.0
BATCH_SIZES = (8, 16, 32, 64, 128, 256, 512)


def steps_at(batch_size: int) -> int:
    return round(S_MIN * (1 + B_STAR / batch_size))


def seconds_per_step(batch_size: int) -> float:
    return 0.002 * (1 + batch_size / 128)


def _trials(batch_size: int) -> dict:
    s = steps_at(batch_size)
    return {1: ("COMPLETE", "goal", 0.01, [(0, 0.9), (s // 2, 0.3), (s, 0.07)]),
            2: ("COMPLETE", "goal", 0.02, [(0, 0.9), (s // 2, 0.4), (round(1.25 * s), 0.075)]),
            3: ("COMPLETE", "race", 0.004, [(0, 0.9), (s, 0.2)]),
            4: ("INFEASIBLE", "diverged", 0.029, [(0, 0.9), (10, math.nan)])}


def build(root: str) -> str:
    """Write the study under ``root``; returns STORE/STUDY."""
    location = write_store(root, {b: (BUDGET, _trials(b)) for b in BATCH_SIZES}, protocol="race",
                           name=NAME)
    fs = open_root(root)
    for b in BATCH_SIZES:
        for trial_id in _trials(b):
            path = f"{NAME}/{WORKLOAD}/{b}/{trial_id}/metadata.json"
            meta = json.loads(fs.read_text(path))
            meta["parameters"]["weight_decay"] = 1e-4 * trial_id
            meta.update(train_seconds=meta["steps"] * seconds_per_step(b), trained_together=1,
                        device_kind="cpu", devices=1, preset="local", cpu_cores=CORES,
                        precision="float32", replicas=1, trainer="vmapped", pack_size=4,
                        examples_per_second=0.0)
            fs.write_text(path, json.dumps(meta))
    return location
