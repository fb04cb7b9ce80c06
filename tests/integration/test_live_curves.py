"""Trials' live curves: TensorBoard event files written into the store as trials train,
read back with TensorBoard's own reader and compared with measurements.csv."""

import os

import pytest

from batchscale.core.spec import TrialSpec
from batchscale.store.event_files import EventStream, file_version_event, scalars_event
from batchscale.store.filesystem import open_root
from batchscale.store.layout import StudyStore
from batchscale.training.packs import run_pack
from batchscale.training.trainer import resolve_parameters
from batchscale.validation import parse_spec
from tests.conftest import StopAfter, share_datasets, tiny_spec_dict
from tests.tensorboard_events import check_run_matches, read_run, trial_run_dir

LINEAR = {"momentum": 0.9, "end_learning_rate_factor": 0.1, "decay_fraction": 0.5}


def _study(root, name, **changes):
    raw = {"batch_sizes": [16], "schedule": "linear", "fixed": LINEAR, "max_steps": 120, **changes}
    spec = parse_spec(tiny_spec_dict(root, name=name, **raw))
    store = StudyStore(root)
    store.register_study(spec)
    return spec, store


def test_pack_trials_write_their_curves_and_outcome_for_tensorboard(digits_store):
    """A trial that trains and one that diverges: every evaluated metric at every evaluated
    step, the schedule's learning rate, the metaparameters for the HParams dashboard, and
    the outcome (a diverged trial is a failed session)."""
    spec, store = _study(digits_store, "live")
    good = TrialSpec("live", 16, 1, {"learning_rate": 0.05, **LINEAR})
    wild = TrialSpec("live", 16, 2, {"learning_rate": 50.0, **{**LINEAR, "momentum": 0.99}})
    metas = run_pack(spec, [good, wild], store, log=lambda *_: None)
    assert [m["status"] for m in metas] == ["COMPLETE", "INFEASIBLE"]
    study_dir = os.path.join(digits_store, "live")
    for trial, meta in zip((good, wild), metas):
        rows = store.read_measurements(spec, trial)
        hparams = check_run_matches(trial_run_dir(study_dir, 16, trial.trial_id), rows, "linear",
                                    resolve_parameters(trial.parameters, 120), meta["status"])
        assert hparams["batch_size"] == 16
        assert hparams["learning_rate"] == pytest.approx(trial.parameters["learning_rate"])
        assert hparams["decay_fraction"] == pytest.approx(0.5)


def test_a_resumed_trial_shows_one_curve(digits_store, tmp_path):
    """Stopped twice and resumed from its checkpoints, a trial leaves one event file per
    process; TensorBoard's reader shows one curve equal to measurements.csv, no step twice."""
    from batchscale.training.signals import Stopped
    from batchscale.training.trainer import run_trial

    root = str(tmp_path / "resumed")
    os.makedirs(root)
    share_datasets(digits_store, root)
    spec, store = _study(root, "resumed", checkpoint_seconds=1000, max_steps=300)
    trial = TrialSpec("resumed", 16, 1, {"learning_rate": 0.05, **LINEAR})
    for checks in (2, 5):
        with pytest.raises(Stopped):
            run_trial(spec, trial, store, log=lambda *_: None, stop=StopAfter(checks))
    meta = run_trial(spec, trial, store, log=lambda *_: None)
    run = trial_run_dir(os.path.join(root, "resumed"), 16, 1)
    assert len(os.listdir(run)) == 3, os.listdir(run)
    check_run_matches(run, store.read_measurements(spec, trial), "linear",
                      resolve_parameters(trial.parameters, 300), meta["status"])


def test_an_unwritable_tensorboard_folder_never_fails_a_trial(digits_store, tmp_path):
    root = str(tmp_path / "blocked")
    os.makedirs(root)
    share_datasets(digits_store, root)
    spec, store = _study(root, "blocked")
    (tmp_path / "blocked" / "blocked" / "tensorboard").write_text("a file where a folder goes")
    lines = []
    [meta] = run_pack(spec, [TrialSpec("blocked", 16, 1, {"learning_rate": 0.05, **LINEAR})], store,
                      log=lines.append)
    assert meta["status"] == "COMPLETE"
    said = [line for line in lines if "TensorBoard" in line]
    assert len(said) == 1 and "could not write its TensorBoard events" in said[0], lines


def _stream_events(fs, path, batches):
    stream = EventStream(fs, path)
    stream.add(file_version_event(1.0))
    for batch in batches:
        for step in batch:
            stream.add(scalars_event(step, 1.0 + step, {"val/x": step / 10}))
        stream.flush()
        yield


def test_a_local_event_file_grows_in_place(tmp_path):
    """A reader holding the file open (TensorBoard's, with TensorFlow installed) sees each
    flush: the file is appended to, never replaced."""
    fs = open_root(str(tmp_path))
    flushes = _stream_events(fs, "run/events.out.tfevents.1.h.batchscale", [[0, 1], [2, 3, 4]])
    next(flushes)
    path = tmp_path / "run" / "events.out.tfevents.1.h.batchscale"
    inode, size = path.stat().st_ino, path.stat().st_size
    with open(path, "rb") as reader:
        assert len(reader.read()) == size
        next(flushes)
        assert path.stat().st_ino == inode and len(reader.read()) == path.stat().st_size - size > 0
    scalars, _ = read_run(str(tmp_path / "run"))
    assert scalars["val/x"] == [(s, pytest.approx(s / 10)) for s in range(5)]


def test_a_gcs_event_file_holds_every_flush(gcs_root, tmp_path):
    """On gs:// (emulator, real client) each flush rewrites the object whole."""
    fs = open_root(gcs_root)
    for _ in _stream_events(fs, "run/events.out.tfevents.1.h.batchscale", [[0, 1], [2]]):
        pass
    local = tmp_path / "copy"
    local.mkdir()
    (local / "events.out.tfevents.1.h.batchscale").write_bytes(
        fs.read_bytes("run/events.out.tfevents.1.h.batchscale"))
    scalars, _ = read_run(str(local))
    assert [s for s, _ in scalars["val/x"]] == [0, 1, 2]
