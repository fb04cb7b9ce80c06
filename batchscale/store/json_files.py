"""Reading a JSON object from the store without believing a damaged file: the one way the
store (a trial's metadata.json, a batch size's study.json, study_spec.json) and the study
reader read one."""

from __future__ import annotations

import json

from batchscale.store.storage_api import Storage


def read_json_object(fs: Storage, path: str) -> tuple[dict | None, str | None]:
    """The JSON object in ``path``, or None and why not: missing, empty, unreadable, not
    UTF-8 JSON, or JSON that is not an object (``[1, 2]``)."""
    try:
        data = fs.read_bytes(path)
    except (FileNotFoundError, NotADirectoryError):  # or a file where a folder should be
        return None, "is missing"
    except (PermissionError, IsADirectoryError) as err:  # a local file; network errors raise
        return None, f"could not be read ({err.strerror or err})"
    if not data.strip():
        return None, "is empty"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, "is not UTF-8 text (binary or garbled bytes), so not JSON"
    try:
        value = json.loads(text)
    except ValueError as err:
        return None, f"is not valid JSON ({short_error(err)})"
    if not isinstance(value, dict):
        return None, f"holds a JSON {type(value).__name__}, not an object"
    return value, None


def short_error(err: Exception) -> str:
    return str(err).split("\n")[0][:120]
