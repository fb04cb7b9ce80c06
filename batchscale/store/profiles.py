"""The study's hardware measurements beside its trials: step-time probes and the plan.

Two JSON files, outside the paper's per-batch-size folders (its loader never sees them):

    <study>/profile/step_times.json   timing probes (``batchscale.planning.probe``)
    <study>/plan/plan.json            what ``batchscale plan`` measured and proposed

``step_times.json`` is ``{"format": 1, "records": [...]}``; a record is one timed
(batch size, device count): ``batch_size``, ``devices``, ``seconds_per_step`` (training
steps only: no compilation, no evaluation), ``steps`` timed, ``precision``,
``device_kind`` (JAX's name for the device: ``cpu``, ``NVIDIA H100 80GB HBM3``),
``preset`` (the placement preset, ``local`` on one machine), ``cpu_cores``, ``measured``
(ISO time) and ``source`` (``probe``). A newer record of the same (batch size, devices,
device_kind, precision) replaces the older. Damaged files read as absent, never as
truth (``json_files.read_json_object``).
"""

from __future__ import annotations

import json

from batchscale.store.json_files import read_json_object
from batchscale.store.storage_api import Storage

STEP_TIMES = "profile/step_times.json"
PLAN = "plan/plan.json"
FORMAT = 1
_KEY = ("batch_size", "devices", "device_kind", "precision")


def read_step_times(fs: Storage, study: str) -> list[dict]:
    """The probe records of ``study`` (its folder name under the store root); [] if none."""
    value, _ = read_json_object(fs, f"{study}/{STEP_TIMES}")
    records = (value or {}).get("records")
    return [r for r in records if isinstance(r, dict)] if isinstance(records, list) else []


def write_step_times(fs: Storage, study: str, records: list[dict]) -> list[dict]:
    """Merge ``records`` into the study's step times (newer replaces same key); returns all."""
    merged = {tuple(r.get(k) for k in _KEY): r for r in read_step_times(fs, study)}
    merged.update({tuple(r.get(k) for k in _KEY): r for r in records})
    out = sorted(merged.values(), key=lambda r: (r.get("batch_size", 0), r.get("devices", 0)))
    fs.write_text(f"{study}/{STEP_TIMES}", json.dumps({"format": FORMAT, "records": out}, indent=2))
    return out


def read_plan(fs: Storage, study: str) -> dict | None:
    """What ``batchscale plan`` wrote for ``study``, or None."""
    return read_json_object(fs, f"{study}/{PLAN}")[0]


def write_plan(fs: Storage, study: str, plan: dict) -> None:
    fs.write_text(f"{study}/{PLAN}", json.dumps(plan, indent=2))
