"""The study's hardware measurements beside its trials: step-time probes and the plan.

Beside the trials, outside the paper's per-batch-size folders (its loader never sees them):

    <study>/profile/step_times/*.json timing probes (``batchscale.training.step_timing``)
    <study>/plan/plan.json            what ``batchscale plan`` measured and proposed

Step times are one small JSON file per record, ``profile/step_times/<name>.json``, named
by (batch size, devices, device kind, precision): packs running at once each write their
own, so none overwrites another's (a shared file read, merged and written back would
lose records between concurrent writers); a newer record of the same key replaces the
older. A record: ``batch_size``, ``devices``, ``seconds_per_step`` (training steps only:
no compilation, no evaluation), ``steps`` timed, ``precision``, ``device_kind`` (JAX's
name for the device: ``cpu``, ``NVIDIA H100 80GB HBM3``), ``preset`` (the placement
preset, ``local`` on one machine), ``cpu_cores``, ``measured`` (ISO time) and ``source``
(``probe``). Damaged files read as absent, never as truth (``json_files.read_json_object``).
"""

from __future__ import annotations

import json
import re

from batchscale.store.json_files import read_json_object
from batchscale.store.storage_api import Storage

STEP_TIMES = "profile/step_times"
PLAN = "plan/plan.json"
_KEY = ("batch_size", "devices", "device_kind", "precision")


def record_name(record: dict) -> str:
    """The file name of a record: its key, with anything but letters, digits, '.', '_'
    and '-' turned into '_' (device kinds hold spaces)."""
    key = "-".join(str(record.get(k, "")) for k in _KEY)
    return re.sub(r"[^A-Za-z0-9._-]", "_", key) + ".json"


def read_step_times(fs: Storage, study: str) -> list[dict]:
    """The probe records of ``study`` (its folder name under the store root); [] if none."""
    out = []
    for name in sorted(fs.list_files(f"{study}/{STEP_TIMES}")):
        if name.endswith(".json"):
            value, _ = read_json_object(fs, f"{study}/{STEP_TIMES}/{name.rsplit('/', 1)[-1]}")
            if value is not None:
                out.append(value)
    return sorted(out, key=lambda r: (_number(r.get("batch_size")), _number(r.get("devices"))))


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("inf")


def write_step_times(fs: Storage, study: str, records: list[dict]) -> None:
    """Write each record to its own file (a newer one of the same key replaces it)."""
    for record in records:
        fs.write_text(f"{study}/{STEP_TIMES}/{record_name(record)}", json.dumps(record, indent=2))


def read_plan(fs: Storage, study: str) -> dict | None:
    """What ``batchscale plan`` wrote for ``study``, or None."""
    return read_json_object(fs, f"{study}/{PLAN}")[0]


def write_plan(fs: Storage, study: str, plan: dict) -> None:
    fs.write_text(f"{study}/{PLAN}", json.dumps(plan, indent=2))
