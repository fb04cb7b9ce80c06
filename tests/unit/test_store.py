"""The study store on a local folder and on gs:// (real client, GCS emulator): the paper's
layout, refusal to mix specs, resumable trial records, and reading the paper's own data."""

import json

import numpy as np
import pytest

from batchscale.core.spec import SpecError, TrialSpec
from batchscale.store.layout import StudyStore, load_trials
from batchscale.validation import default_spec_dict, parse_spec


@pytest.fixture(params=["local", "gcs"])
def root(request, tmp_path):
    if request.param == "local":
        return str(tmp_path / "store")
    return request.getfixturevalue("gcs_root")


def _spec(root, **changes):
    return parse_spec({**default_spec_dict(), "store": root, **changes})


def _snapshot(store):
    return {p: store.fs.read_bytes(p) for p in store.fs.list_files("", recursive=True)}


def test_register_writes_the_paper_layout(root):
    spec = _spec(root, batch_sizes=[8, 64], max_steps=100)
    store = StudyStore(root)
    store.register_study(spec)
    study = json.loads(store.fs.read_text("quickstart/mnist_5k/fc_128_128/nesterov_momentum/64/study.json"))
    assert study["batch_size"] == 64 and study["optimizer"] == "nesterov_momentum"
    assert study["parameter_configs"]["momentum"]["scale"] == "REVERSE_LOG_SCALE"
    assert study["parameter_configs"]["learning_rate"] == {
        "type": "DOUBLE", "min_value": 0.003, "max_value": 0.3, "scale": "LOG_SCALE"}
    assert parse_spec(store.read_spec_dict("quickstart")) == spec


def test_a_different_spec_under_the_same_name_is_refused_and_nothing_changes(root):
    store = StudyStore(root)
    store.register_study(_spec(root))
    before = _snapshot(store)
    with pytest.raises(SpecError, match="^name: study 'quickstart' already exists"):
        store.register_study(_spec(root, seed=3))
    assert _snapshot(store) == before
    store.register_study(_spec(root, trials_per_batch_size=9))  # growing is allowed


def test_trial_records_round_trip_and_mark_done(root):
    spec = _spec(root, batch_sizes=[16], max_steps=10)
    store = StudyStore(root)
    store.register_study(spec)
    trial = TrialSpec("quickstart", 16, 3, {"learning_rate": 0.1, "momentum": 0.9})
    assert store.read_metadata(spec, trial) is None and not store.is_done(spec, trial)
    store.write_metadata(spec, trial, {"trial_id": 3, "status": "INCOMPLETE", "parameters": trial.parameters})
    assert not store.is_done(spec, trial)
    rows = [{"step": 0, "val/classification_error": 0.9, "wall_time": 0.0},
            {"step": 5, "val/classification_error": 0.123456789, "wall_time": 1.5}]
    store.write_measurements(spec, trial, rows)
    store.write_metadata(spec, trial, {"trial_id": 3, "status": "INFEASIBLE", "parameters": trial.parameters})
    assert store.is_done(spec, trial)
    [loaded] = load_trials(store.fs, "quickstart")
    assert loaded["batch_size"] == 16 and loaded["trial_id"] == 3 and loaded["status"] == "INFEASIBLE"
    assert loaded["measurements"][1]["step"] == 5
    assert loaded["measurements"][1]["val/classification_error"] == 0.123456789


def test_dataset_cache_round_trip(root):
    store = StudyStore(root)
    assert not store.has_dataset("toy")
    images = np.arange(2 * 4 * 4, dtype=np.uint8).reshape(2, 4, 4, 1)
    store.write_dataset("toy", {"train": (images, np.array([0, 1]))}, {"name": "toy"})
    assert store.has_dataset("toy")
    x, y = store.read_split("toy", "train")
    assert np.array_equal(x, images) and list(y) == [0, 1]


def test_reads_a_database_in_the_papers_released_layout(tmp_path):
    """No study_spec.json, paper column names, a test/ column we do not write."""
    base = tmp_path / "paper" / "fashion_mnist" / "simple_cnn_base" / "sgd" / "1024"
    (base / "7").mkdir(parents=True)
    (base / "study.json").write_text(json.dumps({
        "batch_size": 1024, "dataset": "fashion_mnist", "model": "simple_cnn_base",
        "optimizer": "sgd", "early_stopping": False, "train_steps": 0,
        "parameter_configs": {"learning_rate": {"type": "DOUBLE", "min_value": 0.01,
                                                "max_value": 10, "scale": "LOG_SCALE"}}}))
    (base / "7" / "metadata.json").write_text(json.dumps(
        {"parameters": {"learning_rate": 0.5}, "status": "COMPLETE", "steps": 300, "trial_id": 7}))
    (base / "7" / "measurements.csv").write_text(
        "step,train/cross_entropy_error,val/classification_error,test/classification_error\n"
        "0,2.3,0.9,0.9\n150,0.4,0.12,0.13\n300,0.3,0.09,0.095\n")
    [trial] = load_trials(StudyStore(str(tmp_path)).fs, "paper")
    assert (trial["dataset"], trial["batch_size"], trial["trial_id"]) == ("fashion_mnist", 1024, 7)
    assert [r["step"] for r in trial["measurements"]] == [0, 150, 300]
    assert trial["measurements"][2]["test/classification_error"] == 0.095
