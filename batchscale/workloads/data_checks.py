"""Every check of a user's data, in one place: each refusal is one line (a ``SpecError``
on ``workload.dataset``) naming the file, the problem and what is allowed, raised before
anything is written.

Two kinds: *form* checks need only shapes and dtypes (an npz member's header, a Parquet
schema), so ``data_files.describe`` runs them cheaply at validation; *content* checks need
the values (NaN, labels outside the classes, multi-hot rows) and run where the data is
loaded whole: data preparation and the deep check (``data_files.check_files``).
"""

from __future__ import annotations

from typing import NoReturn

import numpy as np

from batchscale.core.errors import fail_field

FIELD = "workload.dataset"
NUMERIC = "a numeric array (integers, floats or booleans)"
CLASS_LABELS = "integer class indices or strings (one per example)"
CARVE_ALLOWED = ("more training examples, a larger validation_fraction, or a validation split "
                 "in the files")


def refuse(where: str, problem: str, allowed: str) -> NoReturn:
    """The one refusal: ``workload.dataset: <where>: <problem>; allowed: <allowed>``."""
    fail_field(FIELD, f"{where}: {problem}; allowed: {allowed}")


# ---- form: shapes and dtypes ----------------------------------------------------------
def check_inputs_form(where: str, name: str, shape: tuple, dtype, task: str) -> None:
    """One split's model inputs ``name`` (e.g. x_train): numeric, one row per example,
    not empty; token ids (language_model) are 2-D integers of length >= 2."""
    dtype = np.dtype(dtype)
    if dtype.hasobject:
        refuse(where, f"{name} is an object array (ragged rows of different shapes, or Python "
               "objects)", f"{NUMERIC} of one shape (examples, features...)")
    if dtype.kind not in "biuf":
        refuse(where, f"{name} holds {dtype} values", f"{NUMERIC} of one shape")
    if len(shape) < 2:
        refuse(where, f"{name} has shape {tuple(shape)}",
               "(examples, features...): one row per example, at least one feature")
    if shape[0] == 0:
        refuse(where, f"{name} is empty (0 examples)", "at least one example in every split")
    if task == "language_model" and (dtype.kind not in "iu" or len(shape) != 2 or shape[1] < 2):
        refuse(where, f"{name} is {dtype} of shape {tuple(shape)}",
               "token ids: integers of shape (sequences, length >= 2), 0 = padding")


def check_targets_form(where: str, name: str, shape: tuple, dtype, examples: int, inputs: str,
                       task: str) -> None:
    """One split's targets ``name``: as many as the inputs, in the task's form."""
    dtype = np.dtype(dtype)
    if len(shape) == 0 or shape[0] != examples:
        refuse(where, f"{inputs} has {examples} examples but {name} has "
               f"{shape[0] if shape else 'no'} rows", "one target per example")
    if dtype.hasobject and task != "classification":
        refuse(where, f"{name} holds non-numeric values (an object array: strings, ragged rows "
               "or Python objects)", NUMERIC)
    if task == "classification":
        if len(shape) != 1 and tuple(shape[1:]) != (1,):
            refuse(where, f"{name} has shape {tuple(shape)}",
                   f"{CLASS_LABELS}: shape (examples,) or (examples, 1)")
        if dtype.kind == "f":
            refuse(where, f"{name} holds float labels ({dtype})", CLASS_LABELS)
        if dtype.kind not in "biuUSO":
            refuse(where, f"{name} holds {dtype} labels", CLASS_LABELS)
    elif task == "regression":
        if dtype.kind not in "biuf" or len(shape) > 2:
            refuse(where, f"{name} is {dtype} of shape {tuple(shape)}",
                   "float targets of shape (examples,) or (examples, outputs)")
    elif task == "multilabel":
        if dtype.kind not in "biuf" or len(shape) != 2 or shape[1] < 1:
            refuse(where, f"{name} is {dtype} of shape {tuple(shape)}",
                   "multi-hot rows of 0 and 1, shape (examples, classes)")


# ---- content: the values ----------------------------------------------------------------
def check_finite(where: str, name: str, values: np.ndarray) -> None:
    """No NaN or infinity (in float features and regression targets, also after the cast to
    float32 that training uses: 1e39 is finite in float64 and infinite in float32)."""
    if values.dtype.kind != "f":
        return
    with np.errstate(over="ignore"):
        bad = ~np.isfinite(values.astype(np.float32, copy=False))
    if bad.any():
        row = int(np.argwhere(bad)[0][0])
        kind = "NaN" if np.isnan(values.reshape(len(values), -1)[row]).any() else "an infinite value"
        refuse(where, f"{name} holds {kind} in row {row} ({int(bad.sum())} non-finite value(s) "
               "in all, after conversion to float32)", "finite numbers (drop or fill missing values)")


def check_multi_hot(where: str, name: str, targets: np.ndarray) -> None:
    bad = (targets != 0) & (targets != 1)
    if bad.any():
        row = int(np.argwhere(bad)[0][0])
        refuse(where, f"{name} row {row} holds values other than 0 and 1",
               "multi-hot rows of 0 and 1, shape (examples, classes)")


def check_token_ids(where: str, name: str, ids: np.ndarray, vocabulary: int | None) -> None:
    """Token ids are >= 0 and, outside the training split, below its vocabulary."""
    if (ids < 0).any():
        refuse(where, f"{name} holds negative token ids", "token ids >= 0 (0 = padding)")
    if vocabulary is not None and ids.size and int(ids.max()) >= vocabulary:
        refuse(where, f"{name} holds token id {int(ids.max())}, outside the training split's "
               f"vocabulary (ids 0..{vocabulary - 1})", "ids the training split uses")


def label_values(where: str, name: str, labels) -> np.ndarray:
    """Class labels as a NumPy array of ints, bools or strings (a table's object column of
    strings included); missing, float or mixed labels are refused."""
    labels = np.asarray(labels).reshape(-1)  # (examples, 1) as (examples,)
    if labels.dtype.kind == "f":
        missing = bool(np.isnan(labels).any())
        refuse(where, f"{name} holds {'missing' if missing else 'float'} labels", CLASS_LABELS)
    if labels.dtype.kind == "O":
        kinds = {type(v).__name__ for v in labels.tolist()}
        if kinds != {"str"}:
            refuse(where, f"{name} mixes label types ({', '.join(sorted(kinds))}; a missing "
                   "label reads as float)", CLASS_LABELS)
        labels = labels.astype(str)
    return labels


def class_names(where: str, name: str, labels) -> list:
    """The classes: the training split's sorted distinct labels (at least two)."""
    classes = np.unique(label_values(where, name, labels))
    if len(classes) < 2:
        refuse(where, f"{name} holds {len(classes)} distinct label(s)",
               "at least two classes in the training split")
    return classes.tolist()


def encode_labels(where: str, name: str, labels, classes: list) -> np.ndarray:
    """Class indices (int64) of ``labels`` in ``classes``; a label the training split never
    has is refused."""
    labels = label_values(where, name, labels)
    known = np.asarray(classes)
    index = np.searchsorted(known, labels)
    index = np.clip(index, 0, len(known) - 1)
    unknown = known[index] != labels
    if unknown.any():
        row = int(np.argmax(unknown))
        refuse(where, f"{name} row {row} has label {labels[row].item()!r}, which the training split "
               f"never has", f"the training split's classes ({_few(classes)})")
    return index.astype(np.int64)


def carve_sizes(where: str, examples: int, fraction: float) -> tuple[int, int]:
    """(training, validation) examples when validation is carved off the training split."""
    validation = int(examples * fraction + 0.5)
    if validation < 1 or examples - validation < 1:
        refuse(where, f"{examples} training examples are too few to carve a validation split of "
               f"fraction {fraction} ({validation} validation, {examples - validation} training)",
               CARVE_ALLOWED)
    return examples - validation, validation


def carve(where: str, examples: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices (training, validation): a seeded random ``fraction`` for validation, each part
    in the files' order. The same seed and size always carve the same examples."""
    _, validation = carve_sizes(where, examples, fraction)
    order = np.random.default_rng(seed).permutation(examples)
    return np.sort(order[validation:]), np.sort(order[:validation])


def check_same_size(where: str, path: str, size: tuple, first: str, first_size: tuple) -> None:
    if size != first_size:
        refuse(where, f"{path} is {size[0]}x{size[1]} pixels but {first} is "
               f"{first_size[0]}x{first_size[1]}", "images all of one size (resize them first)")


def _few(values: list, count: int = 5) -> str:
    shown = ", ".join(map(str, values[:count]))
    return shown + (f", ... ({len(values)} in all)" if len(values) > count else "")
