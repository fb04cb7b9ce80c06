"""Trial checkpoints on a local store: exact round trip, where they live, overwrite, delete,
damage detected (never read as truth) and a failed write that leaves the good one in place.
tests/integration/test_checkpoints_gcs.py runs every test taking ``root`` again on gs://."""

from __future__ import annotations

import io
import json
import os

import ml_dtypes
import numpy as np
import pytest

from batchscale.core.spec import TrialSpec
from batchscale.store import checkpoints as ck
from batchscale.store.layout import StudyStore
from batchscale.store.storage_api import TMP_PREFIX
from batchscale.validation import default_spec_dict, parse_spec


@pytest.fixture
def root(tmp_path):
    return str(tmp_path / "store")


def _setup(root):
    spec = parse_spec({**default_spec_dict(), "store": root, "batch_sizes": [16, 64]})
    store = StudyStore(root)
    store.register_study(spec)
    return spec, store, TrialSpec(spec.name, 16, 3, {"learning_rate": 0.1})


def _arrays(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "dense/kernel": rng.standard_normal((5, 3)).astype(np.float32),
        "dense/bias:0": rng.standard_normal(3),  # float64, odd characters in the name
        "step": np.array(41, dtype=np.int64),  # 0-d
        "flag": np.array(True),
        "empty": np.zeros((0, 4), dtype=np.float16),
        "order": np.asfortranarray(rng.integers(0, 255, (3, 4), dtype=np.uint8)),
        "rng_key": np.array([123, 456], dtype=np.uint32),
        "half": rng.standard_normal(4).astype(ml_dtypes.bfloat16),
        "c": np.array([1 + 2j], dtype=np.complex64),
    }


STATE = {"step": 41, "epoch_position": 7, "rows": [
    {"step": 0, "val/classification_error": 0.9, "wall_time": 0.0},
    {"step": 20, "val/classification_error": 0.1 + 0.2, "train/cross_entropy_error": float("nan")}],
    "best": float("inf"), "seed": 2**62 + 1, "note": "héllo"}


def _same(got: dict, want: dict) -> None:
    assert list(got) == list(want)
    for name, value in want.items():
        assert got[name].dtype == value.dtype and got[name].shape == value.shape, name
        assert got[name].tobytes() == np.ascontiguousarray(value).tobytes(), name


def _same_state(got: dict, want: dict) -> None:
    # NaN != NaN, so compare the JSON text (repr floats: exact)
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)


def test_round_trip_is_exact_and_lives_outside_the_trial_folder(root):
    spec, store, trial = _setup(root)
    assert ck.read_checkpoint(store, spec, trial) is None
    ck.write_checkpoint(store, spec, trial, _arrays(), STATE)
    got = ck.read_checkpoint(store, spec, trial, log=pytest.fail)
    _same(got.arrays, _arrays())
    _same_state(got.state, STATE)
    assert got.step == 41
    assert store.fs.list_files("", recursive=True) == sorted([
        "quickstart/checkpoints/16/3.npz", "quickstart/study_spec.json",
        *(f"quickstart/mnist_5k/fc_128_128/nesterov_momentum/{b}/study.json" for b in (16, 64))])
    # ONE object, loadable with plain numpy, uncompressed (fast to write)
    with np.load(io.BytesIO(store.fs.read_bytes("quickstart/checkpoints/16/3.npz"))) as npz:
        assert json.loads(npz["__header__"].tobytes())["state"]["step"] == 41
        assert npz.zip.infolist()[0].compress_type == 0
    other = TrialSpec(spec.name, 64, 3, {})
    assert ck.read_checkpoint(store, spec, other) is None  # per batch size and trial


def test_overwrite_replaces_everything_and_delete_is_idempotent(root):
    spec, store, trial = _setup(root)
    ck.write_checkpoint(store, spec, trial, _arrays(), STATE)
    newer = {"w": np.arange(3.0)}
    ck.write_checkpoint(store, spec, trial, newer, {"step": 60})
    got = ck.read_checkpoint(store, spec, trial)
    _same(got.arrays, newer)
    assert got.state == {"step": 60}
    ck.write_checkpoint(store, spec, trial, {}, {})  # no arrays, no step: still a checkpoint
    assert ck.read_checkpoint(store, spec, trial) == ck.Checkpoint({}, {})
    ck.delete_checkpoint(store, spec, trial)
    assert ck.read_checkpoint(store, spec, trial) is None
    ck.delete_checkpoint(store, spec, trial)  # none: no error
    assert not store.fs.list_files("quickstart/checkpoints", recursive=True)


def test_a_write_that_fails_midway_leaves_the_good_checkpoint(root):
    spec, store, trial = _setup(root)
    ck.write_checkpoint(store, spec, trial, _arrays(), STATE)
    before = store.fs.read_bytes(ck.checkpoint_path(spec, trial))

    class Exploding:
        """Dies while the checkpoint is being serialised, after other arrays went in."""

        def __array__(self, dtype=None, copy=None):
            raise RuntimeError("writer died")

    with pytest.raises(RuntimeError, match="writer died"):
        ck.write_checkpoint(store, spec, trial, {**_arrays(1), "boom": Exploding()}, {"step": 99})
    with pytest.raises(TypeError, match="^checkpoint state: must be JSON-serialisable"):
        ck.write_checkpoint(store, spec, trial, _arrays(1), {"step": 99, "bad": {1, 2}})
    with pytest.raises(TypeError, match="^checkpoint arrays: 'o' has dtype object"):
        ck.write_checkpoint(store, spec, trial, {"o": np.array([None])}, {"step": 99})
    assert store.fs.read_bytes(ck.checkpoint_path(spec, trial)) == before
    got = ck.read_checkpoint(store, spec, trial, log=pytest.fail)
    _same(got.arrays, _arrays())
    assert got.step == 41


def _damaged_versions(good: bytes) -> dict[str, bytes]:
    with np.load(io.BytesIO(good)) as npz:
        members = {k: npz[k] for k in npz.files}
    tampered = dict(members, a0=members["a0"] + np.float32(1))  # valid zip, wrong content
    buffer = io.BytesIO()
    np.savez(buffer, **tampered)
    flipped = bytearray(good)
    flipped[len(good) // 3] ^= 0xFF
    return {"truncated": good[: len(good) // 2], "empty": b"", "garbage": b"not a checkpoint",
            "flipped byte": bytes(flipped), "sha256 mismatch": buffer.getvalue()}


def test_a_damaged_checkpoint_is_detected_reported_and_never_read(root):
    spec, store, trial = _setup(root)
    ck.write_checkpoint(store, spec, trial, _arrays(), STATE)
    path = ck.checkpoint_path(spec, trial)
    for what, data in _damaged_versions(store.fs.read_bytes(path)).items():
        store.fs.write_bytes(path, data)
        lines = []
        assert ck.read_checkpoint(store, spec, trial, log=lines.append) is None, what
        assert len(lines) == 1 and lines[0].startswith(f"checkpoint {store.url(path)} is damaged ("), what
        assert lines[0].endswith("ignoring it, the trial starts from step 0"), what
        if what == "sha256 mismatch":
            assert "(sha256 mismatch)" in lines[0]
        assert store.fs.read_bytes(path) == data  # kept for inspection
    ck.write_checkpoint(store, spec, trial, _arrays(), STATE)  # the next write replaces it
    assert ck.read_checkpoint(store, spec, trial, log=pytest.fail).step == 41


def test_a_writer_killed_mid_write_leaves_only_a_hidden_temp_file(tmp_path):
    """Local store: kill -9 while the temp file is half written; the checkpoint stays."""
    spec, store, trial = _setup(str(tmp_path / "store"))
    ck.write_checkpoint(store, spec, trial, _arrays(), STATE)
    good = store.fs.read_bytes(ck.checkpoint_path(spec, trial))
    folder = os.path.dirname(store.fs.url(ck.checkpoint_path(spec, trial)))
    with open(os.path.join(folder, f"{TMP_PREFIX}dead-3.npz"), "wb") as f:  # what the dead
        f.write(ck.encode_checkpoint(_arrays(1), {"step": 99})[:1000])      # writer left
    assert store.fs.list_files("quickstart/checkpoints/16") == ["3.npz"]
    assert ck.read_checkpoint(store, spec, trial, log=pytest.fail).step == 41
    assert store.fs.read_bytes(ck.checkpoint_path(spec, trial)) == good
