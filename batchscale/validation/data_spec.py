"""The ``workload.dataset`` mapping of a user's own data: ``{path, format[, label,
validation_fraction]}``, checked for its shape only (no file is read here: the data's
content is checked by ``batchscale.workloads.data_files`` before anything is written:
``describe`` at validation, ``check_files`` in ``training.workload_check``)."""

from __future__ import annotations

from batchscale.core.names import DATA_FORMATS
from batchscale.core.spec import DataFiles
from batchscale.core.spec import as_number as _number
from batchscale.core.spec import fail_field as _fail

DATA_KEYS = ("path", "format", "label", "validation_fraction")


def parse_data_files(raw: dict, seed: int) -> DataFiles:
    """``workload.dataset`` as files; ``seed`` (the study's) shuffles a carved validation split."""
    extra = sorted(map(str, set(raw) - set(DATA_KEYS)))
    if extra:
        _fail(f"workload.dataset.{extra[0]}", f"unknown key; allowed: {', '.join(DATA_KEYS)}")
    path = raw.get("path")
    if not isinstance(path, str) or not path.strip():
        _fail("workload.dataset.path", f"{path!r} is not a path; allowed: a local file or folder, "
              "or a gs://bucket/... URL")
    fmt = raw.get("format")
    if fmt not in DATA_FORMATS:
        _fail("workload.dataset.format", f"{fmt!r} is not a data format; allowed: {', '.join(DATA_FORMATS)}")
    label = raw.get("label", "label")
    if not isinstance(label, str) or not label:
        _fail("workload.dataset.label", f"{label!r} is not a column name; allowed: the name of the "
              "label column (parquet, csv)")
    fraction = _number("workload.dataset.validation_fraction", raw.get("validation_fraction", 0.1))
    if not 0 < fraction < 1:
        _fail("workload.dataset.validation_fraction", f"{fraction} is out of range; allowed: a number "
              "in (0, 1), the share of training examples carved off for validation")
    return DataFiles(path.strip(), fmt, label, float(fraction), int(seed))
