"""Do two runs of one study hold the same results, wall-clock aside?

A refactor that should change no behaviour is checked by running the same study with the
old and the new code into two stores and comparing them here, trial by trial:

- every trial of either store exists in both;
- its measurements.csv rows are equal to the bit, every column but ``wall_time``;
- its metadata.json is equal but for what measures time (``TIMING_KEYS``) and the
  measurements' checksum (it covers ``wall_time``); its row count must still match;
- the report's steps-to-result table and regime fits (report/summary.json) are equal but
  for time and cost to result, which come from measured seconds.

    .venv/bin/python benchmarks/same_results.py OLD_STORE NEW_STORE [--study quickstart]

Prints one line per difference (at most 20 per kind) and a summary; exits 1 when any.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

TIMING_KEYS = {"compile_seconds", "evaluation_seconds", "examples_per_second", "pack_setup_seconds",
               "train_seconds", "wall_time", "probe_seconds", "step_seconds", "pack_mode_rates"}
SUMMARY_TIMING_KEYS = {"time_and_cost", "answer"}  # both from measured seconds


def trials(store: Path, study: str) -> dict[str, Path]:
    """Trial folder (relative to the study) -> its path, for every trial with metadata."""
    root = store / study
    return {str(m.parent.relative_to(root)): m.parent for m in root.rglob("metadata.json")
            if "checkpoints" not in m.parts}


def rows(folder: Path) -> list[dict]:
    path = folder / "measurements.csv"
    if not path.exists():
        return []
    with path.open() as fh:
        return [{k: v for k, v in row.items() if k != "wall_time"} for row in csv.DictReader(fh)]


def metadata(folder: Path) -> dict:
    meta = json.loads((folder / "metadata.json").read_text())
    kept = {k: v for k, v in meta.items() if k not in TIMING_KEYS}
    if isinstance(kept.get("measurements"), dict):
        kept["measurements"] = {"rows": kept["measurements"].get("rows")}
    return kept


def summary(store: Path, study: str) -> dict:
    path = store / study / "report" / "summary.json"
    if not path.exists():
        return {}
    return {k: v for k, v in json.loads(path.read_text()).items() if k not in SUMMARY_TIMING_KEYS}


def compare(old: Path, new: Path, study: str) -> list[str]:
    problems: list[str] = []
    added: set[str] = set()
    a, b = trials(old, study), trials(new, study)
    for name in sorted(set(a) ^ set(b)):
        problems.append(f"trial {name}: only in {'old' if name in a else 'new'}")
    for name in sorted(set(a) & set(b)):
        ra, rb = rows(a[name]), rows(b[name])
        if ra != rb:
            first = next((i for i, (x, y) in enumerate(zip(ra, rb)) if x != y), min(len(ra), len(rb)))
            problems.append(f"trial {name}: measurements differ ({len(ra)} vs {len(rb)} rows, "
                            f"first at row {first})")
        ma, mb = metadata(a[name]), metadata(b[name])
        added.update(set(mb) - set(ma))  # fields the newer code records: named, not a difference
        shared = set(ma) & set(mb)
        keys = sorted({k for k in shared if ma[k] != mb[k]} | (set(ma) - set(mb)))
        if keys:
            problems.append(f"trial {name}: metadata differs in {', '.join(keys)}")
    sa, sb = summary(old, study), summary(new, study)
    for key in sorted(set(sa) | set(sb)):
        if sa.get(key) != sb.get(key):
            problems.append(f"summary.json: {key} differs")
    if added:
        print(f"metadata fields only the new store records (not compared): {', '.join(sorted(added))}")
    print(f"{len(set(a) & set(b))} trials in both stores; {len(problems)} difference(s)")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--study", default="quickstart")
    args = parser.parse_args(argv)
    problems = compare(args.old, args.new, args.study)
    for line in problems[:60]:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
