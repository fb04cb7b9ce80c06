"""Trial checkpoints on a local store: exact round trip, where they live, overwrite, delete,
damage detected (never read as truth), a failed write that leaves the good one in place,
and the identity each carries: another trial's, study's or larger budget's checkpoint is
named in one line and never restored.
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
    _same_state(got.state, {**STATE, "identity": ck.checkpoint_identity(spec, trial)})
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
    identity = {"identity": ck.checkpoint_identity(spec, trial)}
    assert got.state == {"step": 60, **identity}
    ck.write_checkpoint(store, spec, trial, {}, {})  # no arrays, no step: still a checkpoint
    assert ck.read_checkpoint(store, spec, trial) == ck.Checkpoint({}, identity)
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
    flipped = bytearray(good)  # inside the first array's bytes (zip headers' dates go unchecked)
    flipped[good.index(members["a0"].tobytes()) + 5] ^= 0xFF
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


def _forged(store, spec, trial, state: dict) -> str:
    """Write ``state`` as the trial's checkpoint as is (no identity added): a copied-in or
    older checkpoint."""
    path = ck.checkpoint_path(spec, trial)
    store.fs.write_bytes(path, ck.encode_checkpoint(_arrays(), state))
    return path


def test_a_checkpoint_of_another_trial_study_or_budget_is_named_and_never_restored(root):
    spec, store, trial = _setup(root)
    mine = ck.checkpoint_identity(spec, trial)
    assert mine["study"] == "quickstart" and (mine["batch_size"], mine["trial_id"]) == (16, 3)
    assert mine["parameters"] == {"learning_rate": 0.1} and mine["max_steps"] == 4000
    other_spec = parse_spec({**default_spec_dict(), "store": root, "batch_sizes": [16, 64],
                             "seed": 7})
    cases = {
        "trial_id 2 there, 3 here": {**mine, "trial_id": 2},
        "batch_size 64 there, 16 here": {**mine, "batch_size": 64},
        "study \"other\" there, \"quickstart\" here": {**mine, "study": "other"},
        "study_sha256": ck.checkpoint_identity(other_spec, trial),  # another seed
        'parameters {"learning_rate": 0.2} there': {**mine, "parameters": {"learning_rate": 0.2}},
        "written under a budget of 5000 steps, more than this trial's 4000": {**mine, "max_steps": 5000},
        "its identity is \"forged\", not an object": "forged",
    }
    path = ck.checkpoint_path(spec, trial)
    for what, identity in cases.items():
        _forged(store, spec, trial, {**STATE, "identity": identity})
        lines = []
        assert ck.read_checkpoint(store, spec, trial, log=lines.append) is None, what
        assert len(lines) == 1 and what in lines[0], (what, lines)
        assert lines[0].startswith(f"checkpoint {store.url(path)} is not this trial's ("), lines
        assert lines[0].endswith("ignoring it, the trial starts from step 0"), lines
        assert store.fs.exists(path)  # kept; the trial's next checkpoint replaces it
    # its own, written under a smaller budget (a budget that grew): it continues from there
    _forged(store, spec, trial, {**STATE, "identity": {**mine, "max_steps": 40}})
    assert ck.read_checkpoint(store, spec, trial, log=pytest.fail).step == 41
    # a caller that knows the trial by id only (the report's list of unfinished trials)
    by_id = TrialSpec(spec.name, 16, 3, {})
    _forged(store, spec, trial, {**STATE, "identity": {**mine, "parameters": {"x": 1}}})
    assert ck.read_checkpoint(store, spec, by_id, log=pytest.fail).step == 41


def test_a_checkpoint_without_identity_is_accepted_within_the_budget(root):
    """Written before checkpoints carried an identity: restored as before, unless its step
    is not a step count or lies past the trial's budget (it cannot be this trial's)."""
    spec, store, trial = _setup(root)
    _forged(store, spec, trial, STATE)
    _same_state(ck.read_checkpoint(store, spec, trial, log=pytest.fail).state, STATE)
    for step, what in ((4001, "step 4001 is past the trial's budget of 4000"),
                       (-1, "step -1 is not a step count"), ("7", 'step "7" is not a step count')):
        _forged(store, spec, trial, {**STATE, "step": step})
        lines = []
        assert ck.read_checkpoint(store, spec, trial, log=lines.append) is None
        assert len(lines) == 1 and f"is not this trial's ({what})" in lines[0], lines
