"""Fashion-MNIST from its IDX files: which source is chosen, the paper's split of the real
files, and the provenance a prepared store records.

The real files are Debian's package ``dataset-fashion-mnist`` (CI installs it: .ci/run);
where it is missing the tests that read them skip, saying so (in CI they fail). The
60,000 training images are read once per module (about 50 MB, under a second).
"""

import gzip
import hashlib
import os

import numpy as np
import pytest

from batchscale.store.layout import StudyStore
from batchscale.workloads import fashion_mnist, get_dataset
from batchscale.workloads.fashion_mnist import (
    DEBIAN_FOLDER,
    FOLDER_VARIABLE,
    IDX_FILES,
    choose_source,
    load_idx_folder,
)
from batchscale.workloads.prepare import prepare_dataset
from tests.system_tools import missing
from tests.unit.test_idx_files import idx_bytes

STEMS = [stem for pair in IDX_FILES.values() for stem in pair]


def debian_files() -> str:
    """Debian's folder of the four files, or a skip (a failure in CI) that says what is
    missing (tests/system_tools.py)."""
    absent = [s for s in STEMS if not os.path.isfile(os.path.join(DEBIAN_FOLDER, s + ".gz"))]
    if absent:
        missing(f"Debian's dataset-fashion-mnist ({DEBIAN_FOLDER}/{absent[0]}.gz)",
                "apt-get install dataset-fashion-mnist")
    return DEBIAN_FOLDER


def reference_labels(path: str) -> np.ndarray:
    """A label file read as Fashion-MNIST's own utils/mnist_reader.py does (not our reader)."""
    with gzip.open(path, "rb") as handle:
        return np.frombuffer(handle.read(), dtype=np.uint8, offset=8)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A store prepared from Debian's files, as ``run --local`` prepares it."""
    folder = debian_files()
    store = StudyStore(str(tmp_path_factory.mktemp("fashion") / "store"))
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(FOLDER_VARIABLE, raising=False)
        patch.setattr(fashion_mnist, "tfds_prepared", lambda name="fashion_mnist": False)
        prepare_dataset(store, "fashion_mnist", log=lambda *_: None)
    return folder, store


def test_the_paper_split_of_the_real_files_in_file_order(prepared):
    folder, store = prepared
    train_labels = reference_labels(os.path.join(folder, "train-labels-idx1-ubyte.gz"))
    test_labels = reference_labels(os.path.join(folder, "t10k-labels-idx1-ubyte.gz"))
    expected = {"train": train_labels[:55_000], "validation": train_labels[55_000:],
                "test": test_labels}
    for split, labels in expected.items():
        x, y = store.read_split("fashion_mnist", split)
        assert x.shape == (len(labels), 28, 28, 1) and x.dtype == np.uint8
        assert y.dtype == np.int64 and len(y) == get_dataset("fashion_mnist").split_sizes[split]
        assert (y[0], y[-1]) == (labels[0], labels[-1])
        assert np.array_equal(y, labels)
    x, _ = store.read_split("fashion_mnist", "validation")
    with gzip.open(os.path.join(folder, "train-images-idx3-ubyte.gz"), "rb") as handle:
        raw = np.frombuffer(handle.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    assert np.array_equal(x[-1, ..., 0], raw[-1]) and np.array_equal(x[0, ..., 0], raw[55_000])


def test_provenance_names_the_source_files_and_the_split_rule(prepared):
    folder, store = prepared
    record = store.read_dataset_info("fashion_mnist")["provenance"]
    assert record["source"] == "idx folder" and record["folder"] == folder
    assert record["chosen_by"] == "Debian package dataset-fashion-mnist"
    assert "55000-59999" in record["split_rule"] and "file order" in record["split_rule"]
    assert sorted(record["files"]) == sorted(s + ".gz" for s in STEMS)
    for name, digests in record["files"].items():
        raw = open(os.path.join(folder, name), "rb").read()
        assert digests["sha256"] == hashlib.sha256(raw).hexdigest()
        assert digests["content_sha256"] == hashlib.sha256(gzip.decompress(raw)).hexdigest()


# ---- choosing the source ----------------------------------------------------------------
def write_small_idx(folder, images=4, compress=True):
    """The four files with ``images`` images each (not Fashion-MNIST's sizes)."""
    folder.mkdir(exist_ok=True)
    arrays = {"images": np.zeros((images, 28, 28), np.uint8), "labels": np.arange(images) % 10}
    for stem in STEMS:
        kind = "images" if "images" in stem else "labels"
        raw = idx_bytes(arrays[kind].astype(np.uint8), 0x08)
        path = folder / (stem + (".gz" if compress else ""))
        path.write_bytes(gzip.compress(raw) if compress else raw)
    return folder


@pytest.fixture
def no_tfds_copy(monkeypatch):
    monkeypatch.setattr(fashion_mnist, "tfds_prepared", lambda name="fashion_mnist": False)


def test_the_folder_variable_comes_first_and_must_hold_the_files(tmp_path, no_tfds_copy, monkeypatch):
    folder = write_small_idx(tmp_path / "mine", compress=False)
    monkeypatch.setattr(fashion_mnist, "tfds_prepared", lambda name="fashion_mnist": True)
    assert choose_source({FOLDER_VARIABLE: str(folder)}) == ("idx", str(folder))
    (folder / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(ValueError, match=rf"^{FOLDER_VARIABLE}=.*mine: no t10k-labels-idx1-ubyte "
                                         r"\(\.gz or not\) there; it must hold"):
        choose_source({FOLDER_VARIABLE: str(folder)})
    with pytest.raises(ValueError, match=rf"^{FOLDER_VARIABLE}=.*absent: not a folder; name"):
        choose_source({FOLDER_VARIABLE: str(tmp_path / "absent")})


def test_a_prepared_tfds_copy_then_debian_then_a_download(tmp_path, monkeypatch):
    monkeypatch.setattr(fashion_mnist, "DEBIAN_FOLDER", str(write_small_idx(tmp_path / "deb")))
    monkeypatch.setattr(fashion_mnist, "tfds_prepared", lambda name="fashion_mnist": True)
    assert choose_source({}) == ("tfds", "a prepared tensorflow-datasets copy")
    monkeypatch.setattr(fashion_mnist, "tfds_prepared", lambda name="fashion_mnist": False)
    assert choose_source({FOLDER_VARIABLE: "  "}) == ("idx", str(tmp_path / "deb"))
    monkeypatch.setattr(fashion_mnist, "DEBIAN_FOLDER", str(tmp_path / "absent"))
    kind, why = choose_source({})
    assert kind == "tfds" and why.startswith(f"no IDX files ({FOLDER_VARIABLE} unset")


def test_the_loader_reads_the_variable_at_call_time(tmp_path, no_tfds_copy, monkeypatch):
    folder = write_small_idx(tmp_path / "mine")
    monkeypatch.setenv(FOLDER_VARIABLE, str(folder))
    with pytest.raises(ValueError, match=r"^/.*/mine/train-images-idx3-ubyte\.gz: uint8 images of shape "
                                         r"\(4, 28, 28\); Fashion-MNIST's are uint8 \(60000, 28, 28\)$"):
        fashion_mnist.load_fashion_mnist()


def test_a_small_folder_splits_by_the_rule_and_refuses_labels_outside_the_classes(
        tmp_path, monkeypatch):
    """With Fashion-MNIST's sizes made small: the split, then a label of 10."""
    monkeypatch.setattr(fashion_mnist, "IDX_SHAPES", {"train": (4, 28, 28), "test": (4, 28, 28)})
    monkeypatch.setattr(fashion_mnist, "TRAIN_EXAMPLES", 3)
    folder = write_small_idx(tmp_path / "mine")
    splits = load_idx_folder(str(folder))
    assert [splits[s][1].tolist() for s in ("train", "validation", "test")] == [
        [0, 1, 2], [3], [0, 1, 2, 3]]
    assert splits["train"][0].shape == (3, 28, 28, 1)
    assert splits["record"]["provenance"]["chosen_by"] == FOLDER_VARIABLE
    labels = idx_bytes(np.array([0, 1, 10, 3], np.uint8), 0x08)
    (folder / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(labels))
    with pytest.raises(ValueError, match=r"t10k-labels-idx1-ubyte\.gz: uint8 labels of shape "
                                         r"\(4,\) \(largest 10\); expected uint8 \(4,\) in 0\.\.9$"):
        load_idx_folder(str(folder))


def test_a_tfds_copy_records_its_files_and_the_downloads_tfds_verified(tmp_path):
    """The real builder over a folder holding one stand-in file (no download)."""
    tfds = pytest.importorskip("tensorflow_datasets")
    from batchscale.workloads.small_images import PAPER_SLICES, tfds_provenance

    builder = tfds.builder("fashion_mnist", data_dir=str(tmp_path))
    os.makedirs(builder.data_path)
    (builder.data_path / "fashion_mnist-train.tfrecord-00000-of-00001").write_bytes(b"records")
    record = tfds_provenance(builder, PAPER_SLICES, mock=False)
    assert record["source"] == "tfds" and record["name"].startswith("fashion_mnist/")
    assert record["folder"] == str(builder.data_path) and not record["mock"]
    assert record["files"] == {"fashion_mnist-train.tfrecord-00000-of-00001": {
        "sha256": hashlib.sha256(b"records").hexdigest()}}
    assert sorted(u.rsplit("/", 1)[1] for u in record["download_sha256"]) == sorted(
        s + ".gz" for s in STEMS)
    assert "shuffled" in record["split_rule"]
