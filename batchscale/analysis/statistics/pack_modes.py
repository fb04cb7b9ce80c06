"""Which pack mode each batch size trained in, and the measurements that chose it.

A pack's trials train vmapped together or one at a time ("turns"), chosen by a short probe
at the pack's start (``batchscale.training.pack_mode``) whose record lies in the study's
profile (``profile/pack_modes/``, ``batchscale.store.profiles``). ``pack_mode_table``
puts both side by side per record: the batch sizes it is of, the modes the trials there
trained in (their metadata.json ``pack_mode``, counted), and the measured rates, the
choice and its margin. Batch sizes whose trials name a mode without any record (a width
given, a mode fixed by ``BATCHSCALE_PACK_MODE``, packs of one trial, stores before the
probe) get a row without rates. A record file that cannot be believed is named in
``notes`` and left out, as every reader of the profile does.
"""

from __future__ import annotations

import pandas as pd

from batchscale.analysis.statistics.step_times import study_folder
from batchscale.store.filesystem import open_root
from batchscale.store.profiles import check_pack_modes

COLUMNS = ["batch sizes", "trained in", "width", "trial-steps/s (measured)", "chosen", "margin",
           "device_kind", "measured"]


def pack_mode_table(study) -> tuple[pd.DataFrame, list[str]]:
    """(one row per pack-mode record or batch size, ``COLUMNS``; notes on files left out).
    An empty frame: neither records nor trials naming a mode (the paper's data, older
    stores)."""
    records, notes = [], []
    where = study_folder(study)
    if where is not None:
        fs = open_root(where[0])
        records, rejected = check_pack_modes(fs, where[1])
        notes = [f"{fs.url(path)} {problem}; left out" for path, problem in rejected]
    trained = _trained_in(study.metadata)
    rows, covered = [], set()
    for r in records:
        sizes = [int(b) for b in r["batch_sizes"]]
        covered.update(sizes)
        rows.append({"batch sizes": ", ".join(map(str, sizes)),
                     "trained in": _join(trained, sizes), "width": int(r["width"]),
                     "trial-steps/s (measured)": "; ".join(
                         f"{mode} {rate:,.0f}" for mode, rate in sorted(r["rates"].items())),
                     "chosen": r["chosen"], "margin": r.get("margin", ""),
                     "device_kind": r["device_kind"], "measured": r["measured"]})
    for b in sorted(set(trained) - covered):
        rows.append({"batch sizes": str(b), "trained in": _join(trained, [b]), "width": "",
                     "trial-steps/s (measured)": "not measured", "chosen": "", "margin": "",
                     "device_kind": "", "measured": ""})
    return pd.DataFrame(rows, columns=COLUMNS), notes


def _trained_in(metadata: pd.DataFrame) -> dict[int, dict[str, int]]:
    """batch size -> mode -> trials that trained in it (metadata.json ``pack_mode``)."""
    if "pack_mode" not in metadata or metadata.empty:
        return {}
    named = metadata[metadata["pack_mode"].notna()]
    out: dict[int, dict[str, int]] = {}
    for (b, mode), group in named.groupby(["batch_size", "pack_mode"]):
        out.setdefault(int(b), {})[str(mode)] = len(group)
    return out


def _join(trained: dict[int, dict[str, int]], sizes: list[int]) -> str:
    """"turns: 10" or "vmapped: 8, turns: 2" over ``sizes`` ("—" when no trial names one)."""
    counts: dict[str, int] = {}
    for b in sizes:
        for mode, n in trained.get(b, {}).items():
            counts[mode] = counts.get(mode, 0) + n
    return ", ".join(f"{mode}: {n}" for mode, n in sorted(counts.items())) or "—"
