"""A study grown by one batch size: the spec's search space against the fitted box.

Copies a finished study's store twice into a work folder (the original is only read),
adds one batch size ``B`` to each copy's spec with the step budget given, and runs
``batchscale run --local`` on each: (a) as always, ``B`` searching the spec's
``search_space`` with ``trials_per_batch_size`` trials and the protocol's later rounds;
(b) with ``new_batch_sizes: {search: fitted_box, trials: N}`` (``core.new_batch_sizes``),
``B``'s round 1 in the box the metaparameter laws fit to the other batch sizes. Every
other batch size's trials are re-used, so only ``B`` trains. Prints, per arm: the rounds
``B`` got, its trials and non-divergent trials, its steps to result (the study's first
goal, through the project's one reader), the steps its trials trained, and the wall time
of the command.

    .venv/bin/python benchmarks/fitted_box.py STORE/STUDY --batch-size 96 --max-steps 1750
        [--trials N] [--work DIR]

Figures measured with it are in benchmarks/README.md ("A new batch size from a fitted box").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

from plan_check import run_logged  # a script beside this one (sys.path[0])


def grown_copy(location: str, work: str, arm: str, batch_size: int, budget: int,
               trials: int | None) -> tuple[str, str]:
    """A copy of the store of the study at ``location`` with ``batch_size`` added to its
    spec (``trials``: the fitted box with that many trials; None: the spec's space);
    returns (the spec file, the copied study's folder)."""
    root, name = os.path.split(os.path.abspath(location.rstrip("/")))
    store = os.path.join(work, f"{arm}-{batch_size}")
    shutil.rmtree(store, ignore_errors=True)
    shutil.copytree(root, store)
    with open(os.path.join(store, name, "study_spec.json")) as fh:
        spec = json.load(fh)
    spec["store"] = store
    spec["batch_sizes"] = sorted(set(spec["batch_sizes"]) | {batch_size})
    spec["max_steps"] = {**spec["max_steps"], str(batch_size): budget}
    if trials is not None:
        spec["new_batch_sizes"] = {"search": "fitted_box", "trials": trials}
    path = os.path.join(work, f"{arm}-{batch_size}.json")  # JSON is YAML
    with open(path, "w") as fh:
        json.dump(spec, fh)
    return path, os.path.join(store, name)


def run(spec_file: str, work: str) -> float:
    """``batchscale run --local`` of ``spec_file``; wall seconds."""
    return run_logged([sys.executable, "-m", "batchscale.cli", "run", "--local", spec_file,
                       "--work-dir", spec_file.replace(".json", ".kfp")],
                      spec_file.replace(".json", ".log"))


def measure(study_dir: str, batch_size: int) -> dict:
    """What ``batch_size`` got in the study at ``study_dir``: its rounds, trials,
    non-divergent trials, steps to result and the steps its trials trained."""
    from batchscale.analysis.reading.study_reader import load_study
    from batchscale.analysis.statistics.steps import steps_to_result

    study = load_study(study_dir)
    meta = study.metadata[study.metadata["batch_size"] == batch_size]
    table = steps_to_result(study, study.goals[0])
    row = table[table["batch_size"] == batch_size].iloc[0]
    rounds = study.study_json[batch_size].get("search_rounds") or []
    return {"rounds": [f"{r['round']}: {r['trial_ids'][0]}-{r['trial_ids'][1]} {r['reason']}"
                       for r in rounds],
            "trials": len(meta), "non_divergent": int((meta["status"] == "COMPLETE").sum()),
            "steps_to_result": row["steps_to_result"], "best_trial": row["best_trial"],
            "trained_steps": int(meta["steps"].sum())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study", help="STORE/STUDY of a finished study (only read)")
    parser.add_argument("--batch-size", type=int, required=True, help="the batch size to add")
    parser.add_argument("--max-steps", type=int, required=True, help="its step budget")
    parser.add_argument("--trials", type=int, default=0,
                        help="the fitted round's trials (default 0: half of trials_per_batch_size)")
    parser.add_argument("--work", help="folder for the copies and logs (default: a new temp folder)")
    args = parser.parse_args(argv)
    work = args.work or tempfile.mkdtemp(prefix="fitted-box-")
    os.makedirs(work, exist_ok=True)
    print(f"copies and logs in {work}")
    print("| arm | rounds | trials | non-divergent | steps to result (trial) | trained steps | wall |")
    print("|---|---|---|---|---|---|---|")
    for arm, trials in (("search_space", None), ("fitted_box", args.trials)):
        spec_file, study_dir = grown_copy(args.study, work, arm, args.batch_size,
                                          args.max_steps, trials)
        seconds = run(spec_file, work)
        got = measure(study_dir, args.batch_size)
        print(f"| {arm} | {'<br>'.join(got['rounds'])} | {got['trials']} | "
              f"{got['non_divergent']} | {got['steps_to_result']} ({got['best_trial']}) | "
              f"{got['trained_steps']:,} | {seconds:.0f} s |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
