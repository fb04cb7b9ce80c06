"""A user's data set from files, as a study sees it: ``describe`` (what validation knows),
``prepare_dataset`` (the store's splits, their checksums, the source's) and the input
pipeline a trial trains on, for every format and task; tiny files in tmp_path."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from batchscale.core.errors import SpecError
from batchscale.core.spec import DataFiles
from batchscale.store.layout import StudyStore
from batchscale.validation import parse_spec
from batchscale.workloads.data_files import check_files, describe
from batchscale.workloads.dataset_registry import open_pipeline
from batchscale.workloads.prepare import prepare_dataset

QUIET = {"log": lambda *_: None}


def prepared(tmp_path, path, fmt, task="classification", **options):
    """(info, pipeline, info.json) of ``path`` prepared into a store under tmp_path."""
    files = DataFiles(str(path), fmt, **options)
    info = describe(files, task)
    store = StudyStore(str(tmp_path / "store"))
    prepare_dataset(store, info, **QUIET)
    return info, open_pipeline(store, info), store.read_dataset_info(info.name)


def write_images(folder, sizes_by_class: dict, mode="RGB"):
    for name, sizes in sizes_by_class.items():
        (folder / name).mkdir(parents=True)
        for i, (width, height) in enumerate(sizes):
            pixels = np.full((height, width, 3), 40 * i + len(name), np.uint8)
            Image.fromarray(pixels).convert(mode).save(folder / name / f"{i}.png")
    return folder


def test_npz_features_with_string_labels_carve_a_seeded_validation_split(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3))
    y = np.array(["dog", "cat", "eel", "cat"] * 10)
    np.savez(tmp_path / "d.npz", x_train=x, y_train=y)
    info, pipeline, stored = prepared(tmp_path, tmp_path / "d.npz", "npz", seed=7)
    assert info.split_sizes == {"train": 36, "validation": 4, "test": 4}
    assert (info.num_classes, info.input_shape, info.task) == (3, (3,), "classification")
    assert stored["classes"] == ["cat", "dog", "eel"]
    assert stored["validation"] == {"carved": {"fraction": 0.1, "seed": 7, "examples": 4}}
    assert stored["test"].startswith("validation")
    assert stored["scaling"].startswith("none")
    # the carve is every training example once, in the files' order, labels by sorted class
    train_x, train_y = pipeline.arrays("train")
    val_x, val_y = pipeline.arrays("validation")
    assert train_x.dtype == np.float32 and train_y.dtype == np.int64
    both = np.concatenate([train_x, val_x])
    rows = [int(np.argmin(np.abs(x - row).sum(1))) for row in both]
    assert sorted(rows) == list(range(40))
    assert list(np.array(["cat", "dog", "eel"])[np.concatenate([train_y, val_y])]) == list(y[rows])
    np.testing.assert_allclose(both, x[rows], rtol=1e-6)
    # another seed carves other examples; the same seed the same ones
    _, again, _ = prepared(tmp_path / "b", tmp_path / "d.npz", "npz", seed=7)
    _, other, _ = prepared(tmp_path / "c", tmp_path / "d.npz", "npz", seed=8)
    np.testing.assert_array_equal(again.arrays("validation")[0], val_x)
    assert not np.array_equal(other.arrays("validation")[0], val_x)


def test_npz_splits_from_the_files_and_checksums_in_info_json(tmp_path):
    rng = np.random.default_rng(1)
    arrays = {f"x_{s}": rng.integers(0, 255, (n, 4, 4, 1), dtype=np.uint8)
              for s, n in (("train", 12), ("validation", 5), ("test", 6))}
    arrays.update({f"y_{s}": (np.arange(len(arrays[f"x_{s}"])) % 3).reshape(-1, 1)  # (N, 1) too
                   for s in ("train", "validation", "test")})
    np.savez_compressed(tmp_path / "img.npz", **arrays)
    info, pipeline, stored = prepared(tmp_path, tmp_path / "img.npz", "npz")
    assert info.split_sizes == {"train": 12, "validation": 5, "test": 6}
    assert info.pixel_max == 255.0 and stored["scaling"].startswith("x / 255")
    assert stored["validation"] == stored["test"] == "from the files"
    assert stored["classes"] == ["0", "1", "2"]
    np.testing.assert_allclose(pipeline.arrays("test")[0], arrays["x_test"] / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(pipeline.arrays("test")[1], np.arange(6) % 3)
    import hashlib

    store = StudyStore(str(tmp_path / "store"))
    for split in ("train", "validation", "test"):
        data = store.fs.read_bytes(f"datasets/{info.name}/{split}.npz")
        assert stored["sha256"][f"{split}.npz"] == hashlib.sha256(data).hexdigest()
    assert stored["source_sha256"] == hashlib.sha256((tmp_path / "img.npz").read_bytes()).hexdigest()


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_tables_label_column_and_numeric_features(tmp_path, fmt):
    frame = pd.DataFrame({"a": np.arange(20, dtype=np.int64), "b": np.linspace(0, 1, 20),
                          "flag": [True, False] * 10, "kind": [3, 7] * 10})
    path = tmp_path / f"t.{fmt}"
    frame.to_csv(path, index=False) if fmt == "csv" else frame.to_parquet(path)
    info, pipeline, stored = prepared(tmp_path, path, fmt, label="kind", validation_fraction=0.25)
    assert info.input_shape == (3,) and info.num_classes == 2
    assert info.split_sizes == {"train": 15, "validation": 5, "test": 5}
    assert stored["classes"] == ["3", "7"]
    x, y = (np.concatenate(parts) for parts in zip(pipeline.arrays("train"),
                                                    pipeline.arrays("validation")))
    by_a = {int(row[0]): (row, label) for row, label in zip(x, y)}
    assert sorted(by_a) == list(range(20))
    row, label = by_a[4]
    np.testing.assert_allclose(row, [4, frame.b[4], 1.0], rtol=1e-6)  # float32, unscaled
    assert label == 0  # kind 3 is the first sorted class


def test_regression_targets_are_float32_and_unscaled(tmp_path):
    x = np.linspace(-1, 1, 30).reshape(15, 2)
    np.savez(tmp_path / "r.npz", x_train=x, y_train=x.sum(1) * 1000.0)
    info, pipeline, stored = prepared(tmp_path, tmp_path / "r.npz", "npz", "regression")
    assert (info.num_classes, info.task, info.metrics[0]) == (1, "regression", "mean_squared_error")
    assert stored["outputs"] == 1 and "classes" not in stored
    assert pipeline.task == "regression"
    xb, yb = next(pipeline.train_batches(4, seed=0))
    assert yb.dtype == np.float32 and xb.dtype == np.float32
    np.testing.assert_allclose(yb, xb.sum(1) * 1000.0, rtol=1e-5)
    frame = pd.DataFrame({"f": np.arange(10.0), "label": np.arange(10.0) / 3})
    frame.to_csv(tmp_path / "r.csv", index=False)
    info, pipeline, _ = prepared(tmp_path / "csv", tmp_path / "r.csv", "csv", "regression")
    assert info.num_classes == 1 and pipeline.arrays("train")[1].dtype == np.float32


def test_multilabel_multi_hot_rows(tmp_path):
    y = np.eye(4, dtype=np.uint8)[np.arange(12) % 4] | np.eye(4, dtype=np.uint8)[np.arange(12) % 2]
    np.savez(tmp_path / "m.npz", x_train=np.ones((12, 5)), y_train=y)
    info, pipeline, stored = prepared(tmp_path, tmp_path / "m.npz", "npz", "multilabel")
    assert info.num_classes == 4 and stored["outputs"] == 4
    assert pipeline.arrays("train")[1].dtype == np.float32


def test_language_model_token_ids_give_next_token_batches_with_weights(tmp_path):
    ids = np.array([[5, 6, 7, 0], [8, 9, 0, 0]] * 5, np.int64)
    np.savez(tmp_path / "lm.npz", x_train=ids, x_validation=ids[:2])
    info, pipeline, stored = prepared(tmp_path, tmp_path / "lm.npz", "npz", "language_model")
    assert info.num_classes == stored["num_classes"] == 10 and info.input_shape == (3,)
    x, y, w = next(pipeline.eval_batches("validation", 2))
    np.testing.assert_array_equal(x, [[5, 6, 7], [8, 9, 0]])
    np.testing.assert_array_equal(y, [[6, 7, 0], [9, 0, 0]])
    np.testing.assert_array_equal(w, [[1, 1, 0], [1, 0, 0]])
    assert next(pipeline.train_batches(3, 0))[0].shape == (3, 3)


@pytest.mark.parametrize("mode,channels", [("RGB", 3), ("L", 1)])
def test_images_folder_one_subfolder_per_class(tmp_path, mode, channels):
    folder = write_images(tmp_path / "pics", {"b_zebra": [(5, 4)] * 6, "a_ant": [(5, 4)] * 4}, mode)
    (folder / "a_ant" / ".DS_Store").write_bytes(b"hidden files are skipped")
    info, pipeline, stored = prepared(tmp_path, folder, "images", validation_fraction=0.2, seed=1)
    assert info.input_shape == (4, 5, channels) and info.num_classes == 2
    assert stored["classes"] == ["a_ant", "b_zebra"] and stored["source_files"] == 10
    x, y = pipeline.arrays("train")
    assert x.shape == (8, 4, 5, channels) and x.max() <= 1.0
    raw = StudyStore(str(tmp_path / "store")).read_split(info.name, "train")[0]
    assert raw.dtype == np.uint8
    # class a_ant (index 0) has the pixel value 5 + 40 i, b_zebra 7 + 40 i
    firsts = {int(label): int(image[0, 0, 0]) % 40 for image, label in zip(raw, y)}
    assert firsts == {0: 5, 1: 7}


def test_a_changed_source_is_refused_and_the_restored_one_reused(tmp_path):
    path = tmp_path / "d.npz"
    np.savez(path, x_train=np.ones((10, 2)), y_train=np.arange(10) % 2)
    original = path.read_bytes()
    files = DataFiles(str(path), "npz")
    store = StudyStore(str(tmp_path / "store"))
    assert not prepare_dataset(store, describe(files, "classification"), **QUIET)["reused"]
    np.savez(path, x_train=np.zeros((10, 2)), y_train=np.arange(10) % 2)
    before = {p: store.fs.read_bytes(p) for p in store.fs.list_files("", recursive=True)}
    with pytest.raises(SpecError, match="changed since it was prepared") as err:
        prepare_dataset(store, describe(files, "classification"), **QUIET)
    assert "\n" not in str(err.value)
    assert before == {p: store.fs.read_bytes(p) for p in store.fs.list_files("", recursive=True)}
    path.write_bytes(original)
    assert prepare_dataset(store, describe(files, "classification"), **QUIET)["reused"]


def test_describe_is_cached_and_check_files_writes_nothing(tmp_path):
    np.savez(tmp_path / "d.npz", x_train=np.ones((10, 2)), y_train=np.arange(10) % 2)
    files = DataFiles(str(tmp_path / "d.npz"), "npz")
    assert describe(files, "classification") is describe(files, "classification")
    record = check_files(files, "classification")
    assert record["classes"] == ["0", "1"] and json.dumps(record)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.npz"]


def test_a_study_spec_takes_its_sizes_from_the_files(tmp_path):
    np.savez(tmp_path / "d.npz", x_train=np.ones((50, 2)), y_train=np.arange(50) % 2)
    raw = {"name": "mine", "store": str(tmp_path / "store"),
           "workload": {"dataset": {"path": str(tmp_path / "d.npz"), "format": "npz"},
                        "model": "fc_128_128", "optimizer": "sgd"},
           "evaluation": {"train_examples": 0}, "batch_sizes": [8, 64],
           "search_space": {"learning_rate": {"scale": "log", "min": 0.01, "max": 1}},
           "goals": ["classification_error<0.5"], "max_steps": {8: 10, 64: 10}}
    with pytest.raises(SpecError, match="batch_sizes: 64 exceeds the 45 training examples"):
        parse_spec(raw)
    assert not (tmp_path / "store").exists()


def test_data_larger_than_memory_is_refused_in_one_line(tmp_path, monkeypatch):
    from batchscale.workloads import data_files

    np.savez(tmp_path / "big.npz", x_train=np.ones((100, 8), np.uint8), y_train=np.arange(100) % 2)
    monkeypatch.setattr(data_files, "IN_MEMORY_BYTES", 3000)  # 100 x 8 float32 = 3200 bytes
    refused = r"big\.npz: its inputs take 3\.1 KiB as float32, more than the 2\.9 KiB"
    with pytest.raises(SpecError, match=refused) as err:
        describe(DataFiles(str(tmp_path / "big.npz"), "npz"), "classification")
    assert "\n" not in str(err.value) and "not supported yet" in str(err.value)
