"""Readers of a user's data files, one pair per format: ``*_facts`` reads only what
validation needs (an npz member's header, a Parquet footer, one image's header, plus the
training labels for the classes), ``*_arrays`` reads everything for preparation.

Both return the splits the files hold, by name; ``data_files`` carves what is missing and
runs the content checks (``data_checks``). Heavy libraries (pandas, pyarrow, Pillow) are
imported inside the functions that need them.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from batchscale.core.errors import SpecError
from batchscale.core.names import DATA_SPLITS
from batchscale.store.npz_files import read_npz
from batchscale.workloads.data_checks import (
    check_inputs_form,
    check_same_size,
    check_targets_form,
    class_names,
    refuse,
)
from batchscale.workloads.data_sources import Source, folder_digest, open_source

NPZ_KEYS = tuple(f"{part}_{split}" for split in DATA_SPLITS for part in ("x", "y"))
NPZ_ALLOWED = "x_train, y_train and optionally x_validation, y_validation, x_test, y_test"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm")
GRAY_MODES = ("1", "L", "LA", "I", "I;16", "F")  # a first image in these: 1 channel, else RGB


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


def _one_line(err: BaseException) -> str:
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
            refuse(source.url, f"is not a readable .npz archive ({_one_line(err)})",
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
        refuse(source.url, f"is not a readable .npz archive ({_one_line(err)})", NPZ_ALLOWED)
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        refuse(source.url, f"is not a readable .npz archive ({_one_line(err)})",
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
            refuse(source.url, f"is not a readable Parquet file ({_one_line(err)})",
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
        refuse(source.url, f"is not a readable {fmt.upper()} file ({_one_line(err)})",
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


# ---- images: one subfolder per class ------------------------------------------------------
def image_listing(source: Source) -> dict[str, list[str]]:
    """``{class: [relative image paths]}``: the folder's non-hidden subfolders, sorted."""
    fs = source.fs
    stray = [f for f in fs.list_files("") if not f.startswith(".")]
    if stray:
        refuse(source.url, f"holds the file {stray[0]!r} beside the class folders",
               "only one subfolder per class at the top")
    classes = [d for d in fs.list_dirs("") if not d.startswith(".")]
    if len(classes) < 2:
        refuse(source.url, f"has {len(classes)} class folder(s)", "a folder with one subfolder "
               "per class, at least two")
    listing = {}
    for name in classes:
        files = [f"{name}/{f}" for f in fs.list_files(name, recursive=True)
                 if not any(part.startswith(".") for part in f.split("/"))]
        if not files:
            refuse(source.url, f"class folder {name!r} holds no images", "at least one image per class")
        odd = [f for f in files if not f.lower().endswith(IMAGE_SUFFIXES)]
        if odd:
            refuse(source.url, f"{odd[0]} is not an image file", f"images ({', '.join(IMAGE_SUFFIXES)})")
        listing[name] = files
    return listing


def image_facts(source: Source, listing: dict | None = None) -> Facts:
    listing = listing or image_listing(source)
    first = next(iter(listing.values()))[0]
    with source.open(first) as f:
        size, mode = _open_image(source.url, first, f, header_only=True)
    channels = 1 if mode in GRAY_MODES else 3
    counts = {"train": sum(map(len, listing.values()))}
    return Facts(counts, (size[1], size[0], channels), np.dtype(np.uint8), (), list(listing))


def image_arrays(source: Source, threads: int = 8) -> Loaded:
    listing = image_listing(source)
    paths = [path for files in listing.values() for path in files]
    labels = np.concatenate([np.full(len(files), i, np.int64)
                             for i, files in enumerate(listing.values())])
    facts = image_facts(source, listing)
    height, width, channels = facts.input_shape
    images = np.empty((len(paths), height, width, channels), np.uint8)
    digests: dict[str, str] = {}

    def decode(index: int) -> None:
        path = paths[index]
        data = source.read(path)
        digests[path] = hashlib.sha256(data).hexdigest()
        image = _open_image(source.url, path, io.BytesIO(data), header_only=False)
        check_same_size(source.url, path, image.size, paths[0], (width, height))
        pixels = np.asarray(image.convert("L" if channels == 1 else "RGB"))
        images[index] = pixels.reshape(height, width, channels)

    with ThreadPoolExecutor(threads) as pool:  # Pillow decodes with the GIL released
        list(pool.map(decode, range(len(paths))))
    return Loaded({"train": (images, labels)}, folder_digest(digests), list(listing), len(paths))


def _open_image(where: str, path: str, f, header_only: bool):
    from PIL import Image, UnidentifiedImageError

    try:
        image = Image.open(f)
        if header_only:
            return image.size, image.mode
        image.load()
        return image
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
        why = "not a format Pillow knows" if isinstance(err, UnidentifiedImageError) else _one_line(err)
        refuse(where, f"{path} is not an image Pillow can read ({why})",
               f"images ({', '.join(IMAGE_SUFFIXES)})")


def open_files(path: str, fmt: str) -> Source:
    return open_source(path, folder=fmt == "images")
