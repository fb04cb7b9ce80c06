"""A user's own model function trained for real, on both engines: the pack engine
(``run_pack``, vmapped, JAX, in memory) and the fit engine (``trainer.run_trial``).

The model is a file in tmp_path naming its own parameter (``units``); trials whose model
parameters differ train in separate vmapped groups of one pack. Regression (MSE loss, its
metrics, divergence judged on the training MSE) runs on a user's .npz of synthetic linear
targets (``workload.dataset: {path, format: npz}``, ``task: regression``).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from batchscale.core.spec import TrialSpec
from batchscale.store.layout import StudyStore
from batchscale.training.packs import run_pack
from batchscale.training.trainer import run_trial
from batchscale.training.workload_check import check_user_workload
from batchscale.validation import parse_spec
from batchscale.workloads.dataset_registry import dataset_for
from batchscale.workloads.prepare import prepare_dataset
from tests.conftest import share_datasets, tiny_spec_dict

MODEL = """
import keras


def build(params):
    return keras.Sequential([
        keras.Input(shape=params["input_shape"]),
        keras.layers.Flatten(),
        keras.layers.Dense(int(params["units"]), activation="relu"),
        keras.layers.Dense(params["num_classes"]),
    ])
"""


def quiet(*_):
    pass


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "own_model.py"
    path.write_text(MODEL)
    return f"{path}:build"


def _store(tmp_path, digits_store):
    root = str(tmp_path / "store")
    (tmp_path / "store").mkdir()
    share_datasets(digits_store, root)
    return root


def _rows(store, spec, trial):
    return store.read_measurements(spec, trial)


def test_a_user_model_trains_on_both_engines_and_its_parameters_split_the_pack(
        tmp_path, digits_store, model_file):
    root = _store(tmp_path, digits_store)
    spec = parse_spec(tiny_spec_dict(
        root, workload={"dataset": "digits", "model": model_file, "optimizer": "nesterov_momentum"},
        batch_sizes=[32, 64], max_steps=60, goals=["classification_error<0.01"],
        evaluation={"resolution": 0.25, "train_examples": 200},
        search_space={"learning_rate": {"scale": "log", "min": 0.02, "max": 0.2},
                      "units": {"scale": "discrete", "values": [8, 24]}}))
    store = StudyStore(root)
    store.register_study(spec)
    pack = [TrialSpec("tiny", 32, i, {"learning_rate": 0.05, "momentum": 0.9, "units": units})
            for i, units in ((1, 8), (2, 24), (3, 8))]
    metas = run_pack(spec, pack, store, log=quiet, width=3)  # the pack engine (JAX, in memory)
    # units 8 (trials 1, 3) share one vmapped step; units 24 trains in a group of its own
    assert [m["trainer"] for m in metas] == ["vmapped"] * 3
    assert [m["trained_together"] for m in metas] == [2, 1, 2]
    for meta, trial in zip(metas, pack):
        rows = _rows(store, spec, trial)
        assert meta["status"] == "COMPLETE" and meta["steps"] == 60
        assert meta["parameters"]["units"] == trial.parameters["units"]
        assert rows[-1]["train/cross_entropy_error"] < 0.5 * rows[0]["train/cross_entropy_error"]
    alone = TrialSpec("tiny", 64, 1, {"learning_rate": 0.05, "momentum": 0.9, "units": 24})
    meta = run_trial(spec, alone, store, log=quiet)  # the fit engine
    rows = _rows(store, spec, alone)
    assert meta["trainer"] == "fit" and meta["status"] == "COMPLETE" and meta["steps"] == 60
    assert rows[-1]["train/cross_entropy_error"] < 0.5 * rows[0]["train/cross_entropy_error"]


@pytest.fixture
def regression_files(tmp_path):
    """A user's regression data as an .npz: inputs in [0, 1)^8, two targets linear in them
    plus noise; no validation split (batchscale carves one)."""
    rng = np.random.default_rng(0)
    weights = rng.standard_normal((8, 2)).astype(np.float32)
    x = rng.random((640, 8), dtype=np.float32)
    y = (x @ weights + 0.05 * rng.standard_normal((640, 2))).astype(np.float32)
    path = tmp_path / "regression.npz"
    np.savez(path, x_train=x, y_train=y)
    return str(path)


@pytest.fixture
def regression_store(tmp_path):
    root = tmp_path / "regression-store"
    root.mkdir()
    return str(root)


def _regression_spec(root, data, model_file, **changes):
    raw = tiny_spec_dict(
        root, name="reg", workload={"dataset": {"path": data, "format": "npz"}, "task": "regression",
                                    "model": model_file},
        batch_sizes=[32], max_steps=150, goals=["mean_squared_error<0.0001"],
        fixed={"units": 16, "momentum": 0.9},
        search_space={"learning_rate": {"scale": "log", "min": 0.01, "max": 0.1}})
    raw.update(changes)
    spec = parse_spec(raw)
    prepare_dataset(StudyStore(root), dataset_for(spec.workload), log=quiet)
    return spec


@pytest.mark.parametrize("engine", ["vmapped", "fit"])
def test_regression_trains_with_mse_and_diverges_on_it(engine, regression_store, regression_files,
                                                      model_file):
    spec = _regression_spec(regression_store, regression_files, model_file)
    store = StudyStore(regression_store)
    store.register_study(spec)
    good = TrialSpec("reg", 32, 1, {"learning_rate": 0.05, "momentum": 0.9, "units": 16})
    wild = TrialSpec("reg", 32, 2, {"learning_rate": 50.0, "momentum": 0.9, "units": 16})
    if engine == "vmapped":
        metas = run_pack(spec, [good, wild], store, log=quiet)
    else:
        metas = [run_trial(spec, t, store, log=quiet) for t in (good, wild)]
    assert [m["trainer"] for m in metas] == [engine] * 2
    rows = _rows(store, spec, good)
    assert set(rows[0]) >= {"train/mean_squared_error", "val/mean_squared_error",
                            "train/mean_absolute_error", "val/mean_absolute_error"}
    assert metas[0]["status"] == "COMPLETE" and metas[0]["stop_reason"] == "budget"
    assert rows[-1]["val/mean_squared_error"] < 0.2 * rows[0]["val/mean_squared_error"]
    # mean over examples of each one's mean squared error over its 2 targets
    assert all(r["val/mean_absolute_error"] ** 2 <= r["val/mean_squared_error"] + 1e-9 for r in rows)
    assert metas[1]["status"] == "INFEASIBLE" and metas[1]["stop_reason"] == "diverged"


def test_regression_engines_agree_at_the_start(regression_store, regression_files, model_file):
    """The same trial on both engines: the same initial model (step-0 metrics equal) and
    the same loss, so their first evaluations after training stay close."""
    spec = _regression_spec(regression_store, regression_files, model_file, max_steps=20)
    store = StudyStore(regression_store)
    store.register_study(spec)
    params = {"learning_rate": 0.02, "momentum": 0.9, "units": 16}
    packed = TrialSpec("reg", 32, 1, params)
    run_pack(spec, [packed], store, log=quiet)
    other_root = regression_store + "-fit"
    os.makedirs(other_root)
    share_datasets(regression_store, other_root)
    other = StudyStore(other_root)
    other.register_study(spec)
    run_trial(spec, packed, other, log=quiet)
    a, b = _rows(store, spec, packed), _rows(other, spec, packed)
    assert a[0]["val/mean_squared_error"] == pytest.approx(b[0]["val/mean_squared_error"], rel=1e-5)
    np.testing.assert_allclose([r["val/mean_squared_error"] for r in a],
                               [r["val/mean_squared_error"] for r in b], rtol=2e-3)


MULTILABEL_MODEL = """
import keras


def build(params):
    return keras.Sequential([keras.Input(shape=params["input_shape"]),
                             keras.layers.Dense(16, activation="relu"),
                             keras.layers.Dense(params["num_classes"])])
"""
LANGUAGE_MODEL = """
import keras


def build(params):  # next-token logits (batch, time, vocabulary)
    return keras.Sequential([keras.Input(shape=params["input_shape"], dtype="int32"),
                             keras.layers.Embedding(params["num_classes"], 16),
                             keras.layers.Dense(params["num_classes"])])
"""


def _multilabel_data(path):
    rng = np.random.default_rng(0)
    x = rng.random((300, 6), dtype=np.float32)
    np.savez(path, x_train=x, y_train=(x[:, :3] > 0.5).astype(np.float32))


def _token_data(path):
    rng = np.random.default_rng(0)
    start = rng.integers(1, 10, size=(300, 1))
    np.savez(path, x_train=(start + np.arange(9)) % 19 + 1)  # each next id follows from the last


@pytest.mark.parametrize("task,model,make,loss", [
    ("multilabel", MULTILABEL_MODEL, _multilabel_data, "train/cross_entropy_error"),
    ("language_model", LANGUAGE_MODEL, _token_data, "train/cross_entropy_error"),
], ids=["multilabel", "language_model"])
def test_multilabel_and_language_models_of_the_user_train(task, model, make, loss, tmp_path):
    """The user's model for the other tasks: trained by the fit engine (a multilabel or
    token .npz streams its batches), its task's loss and metrics measured."""
    (tmp_path / "own.py").write_text(model)
    make(tmp_path / "data.npz")
    root = tmp_path / "store"
    root.mkdir()
    spec = parse_spec(tiny_spec_dict(
        str(root), workload={"dataset": {"path": str(tmp_path / "data.npz"), "format": "npz"},
                             "task": task, "model": f"{tmp_path}/own.py:build"},
        batch_sizes=[16], max_steps=60, evaluation={"resolution": 0.25},
        goals=["average_precision>0.999" if task == "multilabel" else "cross_entropy_error<0.001"],
        search_space={"learning_rate": {"scale": "log", "min": 0.01, "max": 0.1}}))
    check_user_workload(spec)  # the deep check's shapes: (B, classes), (B, T, vocabulary)
    store = StudyStore(str(root))
    prepare_dataset(store, dataset_for(spec.workload), log=quiet)
    store.register_study(spec)
    trial = TrialSpec("tiny", 16, 1, {"learning_rate": 0.05, "momentum": 0.9})
    [meta] = run_pack(spec, [trial], store, log=quiet)
    rows = _rows(store, spec, trial)
    assert meta["trainer"] == "fit" and meta["status"] == "COMPLETE" and meta["steps"] == 60
    assert rows[-1][loss] < 0.8 * rows[0][loss]
    assert f"val/{spec.goals[0].metric}" in rows[0]
