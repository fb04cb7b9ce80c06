"""Readers of a user's data files, one pair per format: ``*_facts`` reads only what
validation needs (an npz member's header, a Parquet footer, plus the training labels for
the classes), ``*_arrays`` reads everything for preparation (images: ``data_images``).

Both return the splits the files hold, by name; ``data_files`` carves what is missing and
runs the content checks (``data_checks``). Heavy libraries (pandas, pyarrow, Pillow) are
imported inside the functions that need them.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from dataclasses import dataclass, field

import numpy as np

from batchscale.core.errors import SpecError
from batchscale.core.names import DATA_SPLITS
from batchscale.store.npz_files import read_npz
from batchscale.workloads.data_checks import (
    check_inputs_form,
    check_targets_form,
    class_names,
    refuse,
)
from batchscale.workloads.data_sources import Source, open_source

NPZ_KEYS = tuple(f"{part}_{split}" for split in DATA_SPLITS for part in ("x", "y"))
NPZ_ALLOWED = "x_train, y_train and optionally x_validation, y_validation, x_test, y_test"


@dataclass
class Facts:
    """What the files hold, by split (``counts``: only the splits the files have)."""

    counts: dict[str, int]
    input_shape: tuple
    input_dtype: np.dtype
    target_shape: tuple = ()  # one example's targets: () labels, (k,) outputs or classes
    classes: list | None = None  # classification: the class names
    vocabulary: int | None = None  # language_model: largest training token id + 1


@dataclass
class Loaded:
    """Every split the files hold as (inputs, raw targets), and the source's checksum."""

    splits: dict[str, tuple]
    sha256: str
    classes: list | None = None  # images: the class folders (targets are already indices)
    files: int = 1
    notes: dict = field(default_factory=dict)


def one_line(err: BaseException) -> str:
    return " ".join(str(err).split())[:200] or type(err).__name__


# ---- npz --------------------------------------------------------------------------------
def npz_facts(source: Source, task: str) -> Facts:
    with source.open() as f:
        try:
            archive = zipfile.ZipFile(f)
            headers = {_npz_key(name): _npy_header(archive, name) for name in archive.namelist()}
            _check_npz_keys(source.url, set(headers), task)
            first = "x_train" if task == "language_model" else "y_train"
            read = (np.lib.format.read_array(archive.open(first + ".npy"), allow_pickle=False)
                    if task in ("classification", "language_model") else None)
        except SpecError:
            raise
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, KeyError) as err:
            refuse(source.url, f"is not a readable .npz archive ({one_line(err)})",
                   f"an .npz file written by numpy.savez holding {NPZ_ALLOWED}")
    counts = {}
    for split in DATA_SPLITS:
        if f"x_{split}" in headers:
            shape, dtype = headers[f"x_{split}"]
            check_inputs_form(source.url, f"x_{split}", shape, dtype, task)
            counts[split] = shape[0]
            if task != "language_model":
                check_targets_form(source.url, f"y_{split}", *headers[f"y_{split}"], shape[0],
                                   f"x_{split}", task)
    shape, dtype = headers["x_train"]
    facts = Facts(counts, tuple(shape[1:]), np.dtype(dtype))
    if task == "language_model":
        facts.input_shape, facts.vocabulary = (shape[1] - 1,), int(read.max()) + 1
    else:
        facts.target_shape = tuple(headers["y_train"][0][1:])
    if task == "classification":
        facts.classes = class_names(source.url, "y_train", read)
    return facts


def npz_arrays(source: Source, task: str) -> Loaded:
    data = source.read()
    try:
        members = read_npz(data)
    except ValueError as err:
        if "allow_pickle" in str(err):
            refuse(source.url, "holds an object array (ragged rows of different shapes, or "
                   "Python objects)", "numeric arrays of one shape each")
        refuse(source.url, f"is not a readable .npz archive ({one_line(err)})", NPZ_ALLOWED)
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        refuse(source.url, f"is not a readable .npz archive ({one_line(err)})",
               f"an .npz file written by numpy.savez holding {NPZ_ALLOWED}")
    _check_npz_keys(source.url, set(members), task)
    splits = {split: (members[f"x_{split}"], members.get(f"y_{split}"))
              for split in DATA_SPLITS if f"x_{split}" in members}
    return Loaded(splits, hashlib.sha256(data).hexdigest())


def _npz_key(member: str) -> str:
    return member[:-4] if member.endswith(".npy") else member


def _npy_header(archive: zipfile.ZipFile, member: str) -> tuple[tuple, np.dtype]:
    from numpy.lib import format as npy

    with archive.open(member) as f:
        version = npy.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = npy.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, _, dtype = npy.read_array_header_2_0(f)
        else:
            shape, _, dtype = npy._read_array_header(f, version)  # 3.0: utf-8 field names
    return tuple(shape), dtype


def _check_npz_keys(where: str, keys: set, task: str) -> None:
    unknown = sorted(keys - set(NPZ_KEYS))
    if unknown:
        refuse(where, f"holds {', '.join(map(repr, unknown))}", NPZ_ALLOWED)
    if task == "language_model":
        targets = sorted(k for k in keys if k.startswith("y_"))
        if targets or "x_train" not in keys:
            refuse(where, f"holds {', '.join(sorted(keys))}", "token ids x_train and optionally "
                   "x_validation, x_test (language-model targets are the next tokens: no y_)")
        return
    for split in DATA_SPLITS:
        pair = {f"x_{split}", f"y_{split}"}
        if split == "train" and not pair <= keys:
            refuse(where, f"has no {' or '.join(sorted(pair - keys))}", NPZ_ALLOWED)
        if len(pair & keys) == 1:
            refuse(where, f"has {(pair & keys).pop()} without {(pair - keys).pop()}", NPZ_ALLOWED)


# ---- parquet and csv: one table, a label column and numeric features ---------------------
def table_facts(source: Source, fmt: str, label: str, task: str) -> Facts:
    if fmt == "csv":
        return _table_facts(source.url, _read_table(source, fmt, source.read()), label, task)
    import pyarrow as pa
    import pyarrow.parquet as pq

    with source.open() as f:
        try:
            table = pq.ParquetFile(f)
            schema, rows = table.schema_arrow, table.metadata.num_rows
            dtypes = {name: _arrow_dtype(schema.field(name).type) for name in schema.names}
            _check_columns(source.url, dtypes, label)
            labels = table.read(columns=[label]).column(label).to_numpy(zero_copy_only=False)
        except SpecError:
            raise
        except (pa.ArrowException, OSError, ValueError) as err:
            refuse(source.url, f"is not a readable Parquet file ({one_line(err)})",
                   "a Parquet file with a label column and numeric feature columns")
    return _facts_of_columns(source.url, dtypes, rows, label, labels, task)


def table_arrays(source: Source, fmt: str, label: str, task: str) -> Loaded:
    data = source.read()
    frame = _read_table(source, fmt, data)
    _check_columns(source.url, {c: frame[c].dtype for c in frame.columns}, label)
    features = [c for c in frame.columns if c != label]
    x = frame[features].to_numpy(dtype=np.float64)  # booleans as 0/1
    return Loaded({"train": (x, frame[label].to_numpy())}, hashlib.sha256(data).hexdigest())


def _table_facts(where: str, frame, label: str, task: str) -> Facts:
    dtypes = {c: frame[c].dtype for c in frame.columns}
    _check_columns(where, dtypes, label)
    return _facts_of_columns(where, dtypes, len(frame), label, frame[label].to_numpy(), task)


def _facts_of_columns(where: str, dtypes: dict, rows: int, label: str, labels, task: str) -> Facts:
    features = len(dtypes) - 1
    check_inputs_form(where, "the features", (rows, features), np.float32, task)
    check_targets_form(where, f"column {label!r}", np.shape(labels), np.asarray(labels).dtype,
                       rows, "the table", task)
    facts = Facts({"train": rows}, (features,), np.dtype(np.float32))
    if task == "classification":
        facts.classes = class_names(where, f"column {label!r}", labels)
    return facts


def _read_table(source: Source, fmt: str, data: bytes):
    import pandas as pd

    try:
        if fmt == "csv":
            return pd.read_csv(io.BytesIO(data))
        return pd.read_parquet(io.BytesIO(data))
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError,
            pd.errors.EmptyDataError) as err:
        refuse(source.url, f"is not a readable {fmt.upper()} file ({one_line(err)})",
               f"a {fmt.upper()} table with a header, a label column and numeric feature columns")


def _arrow_dtype(arrow_type) -> np.dtype:
    try:
        return np.dtype(arrow_type.to_pandas_dtype())
    except (NotImplementedError, TypeError):
        return np.dtype(object)


def _check_columns(where: str, dtypes: dict, label: str) -> None:
    if label not in dtypes:
        refuse(where, f"has no label column {label!r} (columns: {', '.join(map(str, dtypes))})",
               "the label column's name in workload.dataset.label (default 'label')")
    for name, dtype in dtypes.items():
        if name != label and getattr(dtype, "kind", "O") not in "biuf":  # pandas' str: "O"
            refuse(where, f"feature column {name!r} is not numeric ({dtype})",
                   "numeric feature columns (encode categories as numbers first)")


def open_files(path: str, fmt: str) -> Source:
    return open_source(path, folder=fmt == "images")
