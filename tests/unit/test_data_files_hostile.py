"""Hostile data files: each is refused in one line naming the problem and what is allowed
(a SpecError on workload.dataset), by validation (``describe``) or by preparation, and the
store is byte-identical afterwards."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from batchscale.core.errors import SpecError
from batchscale.core.spec import DataFiles
from batchscale.store.layout import StudyStore
from batchscale.workloads.data_files import describe
from batchscale.workloads.prepare import prepare_dataset
from tests.integration.test_cli_bad_input import _snapshot


def _npz(**arrays):
    def write(tmp):
        np.savez(tmp / "d.npz", **arrays)
        return tmp / "d.npz"
    return write


def _csv(frame: dict):
    def write(tmp):
        pd.DataFrame(frame).to_csv(tmp / "d.csv", index=False)
        return tmp / "d.csv"
    return write


def _bytes(name: str, data: bytes):
    def write(tmp):
        (tmp / name).write_bytes(data)
        return tmp / name
    return write


def _images(sizes: dict, extra: dict | None = None):
    def write(tmp):
        for name, shapes in sizes.items():
            (tmp / "pics" / name).mkdir(parents=True)
            for i, (w, h) in enumerate(shapes):
                Image.new("RGB", (w, h), (i, 0, 0)).save(tmp / "pics" / name / f"{i}.png")
        for path, data in (extra or {}).items():
            (tmp / "pics" / path).write_bytes(data)
        return tmp / "pics"
    return write


def _parquet_without_label(tmp):
    pd.DataFrame({"a": [1.0, 2.0], "target": [0, 1]}).to_parquet(tmp / "d.parquet")
    return tmp / "d.parquet"


X = np.ones((10, 2))
Y = np.arange(10) % 2
RAGGED = np.empty(10, object)
RAGGED[:] = [np.ones(i + 1) for i in range(10)]
NAN_X = X.copy()
NAN_X[3, 1] = np.nan

CASES = [  # (id, writer, format, task, options, what the line says)
    ("missing-file", lambda tmp: tmp / "nope.npz", "npz", "classification", {}, "no such file"),
    ("folder-for-npz", lambda tmp: tmp, "npz", "classification", {}, "it is a folder"),
    ("file-for-images", _npz(x_train=X, y_train=Y), "images", "classification", {}, "it is a file"),
    ("corrupt-npz", _bytes("d.npz", b"not a zip archive at all"), "npz", "classification", {},
     "is not a readable .npz archive"),
    ("corrupt-parquet", _bytes("d.parquet", b"PAR1 garbage"), "parquet", "classification", {},
     "is not a readable Parquet file"),
    ("empty-csv", _bytes("d.csv", b""), "csv", "classification", {}, "is not a readable CSV file"),
    ("unknown-npz-key", _npz(x_train=X, y_train=Y, images=X), "npz", "classification", {},
     "holds 'images'; allowed: x_train, y_train"),
    ("no-y-train", _npz(x_train=X), "npz", "classification", {}, "has no y_train"),
    ("x-validation-alone", _npz(x_train=X, y_train=Y, x_validation=X), "npz", "classification", {},
     "has x_validation without y_validation"),
    ("unseen-validation-label", _npz(x_train=X, y_train=Y, x_validation=X[:3], y_validation=[0, 1, 2]),
     "npz", "classification", {}, "y_validation row 2 has label 2, which the training split never has"),
    ("unseen-test-label", _npz(x_train=X, y_train=Y, x_test=X[:2], y_test=[1, 5]),
     "npz", "classification", {}, "y_test row 1 has label 5"),
    ("float-labels", _npz(x_train=X, y_train=Y + 0.5), "npz", "classification", {},
     "y_train holds float labels"),
    ("float-labels-csv", _csv({"a": [1, 2, 3, 4], "label": [0.5, 1, 0, 1]}), "csv", "classification",
     {}, "column 'label' holds float labels"),
    ("missing-label-csv", _csv({"a": [1, 2, 3], "label": ["x", None, "y"]}), "csv",
     "classification", {}, "column 'label' mixes label types"),
    ("one-class", _npz(x_train=X, y_train=np.zeros(10, int)), "npz", "classification", {},
     "1 distinct label(s); allowed: at least two classes"),
    ("ragged-object-array", _npz(x_train=RAGGED, y_train=Y), "npz", "classification", {},
     "x_train is an object array"),
    ("nan-features", _npz(x_train=NAN_X, y_train=Y), "npz", "classification", {},
     "x_train holds NaN in row 3"),
    ("inf-features-csv", _csv({"a": [1.0, np.inf, 2.0, 3.0], "label": [0, 1, 0, 1]}), "csv",
     "classification", {"validation_fraction": 0.5}, "the feature table holds an infinite value in row 1"),
    ("too-big-for-float32", _npz(x_train=X * 1e39, y_train=Y), "npz", "classification", {},
     "after conversion to float32"),
    ("nan-regression-target", _npz(x_train=X, y_train=np.where(Y, np.nan, 1.0)), "npz",
     "regression", {}, "y_train holds NaN in row 1"),
    ("string-regression-target", _csv({"a": [1.0, 2.0], "label": ["high", "low"]}), "csv",
     "regression", {}, "column 'label' holds non-numeric values"),
    ("empty-validation", _npz(x_train=X, y_train=Y, x_validation=X[:0], y_validation=Y[:0]),
     "npz", "classification", {}, "x_validation is empty (0 examples)"),
    ("too-few-to-carve", _npz(x_train=X[:3], y_train=[0, 1, 0]), "npz", "classification", {},
     "3 training examples are too few to carve a validation split"),
    ("x-y-lengths", _npz(x_train=X, y_train=Y[:7]), "npz", "classification", {},
     "x_train has 10 examples but y_train has 7 rows"),
    ("two-column-labels", _npz(x_train=X, y_train=np.ones((10, 2), int)), "npz", "classification",
     {}, "y_train has shape (10, 2); allowed: integer class indices or strings"),
    ("one-dimensional-x", _npz(x_train=np.ones(10), y_train=Y), "npz", "classification", {},
     "x_train has shape (10,)"),
    ("non-numeric-feature", _csv({"a": [1, 2], "city": ["Oslo", "Rome"], "label": [0, 1]}), "csv",
     "classification", {}, "feature column 'city' is not numeric"),
    ("no-label-column", _parquet_without_label, "parquet", "classification", {},
     "has no label column 'label' (columns: a, target)"),
    ("one-class-folder", _images({"cats": [(4, 4)] * 3}), "images", "classification", {},
     "has 1 class folder(s)"),
    ("non-image-file", _images({"a": [(4, 4)] * 3, "b": [(4, 4)] * 3}, {"b/notes.txt": b"hi"}),
     "images", "classification", {}, "b/notes.txt is not an image file"),
    ("corrupt-image", _images({"a": [(4, 4)] * 3, "b": [(4, 4)] * 3}, {"b/9.png": b"\x89PNG junk"}),
     "images", "classification", {}, "b/9.png is not an image Pillow can read"),
    ("images-of-two-sizes", _images({"a": [(4, 4)] * 3, "b": [(4, 4), (5, 4)]}), "images",
     "classification", {}, "b/1.png is 5x4 pixels but a/0.png is 4x4"),
    ("empty-class-folder", _images({"a": [(4, 4)] * 3, "b": []}), "images", "classification", {},
     "class folder 'b' holds no images"),
    ("stray-top-file", _images({"a": [(4, 4)] * 3, "b": [(4, 4)] * 3}, {"README": b"x"}), "images",
     "classification", {}, "holds the file 'README' beside the class folders"),
    ("multilabel-not-0-1", _npz(x_train=X, y_train=np.full((10, 3), 2)), "npz", "multilabel", {},
     "y_train row 0 holds values other than 0 and 1"),
    ("multilabel-from-csv", _csv({"a": [1.0], "label": [1]}), "csv", "multilabel", {},
     "multilabel data from csv files is not supported yet"),
    ("regression-from-images", _images({"a": [(4, 4)] * 3, "b": [(4, 4)] * 3}), "images",
     "regression", {}, "regression data from an images folder is not supported yet"),
    ("lm-with-targets", _npz(x_train=np.ones((4, 5), int), y_train=Y[:4]), "npz", "language_model",
     {}, "language-model targets are the next tokens"),
    ("lm-float-ids", _npz(x_train=np.ones((4, 5))), "npz", "language_model", {},
     "token ids: integers of shape (sequences, length >= 2)"),
    ("lm-unseen-token", _npz(x_train=np.ones((4, 5), int), x_validation=np.full((2, 5), 9)), "npz",
     "language_model", {}, "x_validation holds token id 9, outside the training split's vocabulary"),
]


@pytest.fixture
def store(tmp_path):
    """A store holding one prepared data set already (so 'unchanged' is not 'empty')."""
    np.savez(tmp_path / "good.npz", x_train=X, y_train=Y)
    store = StudyStore(str(tmp_path / "store"))
    prepare_dataset(store, describe(DataFiles(str(tmp_path / "good.npz"), "npz"), "classification"),
                    log=lambda *_: None)
    return store


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_hostile_data_is_refused_in_one_line_and_writes_nothing(tmp_path, store, case):
    _, write, fmt, task, options, expected = case
    (tmp_path / "data").mkdir()
    files = DataFiles(str(write(tmp_path / "data")), fmt, **options)
    before = _snapshot(store.fs.root)
    with pytest.raises(SpecError) as err:
        prepare_dataset(store, describe(files, task), log=lambda *_: None)
    message = str(err.value)
    assert "\n" not in message and message.startswith("workload.dataset: ")
    assert expected in message and "; allowed: " in message, message
    assert _snapshot(store.fs.root) == before


def test_docs_bad_input_lists_every_case():
    """docs/bad-input.md's "Your data files" table: one row per case, the same words."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "bad-input.md").read_text()
    section = doc.split("## Your data files", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = (cells[1], cells[2].strip("`"))
    assert rows == {c[0]: (f"{c[2]}, {c[3].replace('_', ' ')}", c[5]) for c in CASES}
    assert f"Cases tested: {len(CASES)}," in section
