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
(``probe``). A file that is not a JSON object, or whose record is outside the physical
bounds of a step time (``batchscale.core.step_time_bounds.probe_problem``: seconds per step
finite, from 1e-7 s to one day; steps, batch size and devices integers >= 1), is never
believed: ``check_step_times`` names it with what is wrong, and every reader leaves it
out (the next probe of its key replaces it).
"""

from __future__ import annotations

import json
import re

from batchscale.core.step_time_bounds import probe_problem
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


def check_step_times(fs: Storage, study: str) -> tuple[list[dict], list[tuple[str, str]]]:
    """The probe records of ``study`` (its folder name under the store root) that can be
    believed, sorted by batch size and devices, and (path, problem) of each file that
    cannot (paths relative to the store root)."""
    folder = f"{study}/{STEP_TIMES}" if study else STEP_TIMES  # "": ``fs`` is the study's folder
    out, rejected = [], []
    for name in sorted(fs.list_files(folder)):
        if not name.endswith(".json"):
            continue
        path = f"{folder}/{name.rsplit('/', 1)[-1]}"
        value, problem = read_json_object(fs, path)
        problem = problem or probe_problem(value)
        if problem:
            rejected.append((path, problem))
        else:
            out.append(value)
    return sorted(out, key=lambda r: (_number(r.get("batch_size")), _number(r.get("devices")))), rejected


def read_step_times(fs: Storage, study: str, log=None) -> list[dict]:
    """The probe records of ``study`` that can be believed; [] if none. ``log``: gets one
    line per file left out, naming it and what is wrong."""
    records, rejected = check_step_times(fs, study)
    for path, problem in rejected:
        if log is not None:
            log(rejected_line(fs.url(path), problem))
    return records


def rejected_line(url: str, problem: str) -> str:
    """The one line that names a step-time probe file left out."""
    return f"step-time probe {url} {problem}; left out (its next probe replaces it)"


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("inf")


def write_step_times(fs: Storage, study: str, records: list[dict]) -> None:
    """Write each record to its own file (a newer one of the same key replaces it). A
    record the readers would leave out (``probe_problem``) is refused, before any write."""
    for record in records:
        problem = probe_problem(record)
        if problem:
            raise ValueError(f"step-time record of batch size {record.get('batch_size')} "
                             f"{problem}; nothing written")
    for record in records:
        fs.write_text(f"{study}/{STEP_TIMES}/{record_name(record)}", json.dumps(record, indent=2))


def read_plan(fs: Storage, study: str) -> dict | None:
    """What ``batchscale plan`` wrote for ``study``, or None."""
    return read_json_object(fs, f"{study}/{PLAN}")[0]


def write_plan(fs: Storage, study: str, plan: dict) -> None:
    fs.write_text(f"{study}/{PLAN}", json.dumps(plan, indent=2))


PACK_MODES = "profile/pack_modes"
_MODE_KEY = ("batch_sizes", "width", "device_kind", "precision", "model")


def write_pack_mode(fs: Storage, study: str, record: dict) -> None:
    """Write a pack-mode record (what a timed probe chose for packs of these batch sizes
    and width: ``batch_sizes`` (several for a mixed-batch pack), ``width``, ``rates``
    (trial-steps/s per mode), ``chosen``, ``device_kind``, ``precision``, ``model``,
    ``measured``, ``source``) to its own file, named by its key; a newer one replaces it.
    (A minimal version for the mixed-batch packs; the pack-mode probe's branch owns it.)"""
    key = "-".join(str(record.get(k, "")) for k in _MODE_KEY)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", key) + ".json"
    fs.write_text(f"{study}/{PACK_MODES}/{name}", json.dumps(record, indent=2))


def read_pack_modes(fs: Storage, study: str) -> list[dict]:
    """Every pack-mode record of ``study`` that is a JSON object with a ``chosen`` mode."""
    folder = f"{study}/{PACK_MODES}"
    out = []
    for name in sorted(fs.list_files(folder)):
        if name.endswith(".json"):
            value, problem = read_json_object(fs, f"{folder}/{name.rsplit('/', 1)[-1]}")
            if not problem and isinstance(value, dict) and value.get("chosen"):
                out.append(value)
    return out
