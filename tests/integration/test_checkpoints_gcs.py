"""Trial checkpoints on gs://: every test of tests/unit/test_checkpoints.py that takes the
``root`` fixture, collected here again with ``root`` on GCS (the real google-cloud-storage
client against the in-process emulator of tests/conftest.py; nothing is mocked). Plus a
checkpoint above 8 MiB, which the client uploads as a resumable upload."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from batchscale.store import checkpoints as ck
from tests.unit import test_checkpoints as on_local_folder

# Collected in this module, so they take the ``root`` fixture below.
globals().update({name: test for name, test in vars(on_local_folder).items()
                  if name.startswith("test_") and "root" in inspect.signature(test).parameters})


@pytest.fixture
def root(gcs_root) -> str:
    """An empty store root, gs://batchscale-test/<uuid> on the emulator."""
    return gcs_root


def test_a_large_checkpoint_round_trips_and_a_failed_one_changes_nothing(root):
    spec, store, trial = on_local_folder._setup(root)
    big = {"w": np.random.default_rng(0).standard_normal(3_000_000).astype(np.float32)}  # 12 MB
    ck.write_checkpoint(store, spec, trial, big, {"step": 5})
    got = ck.read_checkpoint(store, spec, trial, log=pytest.fail)
    assert got.step == 5 and np.array_equal(got.arrays["w"], big["w"])

    class Exploding:
        def __array__(self, dtype=None, copy=None):
            raise RuntimeError("writer died")

    with pytest.raises(RuntimeError):
        ck.write_checkpoint(store, spec, trial, {"w": big["w"] * 2, "x": Exploding()}, {"step": 9})
    assert ck.read_checkpoint(store, spec, trial, log=pytest.fail).step == 5
