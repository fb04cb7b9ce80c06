"""The study's hardware measurements beside its trials: step-time probes and the plan.

Beside the trials, outside the paper's per-batch-size folders (its loader never sees them):

    <study>/profile/step_times/*.json timing probes (``batchscale.training.step_timing``)
    <study>/profile/pack_modes/*.json which pack mode is faster (``batchscale.training.pack_mode``)
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

Pack modes are one small JSON file per record too, ``profile/pack_modes/<name>.json``,
named by (model, batch sizes, device kind, precision, width): what a pack measured of
the ways its trials can share the device, and which it chose. A record: ``model``,
``batch_sizes`` (a list: one batch size for vmapped against turns, several for a pack
whose batch sizes share one padded step), ``width`` (trials vmapped in one step),
``rates`` (mode -> trial-steps per second, e.g. ``{"vmapped": 2100.0, "turns": 1500.0}``),
``chosen`` (one of its modes), ``device_kind``, ``precision``, ``measured`` (ISO time) and
``source`` (``probe``); a writer may add fields of its own (the readers ignore them).
``check_pack_modes`` names a file whose record is not of that form (``pack_mode_problem``)
and every reader leaves it out, so the next pack of its key measures again.
"""

from __future__ import annotations

import json
import math
import re

from batchscale.core.step_time_bounds import MIN_SECONDS_PER_STEP, probe_problem
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
    out, rejected = _check_folder(fs, f"{study}/{STEP_TIMES}" if study else STEP_TIMES, probe_problem)
    return sorted(out, key=lambda r: (_number(r.get("batch_size")), _number(r.get("devices")))), rejected


def _check_folder(fs: Storage, folder: str, problem_of) -> tuple[list[dict], list[tuple[str, str]]]:
    """The records of ``folder``'s JSON files that ``problem_of`` finds nothing wrong with,
    and (path, problem) of each other file (the one reader of both profile folders)."""
    out, rejected = [], []
    for name in sorted(fs.list_files(folder)):
        if not name.endswith(".json"):
            continue
        path = f"{folder}/{name.rsplit('/', 1)[-1]}"
        value, problem = read_json_object(fs, path)
        problem = problem or problem_of(value)
        if problem:
            rejected.append((path, problem))
        else:
            out.append(value)
    return out, rejected


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


# ---- pack modes ------------------------------------------------------------------------
PACK_MODES = "profile/pack_modes"
_MODE_KEY = ("model", "batch_sizes", "device_kind", "precision", "width")
_MODE_TEXT = ("allowed: model, device_kind, precision, measured and source strings; batch_sizes "
              "a non-empty list of integers >= 1; width an integer >= 1; rates an object of "
              "mode -> trial-steps per second (finite, > 0, at most width / 1e-7); chosen one "
              "of its modes")


def pack_mode_key(record: dict) -> tuple:
    """What a pack-mode record is of: (model, batch sizes, device kind, precision, width)."""
    sizes = record.get("batch_sizes")
    return (record.get("model"), tuple(sizes) if isinstance(sizes, list) else sizes,
            record.get("device_kind"), record.get("precision"), record.get("width"))


def pack_mode_name(record: dict) -> str:
    """The file name of a pack-mode record: its key (batch sizes joined by '_'), anything
    but letters, digits, '.', '_' and '-' turned into '_'."""
    model, sizes, kind, precision, width = pack_mode_key(record)
    key = "-".join(str(v) for v in (model, "_".join(map(str, sizes or ())), kind, precision, width))
    return re.sub(r"[^A-Za-z0-9._-]", "_", key) + ".json"


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def pack_mode_problem(record) -> str | None:
    """Why a pack-mode record cannot be believed (the first field that is wrong), or None."""
    if not isinstance(record, dict):
        return f"is not a JSON object; {_MODE_TEXT}"
    for key in ("model", "device_kind", "precision", "measured", "source"):
        if not isinstance(record.get(key), str) or not record.get(key):
            return f"has {key} {record.get(key)!r:.40}, not a non-empty string; {_MODE_TEXT}"
    sizes = record.get("batch_sizes")
    if not isinstance(sizes, list) or not sizes or not all(_count(b) for b in sizes):
        return f"has batch_sizes {sizes!r:.40}, not a non-empty list of integers >= 1; {_MODE_TEXT}"
    width = record.get("width")
    if not _count(width):
        return f"has width {width!r:.40}, not an integer >= 1; {_MODE_TEXT}"
    rates = record.get("rates")
    if not isinstance(rates, dict) or not rates:
        return f"has rates {rates!r:.40}, not an object of mode -> trial-steps/s; {_MODE_TEXT}"
    for mode, rate in rates.items():
        real = isinstance(rate, (int, float)) and not isinstance(rate, bool)
        if not real or not math.isfinite(rate) or not 0 < rate <= width / MIN_SECONDS_PER_STEP:
            return f"has rates[{mode!r}] {rate!r:.40}, outside physical bounds; {_MODE_TEXT}"
    if record.get("chosen") not in rates:
        return f"has chosen {record.get('chosen')!r:.40}, not one of its rates' modes; {_MODE_TEXT}"
    return None


def check_pack_modes(fs: Storage, study: str) -> tuple[list[dict], list[tuple[str, str]]]:
    """The pack-mode records of ``study`` that can be believed, sorted by batch sizes and
    width, and (path, problem) of each file that cannot (as ``check_step_times``)."""
    out, rejected = _check_folder(fs, f"{study}/{PACK_MODES}" if study else PACK_MODES,
                                  pack_mode_problem)
    return sorted(out, key=lambda r: (r["batch_sizes"], r["width"])), rejected


def read_pack_modes(fs: Storage, study: str, log=None) -> list[dict]:
    """The pack-mode records of ``study`` that can be believed; [] if none. ``log``: gets
    one line per file left out, naming it and what is wrong."""
    records, rejected = check_pack_modes(fs, study)
    for path, problem in rejected:
        if log is not None:
            log(f"pack-mode record {fs.url(path)} {problem}; left out (the next pack of its "
                "key measures again and replaces it)")
    return records


def claim_pack_mode(fs: Storage, study: str, record: dict, usable=None) -> tuple[str, dict]:
    """Write ``record`` unless a record of its key that can be believed (and that
    ``usable`` accepts) is there already: one that a pack of the same key, probing at the
    same time, wrote first. Returns (its path relative to the study, the record in force:
    that one, else ``record``), so packs of one key that start together train in one mode.
    A file there that cannot be believed is replaced; a ``record`` the readers would leave
    out is refused (a ValueError naming the field), before any write."""
    problem = pack_mode_problem(record)
    if problem:
        raise ValueError(f"pack-mode record of batch sizes {record.get('batch_sizes')} "
                         f"{problem}; nothing written")
    path = f"{PACK_MODES}/{pack_mode_name(record)}"
    text = json.dumps(record, indent=2)
    if fs.write_if_absent(f"{study}/{path}", text.encode()):
        return path, record
    there, problem = read_json_object(fs, f"{study}/{path}")
    if (problem is None and pack_mode_problem(there) is None
            and pack_mode_key(there) == pack_mode_key(record) and (usable is None or usable(there))):
        return path, there
    fs.write_text(f"{study}/{path}", text)
    return path, record


def write_pack_mode(fs: Storage, study: str, record: dict) -> str:
    """Write ``record`` to its own file (a newer one of the same key replaces it); return
    its path relative to the study. A record the readers would leave out is refused (a
    ValueError naming the field), before any write."""
    problem = pack_mode_problem(record)
    if problem:
        raise ValueError(f"pack-mode record of batch sizes {record.get('batch_sizes')} "
                         f"{problem}; nothing written")
    path = f"{PACK_MODES}/{pack_mode_name(record)}"
    fs.write_text(f"{study}/{path}", json.dumps(record, indent=2))
    return path
