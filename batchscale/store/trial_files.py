"""The one integrity check of a trial's files: whether its metadata.json and
measurements.csv can be believed, for every reader that turns them into a number (the
study reader behind the report, ``batchscale.analysis.reading.study_files``, and the
round planner, ``batchscale.rounds.planner``), so the two can never disagree about which
trials count.

A trial folder's files are believed only when they are what was written (docs/store.md,
"Damaged files"):

- ``metadata.json`` is a UTF-8 JSON object with a known status, a parameters object and
  an integer trial id, naming the trial whose folder it sits in (not a copy of another
  trial's); a missing one beside a ``measurements.csv`` is damage (the trainers write
  metadata first);
- a finished trial's metadata records its measurements (``layout.measurements_record``:
  rows and SHA-256 of the exact bytes), and the ``measurements.csv`` beside it must be
  those bytes; a malformed record, or a missing file where a record or a finished status
  says there is one, is damage;
- a ``measurements.csv`` without a record (the paper's data, older studies, trials still
  running) must look like a whole file (``layout.measurements_problem``).

``check_trial`` says what it found: the trial's metadata and measurements, nothing
(not started), or a ``TrialDamage`` naming the file and what is wrong with it; each
reader words what it leaves out because of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from batchscale.core.names import DONE_STATUSES, STATUSES
from batchscale.store.json_files import read_json_object
from batchscale.store.layout import (
    is_measurements_record,
    measurements_mismatch,
    measurements_problem,
    parse_measurements,
)
from batchscale.store.storage_api import Storage

METADATA, MEASUREMENTS = "metadata.json", "measurements.csv"


@dataclass(frozen=True)
class TrialDamage:
    """A trial file that cannot be believed: ``path`` (relative to the storage root, as
    the caller gave the trial folder) and ``problem`` (what is wrong, e.g. "is missing")."""

    path: str
    problem: str


def metadata_problem(metadata: dict) -> str | None:
    """What makes a parsed metadata.json unusable (a status, trial id or parameters that
    are not what the paper's layout holds), or None."""
    status = metadata.get("status", "INCOMPLETE")
    if status not in STATUSES:
        return f"has status {str(status)[:40]!r}, not one of {', '.join(STATUSES)}"
    if not isinstance(metadata.get("parameters") or {}, dict):
        return "has parameters that are not a JSON object"
    try:
        int(metadata.get("trial_id", 0))
    except (TypeError, ValueError):
        return f"has trial_id {str(metadata.get('trial_id'))[:40]!r}, not an integer"
    return None


def elsewhere(metadata: dict, batch_size: int | None, trial_id: int | None) -> str | None:
    """A metadata.json that names another trial than the folder it sits in (a trial's
    folder copied to another id): two rows would claim one trial. None when it agrees
    (or names none, as the paper's files may not, or the folder's trial is not given)."""
    for key, folder in (("trial_id", trial_id), ("batch_size", batch_size)):
        if folder is None:
            continue
        try:
            named = int(metadata.get(key, folder))
        except (TypeError, ValueError):
            return f"has {key} {str(metadata.get(key))[:40]!r}, not an integer"
        if named != folder:
            return (f"has {key} {named} but sits in the folder of {key} {folder} "
                    "(copied from another trial?)")
    return None


def check_trial(fs: Storage, base: str, present: set[str] | None = None,
                batch_size: int | None = None, trial_id: int | None = None):
    """Trial folder ``base``'s files, checked: ``(metadata, measurements)`` (a pandas
    DataFrame from ``layout.parse_measurements``, or None when the trial has not been
    evaluated yet), None when the trial has not started (no files), or a ``TrialDamage``.
    ``present``: the files that exist (paths as ``base``), when the caller listed them
    already (the study reader lists a whole workload at once); else the folder is listed.
    ``batch_size``, ``trial_id``: the trial the folder is of; a metadata.json that names
    another is damage (``elsewhere``)."""
    meta_path, csv_path = f"{base}/{METADATA}", f"{base}/{MEASUREMENTS}"
    if present is None:
        present = {f"{base}/{name}" for name in fs.list_files(base)}
    if meta_path not in present:
        if csv_path in present:  # the trainers write metadata.json first
            return TrialDamage(meta_path, "is missing (its measurements.csv is there)")
        return None
    metadata, problem = read_json_object(fs, meta_path)
    problem = problem or metadata_problem(metadata) or elsewhere(metadata, batch_size, trial_id)
    if problem:
        return TrialDamage(meta_path, problem)
    record = metadata.get("measurements")
    if record is not None and not is_measurements_record(record):
        return TrialDamage(meta_path, "has a malformed measurements record (want rows and sha256)")
    if csv_path not in present:
        if record is not None or metadata.get("status", "INCOMPLETE") in DONE_STATUSES:
            return TrialDamage(csv_path, f"is missing (the trial is {metadata.get('status')})")
        return metadata, None  # started, not evaluated yet
    try:
        data = fs.read_bytes(csv_path)
    except FileNotFoundError:
        return TrialDamage(csv_path, "is missing (removed while being read)")
    except (PermissionError, IsADirectoryError) as err:
        return TrialDamage(csv_path, f"could not be read ({err.strerror or err})")
    problem = measurements_mismatch(data, record) if record is not None else None
    if problem:
        return TrialDamage(csv_path, problem)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return TrialDamage(csv_path, "is not UTF-8 text")
    problem = measurements_problem(text) if record is None else None
    if problem:
        return TrialDamage(csv_path, problem)
    return metadata, parse_measurements(text)


def recorded_rows(fs: Storage, folder: str, batch_size: int,
                  trial_id: int) -> tuple[list[dict] | None, str | None]:
    """Finished trial ``batch_size``/``trial_id``'s measurement rows from ``folder``, only if
    its files pass ``check_trial`` (the report's and the planner's check, the folder's
    metadata.json naming this trial included); else None and why not, in words that follow
    "its measurements.csv": what the race's crossing check and the planner's reading of a
    budget raised since believe."""
    read = check_trial(fs, folder, batch_size=batch_size, trial_id=trial_id)
    if isinstance(read, TrialDamage):
        if read.path.endswith(f"/{METADATA}"):
            return None, f"cannot be believed: its {METADATA} {read.problem}"
        return None, read.problem
    if read is None or read[1] is None:
        return None, "is missing"
    return read[1].to_dict("records"), None
