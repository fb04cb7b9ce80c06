"""The paper's image data sets (Appendix A.1) on tensorflow-datasets' mock data.

tfds cannot download here, so every data set is prepared from ``tfds.testing.mock_data``
(random images, each split the same few examples, slices ignored) into a temporary
store, and its pipeline is checked against the contract of ``batchscale.workloads.inputs``.
The preprocessing itself is checked by hand on small fixed images.
"""

import io

import numpy as np
import pytest

from batchscale.store.layout import StudyStore
from batchscale.workloads import get_dataset
from batchscale.workloads.datasets import open_pipeline
from batchscale.workloads.defaults import workload_defaults
from batchscale.workloads.image_stream import (
    MEAN_RGB,
    crop_box,
    decode,
    eval_image,
    resize_sides,
    resize_smaller_side,
    train_image,
)
from batchscale.workloads.large_images import human_positives, prepare_imagenet
from batchscale.workloads.prepare import prepare_dataset
from batchscale.workloads.small_images import per_image_standardization
from tests.mock_sources import encode, mock_open_images, open_images_source

tfds = pytest.importorskip("tensorflow_datasets")
Image = pytest.importorskip("PIL.Image")
NO_LOG = lambda *_: None  # noqa: E731


def ramp(height, width):
    """A fixed RGB image whose every pixel differs: R = row, G = column, B = row + column."""
    rows, cols = np.mgrid[0:height, 0:width]
    return np.stack([rows * 10, cols * 10, rows + cols], axis=-1).astype(np.uint8)


# ---- preprocessing, by hand -------------------------------------------------------------
def test_resize_sides_are_the_papers_scaled_to_the_crop():
    assert resize_sides(224) == (256, 512, 256)
    assert resize_sides(112) == (128, 256, 128)
    assert resize_sides(4) == (5, 9, 5)  # 4.57 -> 5, 9.14 -> 9


def test_central_crop_and_mean_subtraction():
    pixels = ramp(5, 7)  # smaller side 5 = the evaluation side for a crop of 4: no resize
    out = eval_image(encode(pixels), size=4, side=5)
    assert crop_box(7, 5, 4) == (1, 0, 5, 4)  # (7-4)//2 = 1 column, (5-4)//2 = 0 rows
    expected = pixels[0:4, 1:5].astype(np.float32) - np.array([123.68, 116.779, 103.939])
    assert out.dtype == np.float32 and out.shape == (4, 4, 3)
    np.testing.assert_allclose(out, expected, atol=1e-4)


def test_random_crop_position_and_flip():
    pixels = ramp(6, 5)
    data = encode(pixels)
    corner = train_image(data, size=4, side=5, u_x=0.0, u_y=0.99, flip=False)
    np.testing.assert_allclose(corner, pixels[2:6, 0:4] - MEAN_RGB, atol=1e-4)  # room 1 x 2
    flipped = train_image(data, size=4, side=5, u_x=0.99, u_y=0.0, flip=True)
    np.testing.assert_allclose(flipped, pixels[0:4, 1:5][:, ::-1] - MEAN_RGB, atol=1e-4)
    assert flipped[0, 0, 1] == pytest.approx(40 - MEAN_RGB[1], abs=1e-4)  # column 4 first


def test_resize_keeps_the_aspect_and_the_colour():
    flat = np.empty((10, 20, 3), np.uint8)
    flat[:] = (200, 100, 50)
    image = resize_smaller_side(decode(encode(flat), 5), 5)
    assert image.size == (10, 5)  # (width, height): the smaller side (height) is 5
    assert np.array_equal(np.unique(np.asarray(image).reshape(-1, 3), axis=0), [[200, 100, 50]])
    tall = resize_smaller_side(decode(encode(np.zeros((9, 3, 3))), 6), 6)
    assert tall.size == (6, 18)
    out = train_image(encode(flat), size=4, side=7, u_x=0.5, u_y=0.5, flip=True)
    np.testing.assert_allclose(out, np.broadcast_to([200, 100, 50] - MEAN_RGB, (4, 4, 3)), atol=1e-4)


def test_jpeg_is_decoded_at_a_reduced_scale_only_down_to_the_side():
    jpeg = encode(np.random.default_rng(0).integers(0, 255, (48, 64, 3)), fmt="JPEG")
    assert decode(jpeg, 10).size == (16, 12)  # 1/4 scale: smaller side 12 >= 10
    assert decode(jpeg, 30).size == (64, 48)  # halving would go below 30
    assert decode(encode(np.zeros((4, 4))), 2).mode == "RGB"  # greyscale becomes RGB


def test_per_image_standardization_by_hand_and_against_tensorflow():
    image = np.array([0, 2, 4, 6], np.uint8).reshape(1, 2, 2, 1)
    np.testing.assert_allclose(per_image_standardization(image).ravel(),
                               (np.array([0, 2, 4, 6]) - 3) / np.sqrt(5), rtol=1e-6)
    # std sqrt(3/16) < 1/sqrt(4): divided by 1/sqrt(N) = 0.5 instead
    near_flat = np.array([0, 0, 0, 1], np.uint8).reshape(1, 2, 2, 1)
    np.testing.assert_allclose(per_image_standardization(near_flat).ravel(), [-0.5, -0.5, -0.5, 1.5])
    assert not per_image_standardization(np.full((1, 2, 2, 3), 7, np.uint8)).any()

    tf = pytest.importorskip("tensorflow")
    batch = np.random.default_rng(0).integers(0, 256, (5, 32, 32, 3)).astype(np.uint8)
    batch[0] = 9  # a flat image
    ours = per_image_standardization(batch, chunk=2)
    theirs = tf.image.per_image_standardization(batch).numpy()
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_human_verified_positives_only():
    # sources: 0 verification, 1 crowdsource-verification, 2 machine; confidence * 10
    objects = {"label": np.array([5, 9, 3, 5, 7, 1]), "confidence": np.array([10, 10, 0, 10, 10, 7]),
               "source": np.array([0, 2, 1, 1, 1, 0])}
    assert human_positives(objects, np.array([0, 1])).tolist() == [5, 7]


# ---- data sets from tfds mock data ------------------------------------------------------
@pytest.fixture
def store(tmp_path):
    return StudyStore(str(tmp_path / "store"))


@pytest.mark.parametrize("name", ["mnist", "fashion_mnist"])
def test_mnist_like_sets_prepare_from_mock_data(store, name):
    with tfds.testing.mock_data(num_examples=12):
        prepare_dataset(store, name, log=NO_LOG)
    pipeline = open_pipeline(store, get_dataset(name))
    x, y = pipeline.arrays("train")
    assert x.shape == (12, 28, 28, 1) and x.dtype == np.float32 and 0 <= x.min() <= x.max() <= 1
    assert y.dtype == np.int64 and set(y) <= set(range(10))
    xb, yb = next(pipeline.train_batches(5, seed=0))
    assert xb.shape == (5, 28, 28, 1) and yb.shape == (5,)
    assert [len(b[0]) for b in pipeline.eval_batches("test", 5)] == [5, 5, 2]


def test_sizes_are_checked_except_on_mock_data(monkeypatch):
    from batchscale.workloads import small_images

    info = get_dataset("mnist")
    fake = {split: (np.zeros((3, 28, 28, 1), np.uint8), np.zeros(3, np.int64))
            for split in ("train", "validation", "test")}
    monkeypatch.setattr(small_images, "load_mnist", lambda: {**fake, "mock": False})
    with pytest.raises(RuntimeError, match="3 train images, expected 55000"):
        info.load()
    monkeypatch.setattr(small_images, "load_mnist", lambda: {**fake, "mock": True})
    assert set(info.load()) == {"train", "validation", "test"}
    fake["test"] = (fake["test"][0], np.zeros(2, np.int64))
    with pytest.raises(RuntimeError, match="2 labels"):
        info.load()


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


def test_registry_entries_agree_with_the_tfds_builders():
    """The real builders (no download): classes, features and label sources we rely on."""
    imagenet, open_images, cifar = (get_dataset(n) for n in ("imagenet", "open_images", "cifar_10"))
    assert imagenet.num_classes == tfds.builder("imagenet2012").info.features["label"].num_classes
    assert "ILSVRC2012_img_train.tar" in imagenet.notes and "manual" in imagenet.notes
    features = tfds.builder("open_images_v4/original").info.features["objects_trainable"]
    assert features["label"].num_classes == open_images.num_classes == 7186
    assert {"verification", "crowdsource-verification"} <= set(features["source"].names)
    assert tfds.builder("cifar10").info.features["image"].shape == cifar.input_shape
    assert imagenet.storage == open_images.storage == "shards"
    assert imagenet.options == open_images.options == {"image_size": 224}
    assert open_images.task == "multilabel" and open_images.metrics[0] == "average_precision"
    assert workload_defaults("open_images", "resnet_50").goal == {
        "metric": "average_precision", "value": 0.31, "direction": "maximize"}
    assert workload_defaults("cifar_10", "resnet_8").goal["value"] == 0.3
    assert workload_defaults("imagenet", "resnet_50").goal["value"] == 0.25


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
