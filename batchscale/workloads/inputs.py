"""Input pipelines: what a trial trains and evaluates on, whatever the data set.

The trainer sees every data set through one small interface, so a new data set needs
no trainer change:

- ``train_batches(batch_size, seed)``: an endless iterator of training batches, each
  exactly ``batch_size`` examples (the study's global batch), in a seeded order that
  is a fresh shuffle every epoch;
- ``eval_batches(split, batch_size, limit)``: one deterministic pass over a split (or
  its first ``limit`` examples; the last batch may be smaller).

A batch is a tuple of NumPy arrays ``(inputs, targets)`` or ``(inputs, targets,
weights)``. By task:

- classification: float32 images (B, H, W, C); int64 labels (B,);
- multilabel: float32 images; float32 multi-hot targets (B, classes);
- language_model: int32 token ids (B, T), 0 = padding; int32 next tokens (B, T);
  float32 weights (B, T), 0 on padding.

Data sets small enough to hold in memory use ``ArrayPipeline`` (the whole split is a
pair of arrays, and the trainer may take many steps' batches in one ``fit`` call).
Large ones stream shards from the store (see ``batchscale.workloads.shards``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator

import numpy as np

from batchscale.workloads.data_order import EpochPermutations
from batchscale.workloads.subsets import read_subset

CPUS_ENV = "BATCHSCALE_CPUS"  # set on cluster pods from the placement preset's CPU request


def available_cpus() -> int:
    """CPUs this process may use for decoding and tokenizing.

    In a pod, ``os.cpu_count()`` is the node's count, not the pod's share: the placement
    preset passes its CPU request in ``BATCHSCALE_CPUS`` (read here, at call time).
    Elsewhere it is the CPUs this process may run on.
    """
    value = os.environ.get(CPUS_ENV, "").strip()
    if value:
        cpus = float(value[:-1]) / 1000 if value.endswith("m") else float(value)
        return max(1, math.floor(cpus))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class InputPipeline:
    """Base class; see the module docstring for the contract."""

    task: str = "classification"
    input_shape: tuple = ()
    num_outputs: int = 0
    num_train_examples: int = 0
    in_memory: bool = False

    def train_batches(self, batch_size: int, seed: int) -> Iterator[tuple]:
        raise NotImplementedError

    def eval_batches(self, split: str, batch_size: int, limit: int | None = None) -> Iterator[tuple]:
        raise NotImplementedError


class ArrayPipeline(InputPipeline):
    """Whole splits in memory as (inputs, targets): inputs divided by ``pixel_max`` into
    float32 (images: 255 scales uint8 pixels to [0, 1]; feature vectors: 1, no scaling).

    Targets are as stored: int64 class indices, float32 regression targets or multi-hot
    rows (``task``). A data set with other preprocessing subclasses this and overrides
    ``scale`` (CIFAR-10 standardises each image); ``subsets.read_subset`` gives such a
    subclass its arrays, with the workload's ``train_size`` and ``classes`` applied.
    """

    in_memory = True

    def __init__(self, splits: dict, num_classes: int, pixel_max: float = 255.0,
                 task: str = "classification"):
        self.splits = {name: (np.asarray(x), np.asarray(y)) for name, (x, y) in splits.items()}
        self.pixel_max = float(pixel_max)
        self.task = task
        self.input_shape = tuple(self.splits["train"][0].shape[1:])
        self.num_outputs = int(num_classes)
        self.num_train_examples = len(self.splits["train"][0])
        self._scaled: dict[str, np.ndarray] = {}

    def scale(self, images: np.ndarray) -> np.ndarray:
        """Model inputs from stored inputs: float32, divided by ``pixel_max`` unless it is 1."""
        inputs = images.astype(np.float32)
        return inputs if self.pixel_max == 1.0 else inputs / self.pixel_max

    def arrays(self, split: str) -> tuple[np.ndarray, np.ndarray]:
        """The whole split, images through ``scale`` as float32 (converted once, then cached)."""
        if split not in self._scaled:
            self._scaled[split] = self.scale(self.splits[split][0])
        return self._scaled[split], self.splits[split][1]

    def train_batches(self, batch_size: int, seed: int) -> Iterator[tuple]:
        x, y = self.arrays("train")
        order = EpochPermutations(len(x), batch_size, seed)
        while True:
            indices = order.take(1)
            yield x[indices], y[indices]

    def eval_batches(self, split: str, batch_size: int, limit: int | None = None) -> Iterator[tuple]:
        x, y = self.arrays(split)
        stop = len(x) if limit is None else min(limit, len(x))
        for start in range(0, stop, batch_size):
            end = min(start + batch_size, stop)
            yield x[start:end], y[start:end]


class TokenArrays(ArrayPipeline):
    """A user's token ids held in memory (a language model from an .npz): stored inputs are
    each sequence but its last id, targets each but its first (int32, 0 = padding);
    batches carry weights 1 where the target is not padding.

    Batches go through ``train_batches``/``eval_batches`` (``in_memory`` False), as the
    trainer feeds every language model: ``(ids, next ids, weights)``.
    """

    in_memory = False

    def __init__(self, store, info, stored: dict, options: dict):
        super().__init__(*read_subset(store, info, stored, options), 1.0, "language_model")

    def scale(self, images: np.ndarray) -> np.ndarray:
        return images.astype(np.int32)

    def train_batches(self, batch_size: int, seed: int) -> Iterator[tuple]:
        for x, y in super().train_batches(batch_size, seed):
            yield x, y, (y != 0).astype(np.float32)

    def eval_batches(self, split: str, batch_size: int, limit: int | None = None) -> Iterator[tuple]:
        for x, y in super().eval_batches(split, batch_size, limit):
            yield x, y, (y != 0).astype(np.float32)
