"""Which trials of a study are not finished, read from the store (the source of truth).

The aggregate step runs even after pack tasks failed, so the report must say what is
missing. The study expects, at each batch size, every trial id of its search rounds (its
study.json's ``search_rounds``, ``batchscale.core.rounds.read_rounds``: ids
1..trials_per_batch_size until a top-up or re-search round adds more). An expected trial is unfinished
when it has no metadata.json ("MISSING": never started, or its task died before its first
write) or a status outside ``DONE_STATUSES`` (e.g. "INCOMPLETE": interrupted). Each notes
whether a checkpoint lets it resume and from which step. Only our studies have a spec; the
paper's released data has none, and nothing is unfinished there.

``unfinished_trials`` lists the workload folder and the checkpoints folder once (no request
per absent trial), reads metadata.json only of trials whose status is not already known
(``known``: e.g. the statuses the study reader read) and reads the checkpoint object of each
unfinished trial that has one (verified: a damaged one is reported, not believed). Trials
the study reader left out as damaged (``left_out``) are not read again: the report lists
them under its damaged files.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass

import pandas as pd

from batchscale.core.names import DONE_STATUSES
from batchscale.core.rounds import read_rounds
from batchscale.core.spec import StudySpec, TrialSpec
from batchscale.core.trial_state import continues
from batchscale.store.checkpoints import CHECKPOINTS_DIR, read_checkpoint
from batchscale.store.json_files import read_json_object
from batchscale.store.layout import StudyStore

MISSING = "MISSING"
NO_CHECKPOINT = "no checkpoint"
RESUME_HINT = ("run the same study again (`batchscale run --local SPEC` locally, or submit the "
               "same spec to the same store on a cluster): finished trials are re-used and "
               "unfinished ones resume from their checkpoints (or from step 0 without one)")


@dataclass(frozen=True)
class UnfinishedTrial:
    """One expected trial that is not finished. ``status``: "MISSING" (no metadata.json) or
    its metadata status; ``resume_step``: the step its checkpoint resumes from (None: no
    usable checkpoint, it starts from step 0); ``note``: what the checkpoint looks like."""

    batch_size: int
    trial_id: int
    status: str
    resume_step: int | None = None
    note: str = NO_CHECKPOINT

    def to_dict(self) -> dict:
        return asdict(self)


def round_trial_ids(study_json: dict | None, spec: StudySpec) -> list[int]:
    """The trial ids a batch size's search rounds hold. Rounds that ``read_rounds`` cannot
    parse (no spec-form space) still give their ``trial_ids`` ranges; none: 1..N."""
    try:
        return sorted({i for r in read_rounds(study_json, spec) for i in r.trial_ids})
    except (KeyError, TypeError, ValueError, AttributeError):
        pass
    ranges = []
    for raw in (study_json or {}).get("search_rounds") or []:
        try:
            ranges.append(range(int(raw["trial_ids"][0]), int(raw["trial_ids"][1]) + 1))
        except (KeyError, IndexError, TypeError, ValueError):
            continue
    if len(ranges) <= 1:  # no rounds, or round 1 alone: it grows with trials_per_batch_size
        ranges.append(range(1, spec.trials_per_batch_size + 1))
    ids = {i for r in ranges for i in r}
    return sorted(ids)



def unplanned(ids: list[int], trial_id: int) -> str | None:
    """Why a trial folder is not one of the study's trials, given ``ids``, those its batch
    size's rounds hold (``round_trial_ids``); None: it is. Which trials exist is not a
    folder's to say: a folder outside the rounds (copied in under a new id, or trained by
    an older run from a forged round) would count towards steps to result silently, so the
    study reader names it and leaves it out. Only the id is checked: a metadata.json whose
    ``parameters`` were edited is still believed."""
    if trial_id in ids:
        return None
    return (f"is trial {trial_id}, not one of the trials its batch size's search rounds hold "
            f"({id_ranges(ids)})")


def expected_trials(spec: StudySpec, store: StudyStore) -> list[TrialSpec]:
    """Every trial the study expects, by batch size and id: the ids of each batch size's
    search rounds as its study.json records them (one read per batch size)."""
    out = []
    for batch_size in spec.batch_sizes:
        study_json = read_json_object(store.fs, f"{store.batch_dir(spec, batch_size)}/study.json")[0]
        out += [TrialSpec(spec.name, batch_size, i, {}) for i in round_trial_ids(study_json, spec)]
    return out


def unfinished_trials(spec: StudySpec, store: StudyStore,
                      known: Mapping[tuple[int, int], str] | None = None,
                      left_out: Collection[tuple[int, int | None]] = ()) -> list[UnfinishedTrial]:
    """Every trial ``spec`` expects that is not finished in ``store``, by batch size and id;
    ``left_out``: (batch size, trial id) of damaged trials, (batch size, None) of damaged
    batch sizes, skipped."""
    known = dict(known or {})
    left_out = set(left_out)
    workload = f"{spec.name}/{spec.workload.path}"
    files = set(store.fs.list_files(workload, recursive=True))
    checkpoints = set(store.fs.list_files(f"{spec.name}/{CHECKPOINTS_DIR}", recursive=True))
    out = []
    for trial in expected_trials(spec, store):
        key = (trial.batch_size, trial.trial_id)
        if key in left_out or (trial.batch_size, None) in left_out:
            continue
        status = known.get(key)
        if status is None:
            if f"{trial.batch_size}/{trial.trial_id}/metadata.json" not in files:
                status = MISSING
            else:
                meta = store.read_metadata(spec, trial) or {}
                status = meta.get("status", "INCOMPLETE")
                if continues(meta, spec.max_steps[trial.batch_size]):
                    status = "INCOMPLETE"  # stopped at a budget since raised: it continues
        if status in DONE_STATUSES:
            continue
        if f"{trial.batch_size}/{trial.trial_id}.npz" not in checkpoints:
            out.append(UnfinishedTrial(*key, status))
            continue
        problems: list[str] = []
        checkpoint = read_checkpoint(store, spec, trial, log=problems.append)
        if checkpoint is None:
            note = problems[0] if problems else NO_CHECKPOINT
            out.append(UnfinishedTrial(*key, status, None, note))
        else:
            step = checkpoint.step
            note = f"checkpoint at step {step}" if step is not None else "checkpoint (no step)"
            out.append(UnfinishedTrial(*key, status, step, note))
    return out


def id_ranges(ids) -> str:
    """``[1, 2, 3, 5, 7, 8]`` -> ``"1–3, 5, 7–8"``: a compact list of trial ids."""
    ids = sorted(set(int(i) for i in ids))
    parts, start = [], None
    for i, value in enumerate(ids):
        if start is None:
            start = value
        if i + 1 == len(ids) or ids[i + 1] != value + 1:
            parts.append(str(start) if start == value else f"{start}–{value}")
            start = None
    return ", ".join(parts)


def unfinished_table(unfinished: list[UnfinishedTrial]) -> pd.DataFrame:
    """One row per batch size with unfinished trials: how many, their ids by status (compact,
    "MISSING" first) and the resumable ones as ``id@step`` (what the report pages show)."""
    statuses = sorted({u.status for u in unfinished}, key=lambda s: (s != MISSING, s))
    columns = ["batch_size", "unfinished", *(s.lower() for s in statuses), "resumable (trial@step)"]
    rows = []
    for batch_size in sorted({u.batch_size for u in unfinished}):
        group = [u for u in unfinished if u.batch_size == batch_size]
        row = {"batch_size": batch_size, "unfinished": len(group)}
        for status in statuses:
            ids = [u.trial_id for u in group if u.status == status]
            row[status.lower()] = id_ranges(ids) if ids else None
        row["resumable (trial@step)"] = ", ".join(
            f"{u.trial_id}@{u.resume_step}" for u in group if u.resume_step is not None) or None
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def unfinished_line(unfinished: list[UnfinishedTrial], expected: int) -> str:
    """One sentence: how many of the expected trials are unfinished, by status."""
    if not unfinished:
        return f"All {expected} trials of the study are finished."
    by_status = {}
    for u in unfinished:
        by_status[u.status] = by_status.get(u.status, 0) + 1
    parts = ", ".join(f"{n} {s}" for s, n in sorted(by_status.items(),
                                                    key=lambda kv: (kv[0] != MISSING, kv[0])))
    resumable = sum(u.resume_step is not None for u in unfinished)
    return (f"{len(unfinished)} of {expected} trials are unfinished ({parts}; {resumable} "
            "resumable from a checkpoint); the report counts only the finished ones.")
