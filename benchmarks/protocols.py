"""What each stopping protocol costs, and that it does not change the answer.

For each study (default: the quickstart, and the digits/fc_32 workload with 16 trials
per batch size) and each protocol (full, goal, race), runs ``batchscale run --local`` in
a fresh store, one protocol after another, and prints:

- trained steps and examples (the sum over every trial of its steps, and of steps x
  batch size), trials and diverged trials, and the wall time of the whole command;
- whether steps to result (every goal of the study, validation split) and each batch
  size's best trial are identical across the protocols.

    .venv/bin/python benchmarks/protocols.py [--work DIR] [--protocols full,goal,race]
        [--study "quickstart"] [--study "--workload digits/fc_32 --trials 16"]

Each ``--study`` is the SPEC and flags of ``batchscale run`` as one string. Figures
measured with it are in benchmarks/README.md ("Stopping protocols").
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time

import pandas as pd

from batchscale.core import protocols

DEFAULT_STUDIES = ("quickstart", "--workload digits/fc_32 --trials 16")


def run_study(args: list[str], protocol: str, store: str, work: str) -> float:
    """``batchscale run --local`` of the study under ``protocol`` into ``store``; wall seconds."""
    log = os.path.join(work, f"{os.path.basename(store)}.log")
    command = [sys.executable, "-m", "batchscale.cli", "run", "--local", *args,
               "--protocol", protocol, "--store", store, "--work-dir", os.path.join(store, ".kfp")]
    started = time.perf_counter()
    with open(log, "w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}; see {log}")
    return seconds


def measure(store: str) -> tuple[dict, pd.DataFrame]:
    """Trained steps, examples, trials and the steps-to-result table of the one study in
    ``store`` (read through the project's one reader)."""
    from batchscale.analysis.reading.study_reader import load_study
    from batchscale.analysis.statistics.steps import steps_to_result

    [name] = [d for d in os.listdir(store) if d not in ("datasets", ".kfp")]
    study = load_study(os.path.join(store, name))
    meta = study.metadata
    steps = pd.to_numeric(meta["steps"], errors="coerce").fillna(0)
    figures = {
        "trials": len(meta), "diverged": int((meta["status"] == "INFEASIBLE").sum()),
        "steps": int(steps.sum()), "examples": int((steps * meta["batch_size"]).sum()),
        "raced": int((meta.get("stop_reason") == protocols.STOP_RACE).sum()),
    }
    table = pd.concat([steps_to_result(study, goal)[["goal", "batch_size", "steps_to_result",
                                                     "best_trial"]] for goal in study.goals])
    return figures, table.reset_index(drop=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", help="folder for the stores and logs (default: a new temp folder)")
    parser.add_argument("--protocols", default=",".join(protocols.names()),
                        help="comma-separated (default: every known protocol)")
    parser.add_argument("--study", action="append", help="SPEC and flags of `batchscale run`")
    args = parser.parse_args(argv)
    work = args.work or tempfile.mkdtemp(prefix="protocols-")
    os.makedirs(work, exist_ok=True)
    chosen = args.protocols.split(",")
    print(f"stores and logs in {work}")
    for index, study in enumerate(args.study or DEFAULT_STUDIES):
        results = {}
        for protocol in chosen:
            store = os.path.join(work, f"study{index}-{protocol}")
            seconds = run_study(shlex.split(study), protocol, store, work)
            figures, table = measure(store)
            results[protocol] = (seconds, figures, table)
            print(f"[{study}] {protocol}: {seconds:.0f} s, {figures['steps']:,} steps, "
                  f"{figures['examples']:,} examples, {figures['trials']} trials "
                  f"({figures['diverged']} diverged, {figures['raced']} raced)", flush=True)
        report(study, results)
    return 0


def report(study: str, results: dict) -> None:
    first, *others = results
    print(f"\n{study}")
    print(f"| protocol | wall time | trained steps | examples | trials | {first}'s steps / these |")
    print("|---|---|---|---|---|---|")
    base_steps = results[first][1]["steps"]
    for protocol, (seconds, figures, _) in results.items():
        ratio = base_steps / figures["steps"] if figures["steps"] else float("nan")
        print(f"| {protocol} | {seconds:.0f} s | {figures['steps']:,} | {figures['examples']:,} | "
              f"{figures['trials']} | {ratio:.2f}x |")
    base = results[first][2]
    for protocol in others:
        same = results[protocol][2].equals(base)
        print(f"steps to result and best trials, {protocol} vs. {first}: "
              f"{'identical' if same else 'DIFFERENT'}")
        if not same:
            print(base.compare(results[protocol][2]).to_string())
    print(base.to_string(index=False))


if __name__ == "__main__":
    sys.exit(main())
