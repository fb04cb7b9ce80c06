"""The data set record: plain metadata every data-set module fills in (no heavy imports)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from batchscale.core.names import DATA_SPLITS, TASK_METRICS
from batchscale.core.spec import DataFiles


@dataclass(frozen=True)
class DatasetInfo:
    """What the rest of the system may know about a data set without loading it.

    ``input_shape``: one example's model input (images (H, W, C); token sequences
    (None,)). ``num_classes``: classes, or the vocabulary size for language models
    (nominal: the prepared vocabulary's real size is in the store's info.json).
    ``options``: workload options this data set accepts, with their defaults (for
    example the crop size of ImageNet); ``split_sizes`` are what a full preparation
    yields: the paper's, except where the public source differs (see ``notes``).
    """

    name: str
    description: str
    # "tfds" (needs a download), "offline" (ships inside a PyPI package) or "idx/tfds"
    # (IDX files where at hand, else tfds: Fashion MNIST)
    source: str
    loader: str  # "module:function": arrays -> {split: (x, y)}; shards -> writes shards
    num_classes: int
    input_shape: tuple
    split_sizes: dict[str, int]
    task: str = "classification"
    storage: str = "arrays"  # "arrays" (held in memory) or "shards" (streamed from the store)
    pipeline: str = ""  # "module:Class" streaming the shards (storage "shards" only)
    pixel_max: float = 255.0
    options: dict = field(default_factory=dict)
    notes: str = ""
    # A user's own data set: its ``core.spec.DataFiles``, which the loader is given (with
    # the task) instead of nothing (``batchscale.workloads.data_files``).
    files: DataFiles | None = None

    @property
    def metrics(self) -> tuple[str, ...]:
        return TASK_METRICS[self.task]

    def function(self, dotted: str):
        module, name = dotted.split(":")
        return getattr(importlib.import_module(module), name)

    def load(self) -> dict:
        """All splits as arrays (storage "arrays" only), checked against ``split_sizes``.

        Real data must have exactly the registered sizes. The one exception is test data:
        tensorflow-datasets' ``tfds.testing.mock_data`` ignores split slices (each split
        yields the same few random examples) and has no split metadata, so a loader that
        finds its source has no recorded size marks its result ``"mock": True``. Then only
        consistency is checked (images and labels pair up, no split empty); the arrays
        keep the mock's own sizes, never padded or cut to look like the paper's.
        """
        loader = self.function(self.loader)
        splits = dict(loader(self.files, self.task) if self.files is not None else loader())
        mock = bool(splits.pop("mock", False))
        for split in DATA_SPLITS:
            images, labels = splits[split]
            if len(labels) != len(images) or not len(images):
                raise RuntimeError(f"{self.name}: loader returned {len(images)} {split} images "
                                   f"and {len(labels)} labels")
            if not mock and len(images) != self.split_sizes[split]:
                raise RuntimeError(
                    f"{self.name}: loader returned {len(images)} {split} images, "
                    f"expected {self.split_sizes[split]}"
                )
        return splits
