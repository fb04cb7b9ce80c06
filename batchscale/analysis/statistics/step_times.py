"""Seconds per training step at each batch size, on the hardware that ran the study.

Time to result is steps to result x seconds per step (``time_to_result``), so the step
time must be what one trial's step costs when it has the device to itself. Two places
measure it: the trials themselves (metadata.json ``train_seconds`` / ``steps``: training
steps only, no compilation, no evaluation) and timing probes
(``batchscale.store.profiles.read_step_times``), which a vmapped pack runs for its batch
size when it ends and ``batchscale plan`` runs for every batch size of the spec.

Only a *solo* trial's timing is a step time: one that trained alone
(``trained_together`` 1; in stores written before that key, ``trainer`` "fit" or
``pack_size`` 1). A vmapped pack shares each compiled step among its trials, so its
``train_seconds`` / ``steps`` is the pack's step, not one trial's; it is shown, divided
by the trials sharing it, only where nothing else is known, and never used for time to
result. Timings of fewer than ``MIN_STEPS`` steps are left out (warm-up dominates them),
and so is every step time outside physical bounds (``batchscale.core.step_time_bounds``:
finite, from 1e-7 s to one day), of a trial or a probe: the study reader names its file.

Per (batch size, devices) the step time is the median of at least ``MIN_TIMINGS`` solo
timings (source "trials"); with fewer, the probe record when there is one ("probe"), else
the median of the few ("trials (few)"). A batch size probed on several device counts (the
profile over device counts a multi-device pod's pack takes) uses its probes for every
count they cover ("probe (device counts)"): the scaling over devices is then one method's,
and the trials' own median, which also holds their trainer's overhead, stays beside it.
Older stores lack the timing keys: train_seconds
falls back to steps x batch size / examples_per_second, devices to replicas (else 1),
preset to "local", cpu_cores to 1. Timings on another device kind than the one most
solo timings ran on are left out, and said so in ``notes``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from batchscale.core.prices import LOCAL_PRESET
from batchscale.core.step_time_bounds import MAX_SECONDS_PER_STEP, MIN_SECONDS_PER_STEP, probe_problem
from batchscale.store.filesystem import open_root
from batchscale.store.profiles import read_plan, read_step_times

MIN_STEPS = 20  # a shorter timing is mostly warm-up
MIN_TIMINGS = 3  # solo timings that outweigh a probe

PROFILE_COLUMNS = [
    "batch_size",  # int
    "devices",  # int: devices the batch was spread over
    "seconds_per_step",  # float: the step time used (NaN: none, only packed timings)
    "source",  # "trials", "probe", "probe (device counts)", "trials (few)" or
    #            "packed only (not a solo time)"
    "timings",  # int: solo trial timings of >= MIN_STEPS steps
    "trials_seconds_per_step",  # float: their median (NaN without any)
    "packed_timings",  # int: timings of trials trained in a vmapped pack
    "shared_seconds_per_trial_step",  # float: packed step / trials sharing it, where no
    #                                   solo timing exists (information only)
    "precision", "device_kind", "preset",  # str
    "cpu_cores",  # float
]


@dataclass
class StepTimeProfile:
    """``table``: one row per (batch size, devices), ``PROFILE_COLUMNS``, sorted;
    ``device_kind``: the hardware the profile is of ("" when nothing was timed);
    ``notes``: what was left out and why."""

    table: pd.DataFrame
    device_kind: str = ""
    notes: list[str] = field(default_factory=list)


def study_folder(study) -> tuple[str, str] | None:
    """(store root URL, study folder name) of one of our studies, where its profile/ and
    plan/ lie; None for the paper's layout."""
    if study.layout != "batchscale" or study.spec is None:
        return None
    suffix = f"/{study.spec.workload.path}"
    url = study.location.rstrip("/")
    url = url[:-len(suffix)] if url.endswith(suffix) else (
        f"{study.spec.store.rstrip('/')}/{study.spec.name}")
    root, _, name = url.rpartition("/")
    return (root or "/", name) if name else None


def read_probes(study) -> list[dict]:
    """The study's step-time probe records that can be believed ([] for the paper's data or
    without any): those the study reader kept (``Study.step_times``; the others are in
    ``Study.damaged``), else read through the same check."""
    if getattr(study, "step_times", None) is not None:
        return list(study.step_times)
    where = study_folder(study)
    return read_step_times(open_root(where[0]), where[1]) if where else []


def read_study_plan(study) -> dict | None:
    """What ``batchscale plan`` wrote for the study (plan.json), or None."""
    where = study_folder(study)
    return read_plan(open_root(where[0]), where[1]) if where else None


def _column(frame: pd.DataFrame, name: str, default) -> pd.Series:
    if name in frame:
        return frame[name].where(frame[name].notna(), default)
    return pd.Series([default] * len(frame), index=frame.index, dtype=object)


def _number(frame: pd.DataFrame, name: str) -> pd.Series:
    if name not in frame:
        return pd.Series(math.nan, index=frame.index, dtype=float)
    return pd.to_numeric(frame[name], errors="coerce").astype(float)


def trial_timings(metadata: pd.DataFrame) -> pd.DataFrame:
    """One row per trial: batch_size, trial_id, steps, train_seconds, seconds_per_step
    (train_seconds / steps), solo (bool), together (trials sharing each step, NaN when
    unknown), usable (>= MIN_STEPS steps, train_seconds > 0, a step time within the
    physical bounds of ``core.step_time_bounds``), devices, precision,
    device_kind, preset, cpu_cores; the fallbacks of old stores applied."""
    meta = metadata.reset_index(drop=True)
    steps = _number(meta, "steps")
    batch = _number(meta, "batch_size")
    train = _number(meta, "train_seconds")
    eps = _number(meta, "examples_per_second")
    derived = (steps * batch / eps.where(eps > 0)).where(lambda s: np.isfinite(s))
    train = train.fillna(derived)
    per_step = train / steps.where(steps > 0)
    # the physical bounds of a step time (core.step_time_bounds), the study reader's too
    bounded = per_step.between(MIN_SECONDS_PER_STEP, MAX_SECONDS_PER_STEP)
    together = _number(meta, "trained_together")
    pack = _number(meta, "pack_size")
    trainer = _column(meta, "trainer", "").astype(str)
    legacy_solo = (trainer == "fit") | (pack == 1)
    solo = (together == 1) | (together.isna() & legacy_solo)
    together = together.fillna(pack.where(trainer == "vmapped"))
    devices = _number(meta, "devices").fillna(_number(meta, "replicas")).fillna(1.0)
    out = pd.DataFrame({
        "batch_size": batch.astype(int), "trial_id": _number(meta, "trial_id"),
        "steps": steps, "train_seconds": train, "seconds_per_step": per_step,
        "solo": solo.astype(bool), "together": together,
        "usable": ((steps >= MIN_STEPS) & (train > 0) & bounded).astype(bool),
        "devices": devices.clip(lower=1).astype(int),
        "precision": _column(meta, "precision", "").astype(str),
        "device_kind": _column(meta, "device_kind", "").astype(str),
        "preset": _column(meta, "preset", LOCAL_PRESET).astype(str),
        "cpu_cores": _number(meta, "cpu_cores").fillna(1.0)})
    return out


def _mode(values: pd.Series, default=""):
    values = values.dropna()
    return values.mode().iloc[0] if len(values) else default


def _pick_probe(records: list[dict], batch_size: int, devices: int, kind: str,
                precision: str) -> dict | None:
    """The newest probe of (batch size, devices) on ``kind`` (any kind when none is
    known) within the physical bounds of a probe (``core.step_time_bounds``); the study's
    precision preferred."""
    def ok(r):
        try:
            same = int(r.get("batch_size")) == batch_size and int(r.get("devices") or 1) == devices
        except (TypeError, ValueError):
            return False
        return same and probe_problem(r) is None and (
            not kind or str(r.get("device_kind", "")) == kind)
    found = [r for r in records if ok(r)]
    if precision:
        found = [r for r in found if str(r.get("precision", "")) == precision] or found
    return max(found, key=lambda r: str(r.get("measured", ""))) if found else None


def step_time_profile(metadata: pd.DataFrame, probes: list[dict] | None = None) -> StepTimeProfile:
    """The step-time profile from trials' metadata (``Study.metadata``) and probe records
    (see the module docstring)."""
    probes = probes or []
    timings = trial_timings(metadata)
    usable = timings[timings["usable"]]
    solo = usable[usable["solo"]]
    kinds = solo["device_kind"][solo["device_kind"] != ""]
    kind = str(_mode(kinds)) if len(kinds) else str(_mode(usable["device_kind"][usable["device_kind"] != ""]))
    notes = []
    if kind:
        other = usable[(usable["device_kind"] != kind) & (usable["device_kind"] != "")]
        if len(other):
            notes.append(f"{len(other)} trial timing(s) on {', '.join(sorted(set(other['device_kind'])))} "
                         f"left out: the profile is of {kind}, where most solo timings ran")
        usable = usable[usable["device_kind"].isin([kind, ""])]
        solo = usable[usable["solo"]]
    elif probes:
        kind = str(_mode(pd.Series([str(r.get("device_kind", "")) for r in probes])))
    precision = str(_mode(usable["precision"][usable["precision"] != ""]))
    packed = usable[~usable["solo"]]
    keys = {(int(b), int(d)) for b, d in zip(usable["batch_size"], usable["devices"])}
    keys |= {(int(r["batch_size"]), int(r.get("devices") or 1)) for r in probes
             if _pick_probe([r], _int(r.get("batch_size")), _int(r.get("devices") or 1), kind, "")}
    # a batch size probed on several device counts (a multi-device pod's profile): its
    # probes serve every count they cover, so the scaling over devices is read off one
    # method (a trial's own timing also holds its trainer's overhead; it stays beside)
    counts: dict[int, set] = {}
    for b, d in ((_int(r.get("batch_size")), _int(r.get("devices") or 1)) for r in probes):
        counts.setdefault(b, set()).add(d)
    profiled = {b for b, found in counts.items() if len(found) > 1}
    rows = []
    for batch_size, devices in sorted(keys):
        mine = solo[(solo["batch_size"] == batch_size) & (solo["devices"] == devices)]
        theirs = packed[(packed["batch_size"] == batch_size) & (packed["devices"] == devices)]
        probe = _pick_probe(probes, batch_size, devices, kind, precision)
        median = float(mine["seconds_per_step"].median()) if len(mine) else math.nan
        shared = (theirs["seconds_per_step"] / theirs["together"]).dropna()
        if batch_size in profiled and probe is not None:
            source, seconds, info = "probe (device counts)", float(probe["seconds_per_step"]), probe
        else:
            source, seconds, info = _choose(len(mine), median, probe, len(theirs))
        described = mine if len(mine) else theirs
        rows.append({
            "batch_size": batch_size, "devices": devices, "seconds_per_step": seconds,
            "source": source, "timings": len(mine), "trials_seconds_per_step": median,
            "packed_timings": len(theirs),
            "shared_seconds_per_trial_step": float(shared.median()) if len(shared) and not len(mine)
            else math.nan,
            **(_described(info) if info else _described_by(described))})
    table = pd.DataFrame(rows, columns=PROFILE_COLUMNS)
    table = table.astype({"batch_size": "int64", "devices": "int64", "timings": "int64",
                          "packed_timings": "int64"})
    return StepTimeProfile(table, kind, notes)


def _described(probe: dict) -> dict:
    """precision, device_kind, preset and cpu_cores of a probe record."""
    return {"precision": str(probe.get("precision", "")),
            "device_kind": str(probe.get("device_kind", "")),
            "preset": str(probe.get("preset") or LOCAL_PRESET),
            "cpu_cores": float(probe.get("cpu_cores") or 1.0)}


def _described_by(timings: pd.DataFrame) -> dict:
    """The same, of the trials whose timings the row is from (their most common)."""
    return {"precision": str(_mode(timings["precision"])),
            "device_kind": str(_mode(timings["device_kind"])),
            "preset": str(_mode(timings["preset"], LOCAL_PRESET)),
            "cpu_cores": float(timings["cpu_cores"].median()) if len(timings) else 1.0}


def _int(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1


def _choose(solo: int, median: float, probe: dict | None, packed: int):
    """(source, seconds_per_step, the probe when it is the source)."""
    if solo >= MIN_TIMINGS:
        return "trials", median, None
    if probe is not None:
        return "probe", float(probe["seconds_per_step"]), probe
    if solo:
        return "trials (few)", median, None
    return ("packed only (not a solo time)" if packed else "none"), math.nan, None
