"""A stand-in regression data set for tests, registered in-process by the tests that use it.

Stands in for a user's own regression data (``workload.dataset: {path, format}`` with
``task: regression``, read by ``batchscale.workloads.data_files``) until tests can name such
files: a registry-style ``DatasetInfo`` whose loader makes a small synthetic split (inputs
in [0, 1)^8, two targets linear in them plus noise) and whose pipeline is the in-memory
``ArrayPipeline`` told its task is regression. It checks the trainer's regression path
(loss, metrics, divergence, both engines), not how user files are read.
"""

from __future__ import annotations

import numpy as np

from batchscale.workloads.dataset_record import DatasetInfo
from batchscale.workloads.inputs import ArrayPipeline

NAME = "regression_stand_in"
SIZES = {"train": 512, "validation": 128, "test": 128}
FEATURES, OUTPUTS = 8, 2


def load() -> dict:
    """{split: (inputs float32 (n, 8), targets float32 (n, 2))}, the same every time."""
    rng = np.random.default_rng(0)
    weights = rng.standard_normal((FEATURES, OUTPUTS)).astype(np.float32)
    out = {}
    for split, n in SIZES.items():
        x = rng.random((n, FEATURES), dtype=np.float32)
        out[split] = (x, (x @ weights + 0.05 * rng.standard_normal((n, OUTPUTS))).astype(np.float32))
    return out


class RegressionPipeline(ArrayPipeline):
    task = "regression"

    def __init__(self, store, info, stored, options):
        super().__init__(self.read_splits(store, info.name), info.num_classes, info.pixel_max)


INFO = DatasetInfo(
    NAME, "synthetic linear regression (a test stand-in)", "offline",
    "tests.stand_ins.regression_data:load", num_classes=OUTPUTS, input_shape=(FEATURES,),
    split_sizes=SIZES, task="regression", pipeline="tests.stand_ins.regression_data:RegressionPipeline",
    pixel_max=1.0)
