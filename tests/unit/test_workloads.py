"""The workload registries: names, lazy imports, and agreement with the real sources."""

import re
import subprocess
import sys

import numpy as np
import pytest

from batchscale.workloads import DATASETS, check_model_name, get_dataset


def test_unknown_names_list_what_is_allowed():
    with pytest.raises(ValueError, match=re.escape("allowed: " + ", ".join(sorted(DATASETS)))):
        get_dataset("cifar_100")
    assert {"mnist", "fashion_mnist", "cifar_10", "imagenet", "open_images"} <= set(DATASETS)
    with pytest.raises(ValueError, match=r"fc_<N1>_..._<Nk>"):
        check_model_name("fc_")
    for name in ("fc_1024", "fc_128_128_128", "simple_cnn_base", "simple_cnn_narrow", "simple_cnn_wide"):
        check_model_name(name)


def test_registry_import_pulls_in_no_heavy_library():
    heavy = ("tensorflow", "keras", "jax", "mlxtend", "sklearn")
    code = ("import sys, batchscale.workloads, batchscale.core.spec; "
            f"print(sorted(m for m in {heavy!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("name", ["mnist_5k", "digits"])
def test_offline_sources_load_real_images_with_the_registered_splits(name):
    info = get_dataset(name)
    splits = info.load()
    for split, (images, labels) in splits.items():
        assert images.shape == (info.split_sizes[split], *info.input_shape)
        assert images.dtype == np.uint8 and 0 < images.max() <= info.pixel_max
        assert set(np.unique(labels)) == set(range(info.num_classes))
    assert np.array_equal(splits["train"][0], info.load()["train"][0])  # fixed split


@pytest.mark.parametrize("name,tfds_name,sizes", [
    ("mnist", "mnist", (55_000, 5_000, 10_000)),
    ("fashion_mnist", "fashion_mnist", (55_000, 5_000, 10_000)),
    ("cifar_10", "cifar10", (45_000, 5_000, 10_000)),
])
def test_tfds_builders_resolve_and_match_the_registry(name, tfds_name, sizes):
    """The real tensorflow-datasets builders (no download): features agree with our metadata."""
    tfds = pytest.importorskip("tensorflow_datasets")
    features = tfds.builder(tfds_name).info.features
    info = DATASETS[name]
    assert tuple(features["image"].shape) == info.input_shape
    assert features["label"].num_classes == info.num_classes
    assert info.split_sizes == dict(zip(("train", "validation", "test"), sizes))


@pytest.mark.parametrize("name,expected", [
    # 784*128+128 + 128*128+128 + 128*10+10
    ("fc_128_128", 118_282),
    # conv 5x5x1x32+32, conv 5x5x32x64+64, dense 7*7*64*1024+1024, out 1024*10+10 (Appendix B)
    ("simple_cnn_base", 832 + 51_264 + 3_212_288 + 10_250),
    # narrow: 16 and 32 filters, 512 units
    ("simple_cnn_narrow", 416 + 12_832 + 7 * 7 * 32 * 512 + 512 + 5_130),
])
def test_models_have_the_published_architecture(name, expected):
    from batchscale.workloads import build_model

    model = build_model(name, (28, 28, 1), 10)
    assert model.count_params() == expected
    dropout = [layer for layer in model.layers if layer.__class__.__name__ == "Dropout"]
    assert dropout and all(layer.rate == 0.4 for layer in dropout)
