"""How well ``batchscale plan`` predicts a study, checked against the study itself.

For each study (default: the quickstart, and digits/fc_128_128 with 10 trials at nine
batch sizes up to the full training set), in a fresh store: runs ``batchscale plan``
(timed), then ``batchscale run --local`` (timed), and prints

- B_simple from the plan with its interval, the fitted B* with its interval, their ratio
  and whether B* falls inside the predicted interval;
- the plan's estimate of trained steps, device-hours and wall time against the run's
  trained steps (summary.json's training_cost), its trials' training seconds and the
  command's wall time;
- the fastest and cheapest batch size of the report.

    .venv/bin/python benchmarks/plan_check.py [--work DIR] [--study "quickstart"] ...

Each ``--study`` is the SPEC and flags of ``batchscale plan`` / ``run`` as one string.
Figures measured with it are in benchmarks/README.md ("Plan against the study").
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

DIGITS = ("--workload digits/fc_128_128 --name digits --trials 10 "
          "--batch-sizes 4,8,16,32,64,128,256,512,1297")
DEFAULT_STUDIES = ("quickstart", DIGITS)


def run_logged(command: list[str], log: str) -> float:
    """Run ``command`` with its output in ``log``; wall seconds (exit on failure)."""
    started = time.perf_counter()
    with open(log, "w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}; see {log}")
    return time.perf_counter() - started


def check(study: str, work: str) -> dict:
    store = tempfile.mkdtemp(prefix="plan-check-", dir=work)
    cli = [sys.executable, "-m", "batchscale.cli"]
    args = [*shlex.split(study), "--store", store]
    plan_seconds = run_logged([*cli, "plan", *args], os.path.join(store, "plan.log"))
    run_seconds = run_logged([*cli, "run", "--local", *args, "--work-dir", os.path.join(store, ".kfp")],
                       os.path.join(store, "run.log"))
    [name] = [d for d in os.listdir(store) if d not in ("datasets", ".kfp") and "." not in d]
    with open(os.path.join(store, name, "plan", "plan.json")) as fh:
        plan = json.load(fh)
    with open(os.path.join(store, name, "report", "summary.json")) as fh:
        summary = json.load(fh)
    train_seconds = 0.0
    for root, _, files in os.walk(os.path.join(store, name)):
        if "metadata.json" in files:
            with open(os.path.join(root, "metadata.json")) as fh:
                train_seconds += json.load(fh).get("train_seconds") or 0.0
    cbs = summary.get("critical_batch_sizes") or {}  # every definition, by name
    predicted = cbs.get("b_simple") or {}
    summary_tc = (summary.get("time_and_cost") or {}).get("summary") or {}
    estimate, cost = plan["estimate"], summary["training_cost"]
    return {
        "study": name, "plan_seconds": plan_seconds, "run_seconds": run_seconds,
        "b_simple": plan["noise_scale"], "b_star": cbs.get("b_star_fit"),
        "ratio": predicted.get("predicted_over_fitted"), "inside": predicted.get("b_star_inside"),
        "probe": plan["probe"], "grid": plan["grid"],
        "estimated_steps": estimate["trained_steps"], "trained_steps": cost["trained_steps"],
        "full_steps": cost["full_steps"], "estimated_full_steps": estimate["full_steps"],
        "estimated_device_seconds": estimate["device_hours"] * 3600,
        "train_seconds": train_seconds, "estimated_wall": estimate["wall_seconds"],
        "fastest": (summary_tc.get("fastest") or {}).get("batch_size"),
        "cheapest": (summary_tc.get("cheapest") or {}).get("batch_size"),
    }


def show(r: dict) -> None:
    n, b = r["b_simple"], r["b_star"] or {}
    print(f"== {r['study']}: plan {r['plan_seconds']:.0f} s, run {r['run_seconds']:.0f} s")
    print(f"  B_simple {n['value']:.0f} [{n['low']:.0f}, {n['high']:.0f}] (probe at batch "
          f"{n['b_small']} / {n['b_big']}, {r['probe']['steps']} steps); fitted B* "
          f"{b.get('value', float('nan')):.0f} [{b.get('low', float('nan')):.0f}, "
          f"{b.get('high', float('nan')) or float('inf'):.0f}]; B_simple/B* {r['ratio']}; B* inside: "
          f"{r['inside']}")
    print("  probe runs: " + "; ".join(
        f"lr {x['parameters']['learning_rate']:.3g}: "
        + ("diverged" if x["diverged"] else f"goal at {x['crossing']}" if x["crossing"]
           else f"no goal in {x['steps']}") for x in r["probe"]["runs"]))
    print(f"  trained steps: estimated {r['estimated_steps']:,.0f}, measured {r['trained_steps']:,} "
          f"(ratio {r['estimated_steps'] / r['trained_steps']:.2f}); full: estimated "
          f"{r['estimated_full_steps']:,.0f}, measured {r['full_steps']:,}")
    print(f"  device seconds (training + evaluation, estimated) {r['estimated_device_seconds']:.0f} "
          f"against the trials' training seconds {r['train_seconds']:.0f}; wall time estimated "
          f"{r['estimated_wall']:.0f} s, measured {r['run_seconds']:.0f} s")
    print(f"  proposed grid {r['grid']}; fastest batch size {r['fastest']}, cheapest {r['cheapest']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default=None, help="where the stores go (default: a temp dir)")
    parser.add_argument("--study", action="append", help="SPEC and flags, one string (repeatable)")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="plan-check-")
    os.makedirs(work, exist_ok=True)
    for study in args.study or DEFAULT_STUDIES:
        show(check(study, work))


if __name__ == "__main__":
    main()
