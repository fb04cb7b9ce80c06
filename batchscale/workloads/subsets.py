"""Data-size and class subsets of an in-memory data set: the workload options
``train_size`` and ``classes`` (``core.experiment``'s data axes, the paper's Figure 6).

A data set is prepared once in the store (``datasets/<name>/``, whatever the options);
every trial takes its subset from those splits when it opens its pipeline
(``dataset_registry.open_pipeline``), so studies that differ only in these options share
one prepared copy. This module is the one place the options are applied:

- ``classes = K``: every split keeps only the examples whose label is < K (the first K
  classes; labels stay 0..K-1) and the model gets K outputs.
- ``train_size = N``: the training split keeps N examples, the first N of one fixed
  permutation of it. The permutation's seed is ``SUBSET_SEED``, a constant of this
  module, never the study's seed, so the subsets are *nested* (the 1,000 examples of
  ``train_size: 1000`` include the 500 of ``train_size: 500``) and the same in every
  study, run and process. Validation and test splits are untouched: every data size is
  judged on the same examples. With both options, the class filter comes first (the
  permutation is of the filtered training split, so subsets of one K are nested).

Shard-streamed data sets (storage "shards") take neither option. Plain NumPy, no heavy
import.
"""

from __future__ import annotations

import numpy as np

from batchscale.core.experiment import CLASSES_OPTION, TRAIN_SIZE_OPTION
from batchscale.core.names import DATA_SPLITS

SUBSET_OPTIONS = (TRAIN_SIZE_OPTION, CLASSES_OPTION)
# The training subsets' permutation seed: a constant, so subsets nest across sizes and
# are identical across studies and runs. Changing it changes every subset ever drawn.
SUBSET_SEED = 20_190_318


def subset_options(options: dict | None) -> dict:
    """The subset options among a workload's options (``{}`` when none is set)."""
    return {k: int(v) for k, v in (options or {}).items() if k in SUBSET_OPTIONS}


def train_indices(num_examples: int, train_size: int) -> np.ndarray:
    """The indices (sorted, so stored order is kept) of the ``train_size`` training
    examples kept of ``num_examples``: the first ``train_size`` of the fixed permutation,
    so a smaller size's indices are always among a larger one's."""
    if train_size > num_examples:
        raise ValueError(f"workload.options.{TRAIN_SIZE_OPTION}: {train_size} exceeds the "
                         f"{num_examples} examples of the training split; allowed: 1..{num_examples}")
    order = np.random.default_rng(SUBSET_SEED).permutation(num_examples)
    return np.sort(order[:train_size])


def keep_classes(splits: dict, classes: int, num_classes: int) -> dict:
    """Every split with only the examples of the first ``classes`` classes (label < K)."""
    if not 2 <= classes <= num_classes:
        raise ValueError(f"workload.options.{CLASSES_OPTION}: {classes}; allowed: 2..{num_classes} "
                         f"(the data set's classes)")
    out = {}
    for split, (x, y) in splits.items():
        labels = np.asarray(y)
        if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"workload.options.{CLASSES_OPTION}: split {split} has no class "
                             f"labels (shape {labels.shape}, {labels.dtype}); only classification "
                             "data sets take it")
        keep = labels < classes
        if not keep.any():
            raise ValueError(f"workload.options.{CLASSES_OPTION}: {classes} leaves no {split} "
                             "example; allowed: more classes")
        out[split] = (np.asarray(x)[keep], labels[keep])
    return out


def apply_subsets(splits: dict, num_classes: int, options: dict | None) -> tuple[dict, int]:
    """``(splits, num_classes)`` with the subset options applied: classes first, then the
    training size. ``splits`` is ``{split: (inputs, targets)}``; without either option it
    is returned as it is."""
    chosen = subset_options(options)
    if CLASSES_OPTION in chosen:
        splits = keep_classes(splits, chosen[CLASSES_OPTION], num_classes)
        num_classes = chosen[CLASSES_OPTION]
    if TRAIN_SIZE_OPTION in chosen:
        x, y = splits["train"]
        keep = train_indices(len(x), chosen[TRAIN_SIZE_OPTION])
        splits = {**splits, "train": (np.asarray(x)[keep], np.asarray(y)[keep])}
    return splits, num_classes


def read_subset(store, info, stored: dict, options: dict | None) -> tuple[dict, int]:
    """The prepared splits of an in-memory data set (``store.read_split``) with the subset
    options applied, and the model's number of outputs: what every array pipeline holds."""
    splits = {split: store.read_split(info.name, split) for split in DATA_SPLITS}
    return apply_subsets(splits, stored.get("num_classes", info.num_classes), options)


def refuse_streamed(info, options: dict | None) -> None:
    """A shard-streamed data set takes no subset option: one line naming it."""
    chosen = subset_options(options)
    if chosen and info.storage == "shards":
        raise ValueError(f"workload.options.{next(iter(chosen))}: {info.name} is streamed from "
                         f"shards and takes no {' or '.join(SUBSET_OPTIONS)}; allowed on in-memory "
                         "data sets (storage arrays) only")


def train_examples(info, options: dict | None) -> int:
    """The training examples a workload trains on, known without reading data:
    ``train_size`` when set, else the data set's training split (with ``classes`` alone
    this is an upper bound: the split's size before the class filter)."""
    chosen = subset_options(options)
    return chosen.get(TRAIN_SIZE_OPTION, int(info.split_sizes["train"]))
