"""The paper's image data sets (Appendix A.1): preprocessing by hand, and the registry.

The preprocessing is checked by hand on small fixed images; the registry against the
real tensorflow-datasets builders (metadata only, no download, no TensorFlow).
Preparing each data set from tfds' mock data (TensorFlow in-process, a GCS store on the
emulator) and the comparison with TensorFlow's own standardisation are in
tests/integration/test_image_data_preparation.py.
"""

import numpy as np
import pytest

from batchscale.workloads import get_dataset
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
from batchscale.workloads.large_images import human_positives
from batchscale.workloads.small_images import per_image_standardization
from tests.mock_sources import encode

Image = pytest.importorskip("PIL.Image")


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



def test_per_image_standardization_by_hand():
    image = np.array([0, 2, 4, 6], np.uint8).reshape(1, 2, 2, 1)
    np.testing.assert_allclose(per_image_standardization(image).ravel(),
                               (np.array([0, 2, 4, 6]) - 3) / np.sqrt(5), rtol=1e-6)
    # std sqrt(3/16) < 1/sqrt(4): divided by 1/sqrt(N) = 0.5 instead
    near_flat = np.array([0, 0, 0, 1], np.uint8).reshape(1, 2, 2, 1)
    np.testing.assert_allclose(per_image_standardization(near_flat).ravel(), [-0.5, -0.5, -0.5, 1.5])
    assert not per_image_standardization(np.full((1, 2, 2, 3), 7, np.uint8)).any()


def test_human_verified_positives_only():
    # sources: 0 verification, 1 crowdsource-verification, 2 machine; confidence * 10
    objects = {"label": np.array([5, 9, 3, 5, 7, 1]), "confidence": np.array([10, 10, 0, 10, 10, 7]),
               "source": np.array([0, 2, 1, 1, 1, 0])}
    assert human_positives(objects, np.array([0, 1])).tolist() == [5, 7]



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



def test_registry_entries_agree_with_the_tfds_builders():
    """The real builders (no download): classes, features and label sources we rely on."""
    tfds = pytest.importorskip("tensorflow_datasets")
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
