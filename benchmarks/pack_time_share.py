"""Where a local study's time goes, and how well ``batchscale plan`` predicted it.

For each code under test (a repository and the python that imports batchscale from it,
so the code before a change can run from another worktree), in a fresh store:
``batchscale plan`` then ``batchscale run --local`` on the study (default: the
quickstart), timed, while a watcher samples this machine's processes every
``POLL_SECONDS``. It prints one table, a column per run, and writes it as JSON:

- the run's wall time (the ``run --local`` command, start to exit), the plan's wall-time
  estimate (plan.json) and their ratio (measured / estimated);
- pack task time: for every ``train_pack`` task, from the start of its process (the
  ``sh`` kfp.local's SubprocessRunner starts: /proc's start time, 10 ms) until it is gone
  (within ``POLL_SECONDS``), summed over the pack tasks. Not kfp.local's log: its logger
  is shared by the ParallelFor's threads, and one thread's "finished" line is sometimes
  lost when another's task ends at the same moment;
- the share of pack task time spent training: the sum of the trials' ``train_seconds``
  (metadata.json: the compiled training chunks only, no compilation, no evaluation) over
  the sum of pack task time;
- where the rest of pack task time went: compilation (``compile_seconds``, once per pack),
  evaluation (``evaluation_seconds``), the pack's setup (``pack_setup_seconds`` of its
  first trial: data to the device, models built), the rest of the trials' groups
  (``wall_time`` less training and evaluation: host work between chunks, store writes) and
  the process outside ``train_together`` (interpreter, imports, the store's reads, the
  summary);
- the light tasks (prepare-data, plan-round, aggregate), the lanes' idle time (pack
  slots not used while a round's ParallelFor runs), and how long two packs overlapped;
- per batch size, the trials' seconds per step in the run over the plan's probe.

    .venv/bin/python benchmarks/pack_time_share.py --code old=/work/wt-old --code new=. \\
        [--rounds 1] [--study "quickstart"] [--work DIR] [--json FILE]

Runs interleave: old, new, old, new, ... (``--rounds`` times each), because a shared
machine's speed drifts. Linux only (reads /proc). Figures in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import tempfile
import threading
import time

POLL_SECONDS = 0.1
FUNCTION = re.compile(rb"--function_to_execute\x00([a-z_]+)")
PACK_ID = re.compile(rb'"pack_id":\s*"([^"]+)"')
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _uptime() -> float:
    with open("/proc/uptime") as fh:
        return float(fh.read().split()[0])


class TaskWatcher:
    """Samples /proc for kfp.local task processes: each task's function, pack id, start
    (its process's start time) and end (the last sample that saw it alive)."""

    def __init__(self, needle: str):
        self.needle = needle.encode()  # only tasks whose command line holds it (this study's store)
        self.tasks: dict[int, dict] = {}  # outer pid -> task
        self.ignored: set[int] = set()
        self.inside: set[int] = set()  # processes inside a task (its children)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *_):
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(POLL_SECONDS)

    def sample(self) -> None:
        now, up = time.time(), _uptime()
        alive, new = set(), []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            alive.add(pid)
            if pid in self.ignored:
                continue
            if pid in self.tasks:
                self.tasks[pid]["end"] = now
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    cmdline = fh.read()
                with open(f"/proc/{pid}/stat") as fh:
                    stat = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            new.append((int(stat[19]), pid, int(stat[1]), cmdline))
        for ticks, pid, ppid, cmdline in sorted(new):  # a parent before its children
            function = FUNCTION.search(cmdline)
            # not a task, a task's child (or grandchild), or another study's task
            if function is None or ppid in self.tasks or ppid in self.inside \
                    or self.needle not in cmdline:
                self.ignored.add(pid)
                if function is not None and (ppid in self.tasks or ppid in self.inside):
                    self.inside.add(pid)
                continue
            pack = PACK_ID.search(cmdline)
            self.tasks[pid] = {"function": function.group(1).decode(),
                               "pack": pack.group(1).decode() if pack else None,
                               "start": now - (up - ticks / TICKS), "end": now}
        for pid in list(self.ignored - alive):
            self.ignored.discard(pid)  # a pid may be reused
            self.inside.discard(pid)


def _run(command: list[str], log: str, cwd: str) -> float:
    started = time.perf_counter()
    with open(log, "w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}; see {log}")
    return time.perf_counter() - started


def _trial_metadata(study_dir: str) -> list[dict]:
    out = []
    for root, _, files in os.walk(study_dir):
        if "metadata.json" in files and os.path.basename(os.path.dirname(root)).isdigit():
            with open(os.path.join(root, "metadata.json")) as fh:
                out.append(json.load(fh))
    return out


def _by_pack(metas: list[dict], pack_ids: list[str]) -> dict[str, list[dict]]:
    """The trials' metadata by the pack task that trained them (``b256-t11-15``: batch
    size 256, trials 11 to 15)."""
    out: dict[str, list[dict]] = {}
    for pack in pack_ids:
        match = re.fullmatch(r"b(\d+)-t(\d+)(?:-(\d+))?", pack or "")
        if match:
            b, first, last = int(match[1]), int(match[2]), int(match[3] or match[2])
            out[pack] = [m for m in metas if m["batch_size"] == b and first <= m["trial_id"] <= last]
    return out


def _overlap(tasks: list[dict]) -> float:
    """Seconds during which at least two pack tasks ran at once."""
    events = sorted([(t["start"], 1) for t in tasks] + [(t["end"], -1) for t in tasks])
    running, last, both = 0, None, 0.0
    for at, change in events:
        if running >= 2:
            both += at - last
        running, last = running + change, at
    return both


def measure(label: str, repo: str, python: str, study: str, work: str) -> dict:
    """One plan + run of ``study`` by ``python`` (batchscale from ``repo``) in a fresh store."""
    store = tempfile.mkdtemp(prefix=f"share-{label}-", dir=work)
    cli = [python, "-m", "batchscale.cli"]
    args = [*shlex.split(study), "--store", os.path.join(store, "store")]
    where = subprocess.run([python, "-c", "import batchscale, os; print(os.path.dirname("
                            "os.path.dirname(batchscale.__file__)))"], capture_output=True,
                           text=True, check=True).stdout.strip()
    commit = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    load_before = os.getloadavg()
    plan_seconds = _run([*cli, "plan", *args], os.path.join(store, "plan.log"), store)
    started = time.time()
    with TaskWatcher(os.path.join(store, "store")) as watcher:
        run_seconds = _run([*cli, "run", "--local", *args, "--work-dir", os.path.join(store, "kfp")],
                           os.path.join(store, "run.log"), store)
    [name] = [d for d in os.listdir(os.path.join(store, "store")) if d != "datasets"]
    study_dir = os.path.join(store, "store", name)
    with open(os.path.join(study_dir, "plan", "plan.json")) as fh:
        plan = json.load(fh)
    metas = _trial_metadata(study_dir)
    tasks = list(watcher.tasks.values())
    packs = [t for t in tasks if t["function"] == "train_pack"]
    light = [t for t in tasks if t["function"] != "train_pack"]
    pack_seconds = sum(t["end"] - t["start"] for t in packs)
    train = sum(m.get("train_seconds") or 0.0 for m in metas)
    evaluation = sum(m.get("evaluation_seconds") or 0.0 for m in metas)
    groups = sum(m.get("wall_time") or 0.0 for m in metas)
    by_pack = _by_pack(metas, [t["pack"] for t in packs])
    compile_seconds = sum(max((m.get("compile_seconds") or 0.0 for m in ms), default=0.0)
                          for ms in by_pack.values())  # cumulative over a pack's groups
    setup = sum(min((m.get("pack_setup_seconds") or 0.0 for m in ms), default=0.0)
                for ms in by_pack.values())  # its first group's: before any trained
    probe = {r["batch_size"]: r["seconds_per_step"] for r in plan["step_times"]}
    steps_by_b: dict[int, list[float]] = {}
    for m in metas:
        if m.get("train_seconds") and m.get("steps"):
            s = steps_by_b.setdefault(m["batch_size"], [0.0, 0.0])
            s[0], s[1] = s[0] + m["train_seconds"], s[1] + m["steps"]
    slowdown = {b: (s[0] / s[1]) / probe[b] for b, s in sorted(steps_by_b.items()) if b in probe}
    estimate = plan["estimate"]["wall_seconds"]
    return {
        "label": label, "repo": repo, "imports_from": where, "commit": commit,
        "study": name, "load_before": load_before, "load_after": os.getloadavg(),
        "plan_seconds": plan_seconds, "run_seconds": run_seconds, "estimate_seconds": estimate,
        "run_over_estimate": run_seconds / estimate, "pack_tasks": len(packs),
        "pack_task_seconds": pack_seconds, "train_seconds": train,
        "train_share": train / pack_seconds if pack_seconds else float("nan"),
        "compile_seconds": compile_seconds, "evaluation_seconds": evaluation,
        "setup_seconds": setup, "group_host_seconds": groups - train - evaluation,
        "outside_seconds": pack_seconds - groups - setup - compile_seconds,
        "light_task_seconds": sum(t["end"] - t["start"] for t in light),
        "two_packs_at_once_seconds": _overlap(packs),
        "first_task_after": min((t["start"] for t in tasks), default=started) - started,
        "trials": len(metas), "trained_steps": sum(m.get("steps") or 0 for m in metas),
        "step_time_run_over_probe": slowdown,
        "packs": [{"pack": t["pack"], "start": round(t["start"] - started, 2),
                   "seconds": round(t["end"] - t["start"], 2)}
                  for t in sorted(packs, key=lambda t: t["start"])],
        "light_tasks": [{"task": t["function"], "start": round(t["start"] - started, 2),
                         "seconds": round(t["end"] - t["start"], 2)} for t in light],
        "store": store,
    }


ROWS = [
    ("commit", "commit", "{}"),
    ("load average before / after (1 min)", None, None),
    ("run --local wall time (s)", "run_seconds", "{:.1f}"),
    ("plan's wall-time estimate (s)", "estimate_seconds", "{:.1f}"),
    ("run / estimate", "run_over_estimate", "{:.2f}"),
    ("plan wall time (s)", "plan_seconds", "{:.1f}"),
    ("pack tasks", "pack_tasks", "{}"),
    ("pack task time, summed (s)", "pack_task_seconds", "{:.1f}"),
    ("  training: trials' train_seconds (s)", "train_seconds", "{:.1f}"),
    ("  share of pack task time training", "train_share", "{:.1%}"),
    ("  evaluation (s)", "evaluation_seconds", "{:.1f}"),
    ("  compilation (s)", "compile_seconds", "{:.1f}"),
    ("  pack setup: data, models (s)", "setup_seconds", "{:.1f}"),
    ("  host work in the groups (s)", "group_host_seconds", "{:.1f}"),
    ("  process outside train_together (s)", "outside_seconds", "{:.1f}"),
    ("light tasks, summed (s)", "light_task_seconds", "{:.1f}"),
    ("two packs at once (s)", "two_packs_at_once_seconds", "{:.1f}"),
    ("trials / trained steps", None, None),
]


def show(results: list[dict]) -> None:
    width = 14
    print(f"{'':38}" + "".join(f"{r['label']:>{width}}" for r in results))
    for title, key, form in ROWS:
        if key is None and title.startswith("load"):
            cells = [f"{r['load_before'][0]:.2f}/{r['load_after'][0]:.2f}" for r in results]
        elif key is None:
            cells = [f"{r['trials']}/{r['trained_steps']:,}" for r in results]
        else:
            cells = [form.format(r[key]) for r in results]
        print(f"{title:38}" + "".join(f"{c:>{width}}" for c in cells))
    sizes = sorted({b for r in results for b in r["step_time_run_over_probe"]})
    for b in sizes:
        cells = [f"{r['step_time_run_over_probe'].get(b, float('nan')):.2f}" for r in results]
        print(f"{'step time run/probe, batch ' + str(b):38}" + "".join(f"{c:>{width}}" for c in cells))
    print("pack order (start s: pack, seconds):")
    for r in results:
        print(f"  {r['label']}: " + "; ".join(f"{p['start']:.0f}: {p['pack']} {p['seconds']:.0f}"
                                            for p in r["packs"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", action="append", required=True, metavar="LABEL=REPO[,PYTHON]",
                        help="a code under test: its repository and python (default "
                             "REPO/.venv/bin/python); repeatable, runs interleave in this order")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each code (interleaved)")
    parser.add_argument("--study", default="quickstart", help="SPEC and flags, one string")
    parser.add_argument("--work", default=None, help="where the stores go (default: a temp dir)")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args()
    work = os.path.abspath(args.work or tempfile.mkdtemp(prefix="pack-share-"))
    os.makedirs(work, exist_ok=True)
    codes = []
    for item in args.code:
        label, _, rest = item.partition("=")
        repo, _, python = rest.partition(",")
        repo = os.path.abspath(repo)
        codes.append((label, repo, python or os.path.join(repo, ".venv", "bin", "python")))
    results = []
    for _ in range(args.rounds):
        for label, repo, python in codes:
            results.append(measure(label, repo, python, args.study, work))
            print(f"{label}: run {results[-1]['run_seconds']:.0f} s, estimate "
                  f"{results[-1]['estimate_seconds']:.0f} s, share "
                  f"{results[-1]['train_share']:.1%}", flush=True)
    show(results)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
