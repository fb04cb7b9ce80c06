"""The study store: durable, resumable results in the paper's released-database layout.

```
<root>/<study>/study_spec.json                       our StudySpec (what the study is)
<root>/<study>/<dataset>/<model>/<optimizer>/<batch_size>/study.json
<root>/<study>/.../<batch_size>/<trial_id>/metadata.json + measurements.csv
<root>/<study>/report/                               aggregate's outputs
<root>/<study>/checkpoints/<batch_size>/<trial_id>.npz   unfinished trials' checkpoints
                                                     (batchscale.store.checkpoints)
<root>/datasets/<name>/<split>.npz + info.json       prepared splits (shared by studies)
<root>/datasets/<name>/<split>/shard-NNNNN.npz        or streamed shards (large data sets)
```
``<root>`` is a local folder or gs://bucket/prefix (see ``batchscale.store.filesystem``). The
per-batch-size part below ``<study>/`` is exactly the paper's layout, so one reader
(``batchscale.analysis.reading.study_reader.load_study``) reads our studies and the paper's released
data alike. ``StudyStore`` only reads and writes what one trial or one data set needs (the
trainer, the progress lines); ``measurements.csv`` is written and parsed here, once.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json

import numpy as np

from batchscale.core.rounds import ROUNDS_KEY, SearchRound, initial_round, read_rounds, searched_configs
from batchscale.core.spec import StudySpec, TrialSpec
from batchscale.core.trial_state import is_finished
from batchscale.store.compatibility import STUDY_SPEC_KEY, check_same_study, stored_spec_dict
from batchscale.store.filesystem import Storage, open_root
from batchscale.store.json_files import read_json_object
from batchscale.store.npz_files import read_npz


class StudyStore:
    """Reads and writes one store root; every path it builds stays under that root."""

    def __init__(self, root: str):
        self.root = root
        self.fs: Storage = open_root(root)

    # ---- paths --------------------------------------------------------------------
    @staticmethod
    def batch_dir(spec: StudySpec, batch_size: int) -> str:
        return f"{spec.name}/{spec.workload.path}/{batch_size}"

    def trial_dir(self, spec: StudySpec, trial: TrialSpec) -> str:
        return f"{self.batch_dir(spec, trial.batch_size)}/{trial.trial_id}"

    def url(self, path: str = "") -> str:
        return self.fs.url(path) if path else self.fs.root

    # ---- study -------------------------------------------------------------------
    def check_compatible(self, spec: StudySpec) -> None:
        """Refuse to change an existing study of that name other than by growing it, naming
        the field (``batchscale.store.compatibility``); its stored spec is study_spec.json,
        or the copy every batch size's study.json carries."""
        stored = stored_spec_dict(self.fs, spec.name)
        if stored is not None:
            check_same_study(stored, spec, self.root)

    def register_study(self, spec: StudySpec, log=print) -> None:
        """Write study_spec.json and each batch size's study.json (the paper's format, plus a
        copy of the spec). A budget that grows is not claimed in study.json before the
        batch size's trials have run it (``settle_budgets``). Recorded search rounds are
        kept as they are (``rounds.derivation`` checks them), except rounds that cannot be
        parsed: named in one ``log`` line and dropped (the planner plans them again)."""
        self.check_compatible(spec)
        self.fs.write_text(f"{spec.name}/study_spec.json", json.dumps(spec.to_dict(), indent=2))
        for batch_size in spec.batch_sizes:
            study_json = self.read_study_json(spec, batch_size)  # read once: budget, rounds
            claimed, budget = _claimed_budget(study_json), spec.max_steps[batch_size]
            self._write_study_json(spec, batch_size, min(budget, claimed or budget),
                                   self._parsed_rounds(spec, batch_size, study_json, log))

    def settle_budgets(self, spec: StudySpec, trials: list[TrialSpec]) -> list[int]:
        """Raise each batch size's study.json budget to the spec's once every one of its
        ``trials`` has finished under it; returns the batch sizes whose claim was raised."""
        raised = []
        for batch_size in spec.batch_sizes:
            study_json = self.read_study_json(spec, batch_size)
            budget, claimed = spec.max_steps[batch_size], _claimed_budget(study_json)
            if claimed is None or claimed >= budget:
                continue
            ours = [t for t in trials if t.batch_size == batch_size]
            if all(is_finished(self.read_metadata(spec, t), budget) for t in ours):
                self._write_study_json(spec, batch_size, budget,
                                       self._parsed_rounds(spec, batch_size, study_json))
                raised.append(batch_size)
        return raised

    def read_study_json(self, spec: StudySpec, batch_size: int) -> dict | None:
        """The batch size's study.json (None: none, or not a readable JSON object)."""
        return read_json_object(self.fs, f"{self.batch_dir(spec, batch_size)}/study.json")[0]

    def read_rounds(self, spec: StudySpec, batch_size: int) -> list[SearchRound]:
        """The batch size's search rounds as study.json records them
        (``batchscale.core.rounds``): round 1 only until the planner adds more; rounds
        that cannot be parsed count as none after round 1 (see ``register_study``)."""
        return self._parsed_rounds(spec, batch_size, self.read_study_json(spec, batch_size))

    def _parsed_rounds(self, spec: StudySpec, batch_size: int, study_json: dict | None,
                       log=None) -> list[SearchRound]:
        try:
            return read_rounds(study_json, spec)
        except ValueError as err:
            if log is not None:
                log(f"{self.url(self.batch_dir(spec, batch_size))}/study.json: {err}; its search "
                    f"rounds after the first are dropped and planned again from the trials' results")
            return [initial_round(spec)]

    def write_rounds(self, spec: StudySpec, batch_size: int, rounds: list[SearchRound]) -> None:
        """Record the batch size's search rounds (and the hull of their ranges) in its
        study.json, keeping the budget it claims."""
        claimed = _claimed_budget(self.read_study_json(spec, batch_size))
        self._write_study_json(spec, batch_size, claimed or spec.max_steps[batch_size], rounds)

    def _write_study_json(self, spec: StudySpec, batch_size: int, budget: int,
                          rounds: list[SearchRound]) -> None:
        self.fs.write_text(
            f"{self.batch_dir(spec, batch_size)}/study.json",
            json.dumps({**paper_study_json(spec, batch_size, rounds), "max_steps": budget,
                        STUDY_SPEC_KEY: spec.to_dict()}, indent=2),
        )

    def read_model_source(self, study: str) -> dict | None:
        """The record of the user's model code a study trains (``model_source.json``:
        reference, file, sha256), or None before its first pack task wrote it."""
        return read_json_object(self.fs, f"{study}/model_source.json")[0]

    def write_model_source(self, study: str, record: dict) -> None:
        self.fs.write_text(f"{study}/model_source.json", json.dumps(record, indent=2))

    def read_spec_dict(self, study: str) -> dict:
        """The study's stored spec as written (``StudySpec.to_dict``); parse it with
        ``batchscale.validation.parse_spec`` (the store sits below validation)."""
        path = f"{study}/study_spec.json"
        if not self.fs.exists(path):
            raise FileNotFoundError(f"no study {study!r} in {self.root} (missing {path})")
        return json.loads(self.fs.read_text(path))

    # ---- trials ------------------------------------------------------------------
    def read_metadata(self, spec: StudySpec, trial: TrialSpec) -> dict | None:
        """The trial's metadata.json, or None when it has none. A damaged one (not JSON, not
        an object) counts as none: the trial trains again, or resumes from its checkpoint,
        and its next write replaces the damage (the report names such files)."""
        return read_json_object(self.fs, f"{self.trial_dir(spec, trial)}/metadata.json")[0]

    def is_done(self, spec: StudySpec, trial: TrialSpec) -> bool:
        meta = self.read_metadata(spec, trial)
        return is_finished(meta, spec.max_steps[trial.batch_size])

    def write_metadata(self, spec: StudySpec, trial: TrialSpec, metadata: dict) -> None:
        self.fs.write_text(f"{self.trial_dir(spec, trial)}/metadata.json",
                           json.dumps(metadata, indent=2, sort_keys=True))

    def write_measurements(self, spec: StudySpec, trial: TrialSpec, rows: list[dict]) -> dict:
        """Write the trial's measurements.csv; returns its ``measurements_record`` (rows and
        SHA-256 of the very bytes written), which a finished trial's metadata.json keeps so
        that a reader can tell the whole file from a truncated or altered one."""
        data = measurements_csv(rows).encode("utf-8")
        self.fs.write_bytes(f"{self.trial_dir(spec, trial)}/measurements.csv", data)
        return measurements_record(data)

    def read_measurements(self, spec: StudySpec, trial: TrialSpec) -> list[dict]:
        """One trial's rows as ``write_measurements`` takes them (``[]`` before its first),
        as written, unchecked: the rows a pack just wrote (its summary). A reader that
        decides from a finished trial's rows reads them through the one integrity check,
        ``batchscale.store.trial_files.check_trial`` (the report and the round planner)."""
        path = f"{self.trial_dir(spec, trial)}/measurements.csv"
        if not self.fs.exists(path):
            return []
        return parse_measurements(self.fs.read_text(path)).to_dict("records")

    # ---- datasets ----------------------------------------------------------------
    def has_dataset(self, name: str) -> bool:
        return self.fs.exists(f"datasets/{name}/info.json")

    def write_dataset(self, name: str, splits: dict, info: dict) -> None:
        """Write every split, then info.json last: its presence marks a complete cache.
        info.json records each split file's sha256 (``"sha256": {"train.npz": ...}``)."""
        digests = {}
        for split, (images, labels) in splits.items():
            buffer = io.BytesIO()
            np.savez(buffer, x=images, y=labels)
            data = buffer.getvalue()
            digests[f"{split}.npz"] = hashlib.sha256(data).hexdigest()
            self.fs.write_bytes(f"datasets/{name}/{split}.npz", data)
        self.write_dataset_info(name, {**info, "sha256": digests})

    def write_dataset_info(self, name: str, info: dict) -> None:
        self.fs.write_text(f"datasets/{name}/info.json", json.dumps(info, indent=2))

    def read_dataset_info(self, name: str) -> dict:
        return json.loads(self.fs.read_text(f"datasets/{name}/info.json"))

    def read_split(self, name: str, split: str) -> tuple[np.ndarray, np.ndarray]:
        data = read_npz(self.fs.read_bytes(f"datasets/{name}/{split}.npz"))
        return data["x"], data["y"]


def _claimed_budget(study_json: dict | None) -> int | None:
    """The budget a batch size's study.json claims (None: no readable one)."""
    claimed = (study_json or {}).get("max_steps")
    return int(claimed) if isinstance(claimed, (int, float)) else None


def paper_study_json(spec: StudySpec, batch_size: int, rounds: list[SearchRound]) -> dict:
    """study.json as in the paper's database (``parameter_configs``: every range its rounds
    searched), plus our own keys: goals, max_steps, the stopping protocol and the rounds."""
    return {
        "batch_size": batch_size,
        "dataset": spec.workload.dataset,
        "model": spec.workload.model,
        "optimizer": spec.workload.optimizer,
        "early_stopping": spec.protocol.early_stopping,
        "protocol": spec.protocol.name,
        "train_steps": 0,  # every non-diverged trial counts as COMPLETE
        "max_steps": spec.max_steps[batch_size],
        "goals": [g.__dict__ for g in spec.goals],
        "parameter_configs": searched_configs(rounds),
        ROUNDS_KEY: [r.to_dict() for r in rounds],
    }


def measurements_csv(rows: list[dict]) -> str:
    """The paper's measurements.csv: ``step``, then ``<split>/<metric>`` columns, then wall time."""
    buffer = io.StringIO()
    metrics = sorted({k for row in rows for k in row} - {"step", "wall_time"})
    writer = csv.DictWriter(buffer, fieldnames=["step", *metrics, "wall_time"], extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in row.items()})
    return buffer.getvalue()


def parse_measurements(text: str):
    """measurements.csv as a pandas DataFrame: ``step`` (int) and metric columns as written;
    a value that is not a number becomes NaN and a row without a step is dropped."""
    import pandas as pd  # only readers pay for pandas; the trainer writes with csv

    # repr() floats read back exactly: pandas 3's default parser does (checked on 100,000
    # values spanning 1e-8..1e8), pandas 2's needs "round_trip", which pandas 3 deprecates
    exact = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}
    table = pd.read_csv(io.StringIO(text), **exact)
    for column in table.columns:
        table[column] = pd.to_numeric(table[column], errors="coerce")
    table = table.dropna(subset=["step"])
    table["step"] = table["step"].astype("int64")
    return table


def measurements_record(data: bytes) -> dict:
    """What metadata.json records of the measurements.csv beside it (key ``measurements``):
    its data rows and the SHA-256 of its exact bytes. The paper's loader ignores the key."""
    return {"rows": _row_count(data), "sha256": hashlib.sha256(data).hexdigest()}


def is_measurements_record(value) -> bool:
    """Whether ``value`` has the form ``measurements_record`` gives."""
    return (isinstance(value, dict) and isinstance(value.get("sha256"), str)
            and isinstance(value.get("rows"), int) and not isinstance(value.get("rows"), bool))


def measurements_mismatch(data: bytes, record: dict) -> str | None:
    """Why ``data`` is not the measurements.csv that ``record`` describes (None: it is, byte
    for byte). A digest, not a parse: a cut inside the last number still parses."""
    if hashlib.sha256(data).hexdigest() == record["sha256"]:
        return None
    if not data:
        return f"is empty, but metadata.json records {record['rows']} rows"
    return (f"does not match metadata.json's record ({len(data)} bytes and {_row_count(data)} "
            f"rows here, {record['rows']} rows recorded; SHA-256 differs): truncated or altered")


def measurements_problem(text: str) -> str | None:
    """Why ``text`` cannot be a whole measurements.csv (None: it can), for files without a
    record (the paper's data, older studies): empty, no line end after the last row (cut
    mid-line), a header without ``step`` or without rows, a row with another number of
    fields than the header, or a cell that is neither empty nor a number (``nan`` is one)."""
    if not text.strip():
        return "is empty"
    if not text.endswith("\n"):
        return "ends in the middle of a line (truncated)"
    lines = text.splitlines()
    header = lines[0].split(",")
    if "step" not in header:
        return "has no step column in its header (not a measurements file, or damaged)"
    if len(lines) == 1:
        return "has a header but no rows"
    step = header.index("step")
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split(",")
        if len(cells) != len(header):
            return f"line {number} has {len(cells)} fields where the header has {len(header)}"
        bad = next((c for c in cells if c.strip() and not _is_number(c)), None)
        if bad is not None:
            return f"line {number} holds {bad[:40]!r}, not a number"
        if not cells[step].strip():
            return f"line {number} has no step"
    return None


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _row_count(data: bytes) -> int:
    """Data rows of a measurements.csv's bytes: its lines after the header (a last line cut
    short counts)."""
    return max(len(data.splitlines()) - 1, 0)
