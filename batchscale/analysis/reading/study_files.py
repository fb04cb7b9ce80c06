"""Finding and reading a study's files, without believing damaged ones (the study reader's
file side: ``study_reader.load_study`` turns what is read here into tables).

A file that is missing where it must be, unreadable, not what its kind must hold, or not
what was written (a finished trial's metadata.json records its measurements.csv's rows and
SHA-256, ``batchscale.store.layout.measurements_record``) never turns into a number: what
depends on it is left out of the analysis and a ``Damage`` names the file, says what is
wrong and what was left out. Files without a record (the paper's released data, studies
written before the record) are checked for what a whole file looks like
(``layout.measurements_problem``): a cut inside the last number of such a file cannot be
told from a whole one, which is what the record is for. A trial's files are checked by the
store's one integrity check (``batchscale.store.trial_files``), the same the round planner
applies, so the report and the planner never disagree about which trials count.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from batchscale.core.spec import SpecError, StudySpec
from batchscale.core.step_time_bounds import TIMING_KEYS, trial_timing_problem
from batchscale.store.checkpoints import CHECKPOINTS_DIR
from batchscale.store.event_files import TENSORBOARD_DIR
from batchscale.store.filesystem import Storage
from batchscale.store.json_files import read_json_object
from batchscale.store.leases import LEASES_DIR
from batchscale.store.profiles import check_step_times
from batchscale.store.trial_files import TrialDamage, check_trial
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


def read_trial(fs: Storage, base: str, present: set[str], batch_size: int,
               trial_id: int) -> tuple[dict, pd.DataFrame | None] | Damage | None:
    """Trial folder ``base``'s metadata and measurements (None: not started, no files);
    a ``Damage`` when its files cannot be believed, by the store's one integrity check
    (``batchscale.store.trial_files.check_trial``, which the round planner applies too).
    ``present``: the files that exist (paths as ``base``), listed once for the whole
    workload."""
    read = check_trial(fs, base, present, batch_size, trial_id)
    if isinstance(read, TrialDamage):
        return Damage(fs.url(read.path), read.problem, f"trial {batch_size}/{trial_id} left out",
                      batch_size, trial_id)
    return read


def believed_timing(fs: Storage, base: str, trial: dict, batch_size: int, trial_id: int,
                     damaged: list[Damage]) -> dict:
    """``trial``'s metadata, without its timings (``TIMING_KEYS``) when they are outside the
    physical bounds of a step time (``core.step_time_bounds``): the file is named in
    ``damaged``, and only its timing is left out (its measurements still count)."""
    problem = trial_timing_problem(trial, batch_size)
    if problem is None:
        return trial
    damaged.append(Damage(fs.url(f"{base}/metadata.json"), problem,
                          f"trial {batch_size}/{trial_id}'s timing left out of the step-time "
                          "profile (time and cost to result); its measurements still count"))
    return {k: v for k, v in trial.items() if k not in TIMING_KEYS}


def read_probes(fs: Storage, damaged: list[Damage]) -> list[dict]:
    """Our study's step-time probe records that can be believed (``fs``: the study's
    folder); each file that cannot is named in ``damaged``."""
    records, rejected = check_step_times(fs, "")
    for path, problem in rejected:
        damaged.append(Damage(fs.url(path), problem, "left out of the step-time profile (time "
                              "and cost to result); the next probe of its key replaces it"))
    return records


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
