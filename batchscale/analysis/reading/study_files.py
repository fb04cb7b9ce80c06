"""Finding and reading a study's files, without believing damaged ones (the study reader's
file side: ``study_reader.load_study`` turns what is read here into tables).

A file that is missing where it must be, unreadable, not what its kind must hold, or not
what was written (a finished trial's metadata.json records its measurements.csv's rows and
SHA-256, ``batchscale.store.layout.measurements_record``) never turns into a number: what
depends on it is left out of the analysis and a ``Damage`` names the file, says what is
wrong and what was left out. Files without a record (the paper's released data, studies
written before the record) are checked for what a whole file looks like
(``layout.measurements_problem``): a cut inside the last number of such a file cannot be
told from a whole one, which is what the record is for.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from batchscale.core.names import DONE_STATUSES, STATUSES
from batchscale.core.spec import SpecError, StudySpec
from batchscale.store.checkpoints import CHECKPOINTS_DIR
from batchscale.store.event_files import TENSORBOARD_DIR
from batchscale.store.filesystem import Storage
from batchscale.store.json_files import read_json_object
from batchscale.store.layout import (
    is_measurements_record,
    measurements_mismatch,
    measurements_problem,
    parse_measurements,
)
from batchscale.store.leases import LEASES_DIR
from batchscale.validation import parse_spec

MAX_WORKLOAD_DEPTH = 5  # how far below a location to look for batch-size folders
# A study's own folders beside its workload: never a data set's (report/: aggregate's output;
# checkpoints/<batch_size>/<trial_id>.npz: unfinished trials' checkpoints; tensorboard/: live curves).
NOT_DATA = ("report", CHECKPOINTS_DIR, LEASES_DIR, TENSORBOARD_DIR)

REMEDY = ("to restore a trial, delete its folder and run the same study again (it is trained "
          "anew with the same seed); a missing study.json is written again by the same run")


@dataclass(frozen=True)
class Damage:
    """One file the study reader could not use. ``file``: its URL; ``problem``: what is
    wrong with it; ``left_out``: what the analysis left out because of it; ``batch_size``
    and ``trial_id``: which trial or batch size (None: the whole study / batch size)."""

    file: str
    problem: str
    left_out: str
    batch_size: int | None = None
    trial_id: int | None = None

    @property
    def message(self) -> str:
        return f"{self.file} {self.problem}; {self.left_out}"

    def to_dict(self) -> dict:
        return {**asdict(self), "message": self.message}


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


def read_trial(fs: Storage, base: str, present: set[str], batch_size: int,
               trial_id: int) -> tuple[dict, pd.DataFrame | None] | Damage | None:
    """Trial folder ``base``'s metadata and measurements (None: not started, no files);
    a ``Damage`` when its files cannot be believed. ``present``: the files that exist
    (paths as ``base``), listed once for the whole workload."""
    meta_path, csv_path = f"{base}/metadata.json", f"{base}/measurements.csv"

    def damage(path: str, problem: str) -> Damage:
        return Damage(fs.url(path), problem, f"trial {batch_size}/{trial_id} left out",
                      batch_size, trial_id)

    if meta_path not in present:
        if csv_path in present:  # the trainers write metadata.json first
            return damage(meta_path, "is missing (its measurements.csv is there)")
        return None
    metadata, problem = read_json_object(fs, meta_path)
    problem = problem or metadata_problem(metadata) or _elsewhere(metadata, batch_size, trial_id)
    if problem:
        return damage(meta_path, problem)
    record = metadata.get("measurements")
    if record is not None and not is_measurements_record(record):
        return damage(meta_path, "has a malformed measurements record (want rows and sha256)")
    if csv_path not in present:
        if record is not None or metadata.get("status", "INCOMPLETE") in DONE_STATUSES:
            return damage(csv_path, f"is missing (the trial is {metadata.get('status')})")
        return metadata, None  # started, not evaluated yet
    try:
        data = fs.read_bytes(csv_path)
    except FileNotFoundError:
        return damage(csv_path, "is missing (removed while being read)")
    except (PermissionError, IsADirectoryError) as err:
        return damage(csv_path, f"could not be read ({err.strerror or err})")
    problem = measurements_mismatch(data, record) if record is not None else None
    if problem:
        return damage(csv_path, problem)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return damage(csv_path, "is not UTF-8 text")
    problem = measurements_problem(text) if record is None else None
    if problem:
        return damage(csv_path, problem)
    return metadata, parse_measurements(text)


def _elsewhere(metadata: dict, batch_size: int, trial_id: int) -> str | None:
    """A metadata.json that names another trial than the folder it sits in (a trial's
    folder copied to another id): two rows would claim one trial. None when it agrees
    (or names none, as the paper's files may not)."""
    for key, folder in (("trial_id", trial_id), ("batch_size", batch_size)):
        try:
            named = int(metadata.get(key, folder))
        except (TypeError, ValueError):
            return f"has {key} {str(metadata.get(key))[:40]!r}, not an integer"
        if named != folder:
            return (f"has {key} {named} but sits in the folder of {key} {folder} "
                    "(copied from another trial?)")
    return None


def damaged_trials(damaged: list[Damage]) -> set[tuple[int, int | None]]:
    """(batch size, trial id) of each left-out trial, (batch size, None) for a left-out
    batch size: what the completeness check must not read again."""
    return {(d.batch_size, d.trial_id) for d in damaged if d.batch_size is not None}


def damaged_line(damaged: list[Damage]) -> str:
    """One sentence: how many files could not be read and what that means for the numbers."""
    files, verb = ("file", "does") if len(damaged) == 1 else ("files", "do")
    return (f"{len(damaged)} {files} of the study could not be read or {verb} not match what "
            "was written; what depends on them is left out, so the numbers below may differ "
            "from the study's.")


def _store_of(location: str) -> str:
    """The folder holding ``location`` (an absolute path or gs:// URL): the study's store."""
    return location.rpartition("/")[0] or "/"


def read_spec(fs: Storage, location: str, damaged: list[Damage]) -> StudySpec | None:
    """The study's spec, or None: the paper's layout (no study_spec.json), or a damaged
    one (noted in ``damaged``; the study is then read as the paper's layout)."""
    if not fs.exists("study_spec.json"):
        return None
    raw, problem = read_json_object(fs, "study_spec.json")
    if raw is not None:
        try:  # parsed once, with the store it was read from (a copied store keeps its old root)
            return parse_spec({**raw, "store": _store_of(location)})
        except SpecError as err:
            problem = f"is not a valid study spec ({err})"
            if _prepared_files_known(raw, _store_of(location)):  # the user's files moved or gone
                try:
                    return parse_spec({**raw, "store": _store_of(location)})
                except SpecError:
                    pass
    damaged.append(Damage(fs.url("study_spec.json"), problem, "read as the paper's layout: "
                          "goals from study.json, no check of the trials the study expects"))
    return None


def _prepared_files_known(raw: dict, store: str) -> bool:
    """Whether the spec's own data files (``workload.dataset: {path, ...}``) are prepared in
    ``store``: then their facts are taken from its record (``data_files.remember_prepared``),
    so a finished study reads without its files, which may since have moved or gone."""
    workload = raw.get("workload")
    if not isinstance(workload, dict) or not isinstance(workload.get("dataset"), dict):
        return False
    from batchscale.store.layout import StudyStore
    from batchscale.validation.data_spec import parse_data_files
    from batchscale.workloads.data_files import remember_prepared

    try:
        files = parse_data_files(workload["dataset"], int(raw.get("seed", 0)))
        record = StudyStore(store).read_dataset_info(files.name)
        remember_prepared(files, str(workload.get("task", "classification")), record)
    except (SpecError, OSError, ValueError, KeyError, TypeError):
        return False
    return True


def _is_batch_dir(fs: Storage, path: str) -> bool:
    name = path.rpartition("/")[2]
    return name.isdigit() and fs.exists(f"{path}/study.json")


def join(base: str, name: str) -> str:
    return f"{base}/{name}" if base else name


def find_workload(fs: Storage, location: str) -> str:
    """The one folder (relative to ``location``) whose children are batch-size folders."""
    found, frontier = [], [""]
    for _ in range(MAX_WORKLOAD_DEPTH + 1):
        nxt = []
        for path in frontier:
            children = [join(path, d) for d in fs.list_dirs(path) if d not in NOT_DATA]
            if any(_is_batch_dir(fs, c) for c in children if c.rpartition("/")[2].isdigit()):
                found.append(path)
            else:
                nxt += children
        frontier = nxt
    if len(found) == 1:
        return found[0]
    if not found and not fs.list_dirs("") and not fs.list_files(""):
        raise SpecError(f"study: {location} is empty or does not exist; give STORE/STUDY "
                        "(e.g. ./batchscale-store/quickstart) or a folder of the paper's layout")
    if not found:
        raise SpecError(f"study: {location} holds no study (no <batch_size>/study.json within "
                        f"{MAX_WORKLOAD_DEPTH} folders, and no study_spec.json)")
    shown = ", ".join(f"{location}/{f}" for f in found[:8])
    more = f" and {len(found) - 8} more" if len(found) > 8 else ""
    raise SpecError(f"study: {location} holds {len(found)} workloads; name one: {shown}{more}")


def list_workload(fs: Storage, workload: str) -> dict[int, dict[str, set[str]]]:
    """batch size -> trial folder ("" for the batch-size folder itself) -> its file names,
    from one listing of the workload (one request on gs://, however many trials)."""
    out: dict[int, dict[str, set[str]]] = {}
    for path in fs.list_files(workload, recursive=True):
        parts = path.split("/")
        if parts[0].isdigit() and len(parts) in (2, 3) and (len(parts) == 2 or parts[1].isdigit()):
            folder = out.setdefault(int(parts[0]), {})
            folder.setdefault("" if len(parts) == 2 else parts[1], set()).add(parts[-1])
    return out
