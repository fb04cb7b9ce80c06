"""A real tensorflow-datasets copy of Fashion MNIST, prepared from Debian's IDX files (its
"downloads" are the files, decompressed): preparation then prefers that copy to the IDX
files, records it as the source, and its split holds the same examples as the IDX split's
union but not in the same order (tfds shuffles when it prepares a data set), which is why
the source is recorded at all.
"""

import gzip
import os

import numpy as np
import pytest

from batchscale.store.layout import StudyStore
from batchscale.workloads import fashion_mnist
from batchscale.workloads.prepare import prepare_dataset
from tests.unit.test_fashion_mnist import STEMS, debian_files

tfds = pytest.importorskip("tensorflow_datasets")
pytestmark = pytest.mark.slow  # tfds encodes 70,000 PNGs: about a minute on 2 cores


@pytest.fixture(scope="module")
def tfds_copy(tmp_path_factory):
    folder = debian_files()
    work = tmp_path_factory.mktemp("tfds")
    files = {}
    for key, stem in zip(("train_data", "train_labels", "test_data", "test_labels"), STEMS):
        path = work / stem
        with gzip.open(os.path.join(folder, stem + ".gz"), "rb") as packed:
            path.write_bytes(packed.read())
        files[key] = str(path)
    data_dir = str(work / "data")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tfds.download.DownloadManager, "download_and_extract", lambda self, urls: files)
        builder = tfds.builder("fashion_mnist", data_dir=data_dir)
        builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
            compute_stats=tfds.download.ComputeStatsMode.SKIP))
    return folder, data_dir


def test_a_prepared_tfds_copy_is_preferred_and_recorded(tfds_copy, tmp_path, monkeypatch):
    folder, data_dir = tfds_copy
    from tensorflow_datasets.core.utils import file_utils

    # TFDS_DATA_DIR is read once per process: register the folder as tfds.core.add_data_dir
    # does, on a copy of tfds' set that the test then puts back.
    monkeypatch.setattr(file_utils, "_REGISTERED_DATA_DIRS",
                        {*file_utils._REGISTERED_DATA_DIRS, file_utils.Path(data_dir)})
    monkeypatch.delenv(fashion_mnist.FOLDER_VARIABLE, raising=False)
    assert fashion_mnist.tfds_prepared()
    store = StudyStore(str(tmp_path / "store"))
    prepare_dataset(store, "fashion_mnist", log=lambda *_: None)
    provenance = store.read_dataset_info("fashion_mnist")["provenance"]
    assert provenance["source"] == "tfds" and not provenance["mock"]
    assert provenance["chosen_by"] == "a prepared tensorflow-datasets copy"
    assert provenance["folder"].startswith(data_dir)
    assert any(name.startswith("fashion_mnist-train.tfrecord") for name in provenance["files"])

    idx = fashion_mnist.load_idx_folder(folder)
    ours = {split: store.read_split("fashion_mnist", split) for split in ("train", "validation", "test")}
    for split in ("train", "validation", "test"):
        assert ours[split][0].shape == idx[split][0].shape
    # The same 60,000 training labels (and 10,000 test labels), in another order.
    union = np.concatenate([ours["train"][1], ours["validation"][1]])
    assert np.array_equal(np.bincount(union), np.bincount(np.concatenate(
        [idx["train"][1], idx["validation"][1]])))
    assert not np.array_equal(ours["train"][1], idx["train"][1])
    assert np.array_equal(np.bincount(ours["test"][1]), np.bincount(idx["test"][1]))
