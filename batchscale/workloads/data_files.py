"""A user's own data set from files (``workload.dataset: {path, format, ...}``, a
``core.spec.DataFiles``): what validation may know about it (``describe``), its splits for
data preparation (``load_splits``, the loader of its ``DatasetInfo``) and the check that a
prepared copy still matches its source (``check_source_unchanged``).

The contract (docs/workloads.md, "Your own data"):

- ``npz``: ``x_train``, ``y_train``, optionally ``x_validation``/``y_validation`` and
  ``x_test``/``y_test``; ``parquet``/``csv``: one table, the ``label`` column and every
  other column a numeric feature; ``images``: a folder with one subfolder per class (sorted
  names = class indices), all images one size, decoded by Pillow to uint8.
- Targets by task: classification, integer or string labels whose classes are the sorted
  distinct labels of the files' training split (a validation or test label outside them
  is refused); regression, numbers (examples,) or (examples, outputs); multilabel (npz),
  multi-hot rows (examples, classes); language_model (npz), token ids (sequences, length)
  with 0 = padding and no ``y_``: the targets are the next tokens.
- No validation split in the files: ``validation_fraction`` of the training examples is
  carved off, chosen by the study's seed. No test split: the test split *is* the
  validation split (nothing in batchscale evaluates on test; carving a second split would
  take training data for nothing). info.json records both.
- Inputs: uint8 arrays (images) are stored as they are and divided by 255 when a trial
  reads them; everything else is stored and trained as float32, unscaled.
- Size: a data set whose float32 inputs exceed ``IN_MEMORY_BYTES`` is refused for now (a
  trial holds its inputs in memory).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from batchscale.core.names import DATA_FORMATS
from batchscale.workloads.data_checks import (
    carve,
    carve_sizes,
    check_finite,
    check_inputs_form,
    check_multi_hot,
    check_targets_form,
    check_token_ids,
    class_names,
    encode_labels,
    refuse,
)
from batchscale.workloads.data_images import image_arrays, image_facts, image_listing
from batchscale.workloads.data_readers import (
    Facts,
    Loaded,
    npz_arrays,
    npz_facts,
    open_files,
    table_arrays,
    table_facts,
)
from batchscale.workloads.data_sources import folder_digest, sha256_file
from batchscale.workloads.dataset_record import DatasetInfo

IN_MEMORY_BYTES = 2**30  # float32 inputs of all splits a trial may hold in memory (1 GiB)
TASK_FORMATS = {"classification": DATA_FORMATS, "regression": ("npz", "parquet", "csv"),
                "multilabel": ("npz",), "language_model": ("npz",)}
LOADER = "batchscale.workloads.data_files:load_splits"
TOKEN_PIPELINE = "batchscale.workloads.inputs:TokenArrays"
TEST_IS_VALIDATION = "validation (the files hold no test split; nothing in batchscale evaluates on it)"


# Facts of files a store has prepared (``remember_prepared``): what ``describe`` answers
# for them in a process that reads a finished study, whose files may have moved or gone.
_PREPARED: dict = {}


def remember_prepared(files, task: str, record: dict) -> None:
    """Let ``describe(files, task)`` answer from a store's record of those files
    (``datasets/<name>/info.json``, written by prepare_data) instead of reading them: a
    report of a study whose data file was moved, deleted or is on a bucket this machine
    cannot read. Only the study readers call it; validation reads the files."""
    lm = task == "language_model"
    _PREPARED[(files, task)] = DatasetInfo(
        name=files.name, description=record.get("description", ""), source="files",
        loader=LOADER, num_classes=int(record["num_classes"]),
        input_shape=tuple(record["input_shape"]), split_sizes=dict(record["split_sizes"]),
        task=task, pipeline=TOKEN_PIPELINE if lm else "",
        pixel_max=float(record.get("pixel_max", 1.0)), files=files,
        notes="your data, as prepared in the store")


def describe(files, task: str) -> DatasetInfo:
    """The facts validation needs (split sizes, input shape, classes or outputs, metrics),
    read as cheaply as the format allows (npz headers and training labels, a Parquet
    footer and label column, one image's header; a CSV whole). Cached per process; files
    a study reader found prepared in its store are answered from that record."""
    prepared = _PREPARED.get((files, task))
    return prepared if prepared is not None else _describe_files(files, task)


@functools.lru_cache(maxsize=32)
def _describe_files(files, task: str) -> DatasetInfo:
    _check_task_format(files, task)
    source = open_files(files.path, files.format)
    if files.format == "npz":
        facts = npz_facts(source, task)
    elif files.format == "images":
        facts = image_facts(source)
    else:
        facts = table_facts(source, files.format, files.label, task)
    sizes = split_sizes(files, facts.counts)
    inputs = sum(sizes[s] for s in ("train", "validation") + (("test",) if "test" in facts.counts
                                                            else ()))
    needed = inputs * math.prod(facts.input_shape) * 4
    if needed > IN_MEMORY_BYTES:
        refuse(files.path, f"its inputs take {_size(needed)} as float32, more than the "
               f"{_size(IN_MEMORY_BYTES)} a trial holds in memory (streaming files is not "
               f"supported yet)", f"a data set whose float32 inputs fit in {_size(IN_MEMORY_BYTES)}")
    images = facts.input_dtype == np.uint8
    lm = task == "language_model"
    return DatasetInfo(
        name=files.name, description=f"{files.format} data from {files.path}", source="files",
        loader=LOADER, num_classes=_outputs(task, facts), input_shape=facts.input_shape,
        split_sizes=sizes, task=task, pipeline=TOKEN_PIPELINE if lm else "",
        pixel_max=255.0 if images else 1.0, files=files,
        notes=f"your data; {_scaling(facts.input_dtype, task)}; test split: "
              f"{'from the files' if 'test' in facts.counts else TEST_IS_VALIDATION}")


def split_sizes(files, counts: dict) -> dict[str, int]:
    """The prepared splits' sizes from the files' (a carved validation split included)."""
    train = counts["train"]
    if "validation" in counts:
        validation = counts["validation"]
    else:
        train, validation = carve_sizes(files.path, train, files.validation_fraction)
    return {"train": train, "validation": validation, "test": counts.get("test", validation)}


def load_splits(files, task: str) -> dict:
    """The loader: every split in its stored form after every content check, and under
    ``"record"`` what info.json records (classes, carve, scaling, checksums)."""
    _check_task_format(files, task)
    source = open_files(files.path, files.format)
    if files.format == "npz":
        loaded, names = npz_arrays(source, task), ("x_{}", "y_{}")
    elif files.format == "images":
        loaded, names = image_arrays(source), ("images ({})", "labels ({})")
    else:
        loaded = table_arrays(source, files.format, files.label, task)
        names = ("the feature table", f"column {files.label!r}")
    return finish(files, task, loaded, names)


def check_files(files, task: str) -> dict:
    """The deep check: every content check of preparation, nothing written; returns what
    info.json would record."""
    return load_splits(files, task)["record"]


def finish(files, task: str, loaded: Loaded, names: tuple[str, str]) -> dict:
    """Checked, encoded, carved splits and their record (see the module docstring)."""
    where, splits = files.path, dict(loaded.splits)
    for split, (x, y) in splits.items():
        x_name, y_name = (name.format(split) for name in names)
        check_inputs_form(where, x_name, x.shape, x.dtype, task)
        check_finite(where, x_name, x)
        if task != "language_model":
            check_targets_form(where, y_name, y.shape, y.dtype, len(x), x_name, task)
    record = {"files": {**files.to_dict(), "seed": files.seed}, "source_sha256": loaded.sha256,
              "source_files": loaded.files, "scaling": _scaling(splits["train"][0].dtype, task)}
    targets = _targets(where, task, splits, names[1], loaded.classes, record)
    splits = {split: (_inputs(x, task), targets[split]) for split, (x, _) in splits.items()}
    if "validation" in splits:
        record["validation"] = "from the files"
    else:
        x, y = splits["train"]
        train, validation = carve(where, len(x), files.validation_fraction, files.seed)
        splits["train"], splits["validation"] = (x[train], y[train]), (x[validation], y[validation])
        record["validation"] = {"carved": {"fraction": files.validation_fraction,
                                           "seed": files.seed, "examples": len(validation)}}
    record["test"] = "from the files" if "test" in splits else TEST_IS_VALIDATION
    splits.setdefault("test", splits["validation"])
    return {**splits, "record": record}


def check_source_unchanged(store, info: DatasetInfo) -> None:
    """Refuse a prepared copy whose source files changed since it was prepared: training on
    it would be training on stale data, and preparing again beside it would mix the two."""
    recorded = store.read_dataset_info(info.name).get("source_sha256")
    current = source_digest(info.files)
    if recorded and recorded != current:
        refuse(info.files.path, f"changed since it was prepared as {store.url(f'datasets/{info.name}')} "
               f"(sha256 {recorded[:12]}..., now {current[:12]}...)",
               "the file as it was prepared (restore it), or the new data under a new file name "
               "(another path is another data set)")


def source_digest(files) -> str:
    """The sha256 of the source file (of an images folder: over each image's sha256)."""
    source = open_files(files.path, files.format)
    if files.format != "images":
        return sha256_file(source)
    paths = [path for listed in image_listing(source).values() for path in listed]
    return folder_digest({path: sha256_file(source, path) for path in paths})


def _check_task_format(files, task: str) -> None:
    if files.format not in TASK_FORMATS[task]:
        given = "an images folder" if files.format == "images" else f"{files.format} files"
        refuse(files.path, f"{task.replace('_', ' ')} data from {given} is not supported yet",
               f"{task} data as {' or '.join(TASK_FORMATS[task])}")


def _targets(where: str, task: str, splits: dict, y_names: str, classes, record: dict) -> dict:
    """Each split's targets in stored form: class indices (int64), float32 targets or
    multi-hot rows, or the next tokens (int32) of a language model."""
    if task == "classification":
        if classes is None:  # npz and tables: labels as the files hold them
            classes = class_names(where, y_names.format("train"), splits["train"][1])
            targets = {split: encode_labels(where, y_names.format(split), y, classes)
                       for split, (_, y) in splits.items()}
        else:  # images: the sorted folders are the classes, the labels their indices
            targets = {split: y for split, (_, y) in splits.items()}
        record["classes"] = [str(c) for c in classes]
        return targets
    if task == "language_model":
        vocabulary = None
        for split, (x, _) in splits.items():  # train first
            check_token_ids(where, f"x_{split}", x, vocabulary)
            vocabulary = vocabulary or int(x.max()) + 1
        record["num_classes"] = vocabulary
        return {split: x[:, 1:].astype(np.int32) for split, (x, _) in splits.items()}
    targets = {}
    for split, (_, y) in splits.items():
        y = np.asarray(y)
        if task == "regression":
            check_finite(where, y_names.format(split), y)
        else:
            check_multi_hot(where, y_names.format(split), y)
        targets[split] = y.astype(np.float32)
    record["outputs"] = int(np.prod(targets["train"].shape[1:]))
    return targets


def _inputs(x: np.ndarray, task: str) -> np.ndarray:
    if task == "language_model":
        return x[:, :-1].astype(np.int32)
    return x if x.dtype == np.uint8 else x.astype(np.float32)


def _scaling(dtype, task: str) -> str:
    if task == "language_model":
        return "none (int32 token ids; inputs are the ids, targets the next ids)"
    if np.dtype(dtype) == np.uint8:
        return "x / 255 (uint8 inputs, stored as uint8)"
    return "none (inputs stored and trained as float32)"


def _size(count: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"


def _outputs(task: str, facts: Facts) -> int:
    if task == "classification":
        return len(facts.classes)
    if task == "language_model":
        return facts.vocabulary
    return int(np.prod(facts.target_shape)) if facts.target_shape else 1
