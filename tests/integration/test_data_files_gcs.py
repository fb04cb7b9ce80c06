"""A user's data files on gs://, read through the store's storage layer: the real
google-cloud-storage client against gcp-storage-emulator (tests/conftest.py). The same
files prepared from gs:// and from a local folder give the same splits."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from batchscale.core.errors import SpecError
from batchscale.core.spec import DataFiles
from batchscale.store.filesystem import open_root
from batchscale.store.layout import StudyStore
from batchscale.workloads.data_files import describe
from batchscale.workloads.dataset_registry import open_pipeline
from batchscale.workloads.prepare import prepare_dataset

QUIET = {"log": lambda *_: None}


def _npz_bytes(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _png(value: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("L", (3, 2), value).save(buffer, format="PNG")
    return buffer.getvalue()


def _splits(store: StudyStore, info) -> dict:
    pipeline = open_pipeline(store, info)
    return {split: pipeline.arrays(split) for split in ("train", "validation", "test")}


def test_files_on_gcs_prepare_as_the_same_files_do_locally(gcs_root, tmp_path):
    rng = np.random.default_rng(0)
    data = _npz_bytes(x_train=rng.normal(size=(30, 3)), y_train=np.arange(30) % 3,
                      x_test=rng.normal(size=(4, 3)), y_test=[0, 1, 2, 0])
    table = io.BytesIO()
    pd.DataFrame({"a": np.arange(12.0), "y": np.arange(12) % 2}).to_parquet(table)
    bucket = open_root(gcs_root)
    bucket.write_bytes("in/d.npz", data)
    bucket.write_bytes("in/t.parquet", table.getvalue())
    for i in range(6):
        bucket.write_bytes(f"in/pics/{'ab'[i % 2]}/{i}.png", _png(10 * i))
    (tmp_path / "pics" / "a").mkdir(parents=True)
    (tmp_path / "pics" / "b").mkdir()
    (tmp_path / "d.npz").write_bytes(data)
    (tmp_path / "t.parquet").write_bytes(table.getvalue())
    for i in range(6):
        (tmp_path / "pics" / "ab"[i % 2] / f"{i}.png").write_bytes(_png(10 * i))

    for name, fmt, options in (("d.npz", "npz", {}), ("t.parquet", "parquet", {"label": "y"}),
                               ("pics", "images", {"validation_fraction": 0.34})):
        remote = describe(DataFiles(f"{gcs_root}/in/{name}", fmt, **options), "classification")
        local = describe(DataFiles(str(tmp_path / name), fmt, **options), "classification")
        assert (remote.split_sizes, remote.input_shape, remote.num_classes) == \
            (local.split_sizes, local.input_shape, local.num_classes)
        store = StudyStore(f"{gcs_root}/store")  # the store on gs:// too
        prepare_dataset(store, remote, **QUIET)
        local_store = StudyStore(str(tmp_path / "store"))
        prepare_dataset(local_store, local, **QUIET)
        assert store.read_dataset_info(remote.name)["source_sha256"] == \
            local_store.read_dataset_info(local.name)["source_sha256"]
        for split, (x, y) in _splits(store, remote).items():
            np.testing.assert_array_equal(x, _splits(local_store, local)[split][0])
            np.testing.assert_array_equal(y, _splits(local_store, local)[split][1])


def test_a_changed_or_missing_gcs_file_is_refused_in_one_line(gcs_root):
    bucket = open_root(gcs_root)
    bucket.write_bytes("d.npz", _npz_bytes(x_train=np.ones((10, 2)), y_train=np.arange(10) % 2))
    files = DataFiles(f"{gcs_root}/d.npz", "npz")
    store = StudyStore(f"{gcs_root}/store")
    prepare_dataset(store, describe(files, "classification"), **QUIET)
    bucket.write_bytes("d.npz", _npz_bytes(x_train=np.zeros((10, 2)), y_train=np.arange(10) % 2))
    with pytest.raises(SpecError, match=r"d\.npz: changed since it was prepared"):
        prepare_dataset(store, describe(files, "classification"), **QUIET)
    with pytest.raises(SpecError, match=r"missing\.npz: no such file; allowed: an existing file"):
        describe(DataFiles(f"{gcs_root}/missing.npz", "npz"), "classification")
