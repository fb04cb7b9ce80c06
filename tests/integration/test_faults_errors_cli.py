"""Honest errors through the real ``batchscale run --local`` (a child process, kfp.local):
a trial folder copied to a new id no longer blocks the study with an internal error shown
as bad input, and a pack task killed with SIGKILL ends the run with one line saying so.
(The copied folder's trial is trained in this process, as the pipeline's stage 1 trains it,
to save a CLI run: the run that meets the copy is the CLI's.)
tests/unit/test_faults_errors.py has the cases that need no training.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from batchscale.rounds.planner import plan_stage
from batchscale.search.packs import pack_trials
from batchscale.store.layout import StudyStore
from batchscale.training.packs import run_pack
from batchscale.validation import parse_spec
from tests.conftest import share_datasets, tiny_spec_dict

ROOT = Path(__file__).resolve().parents[2]


def _spec_dict(store: Path, **changes) -> dict:
    return tiny_spec_dict(str(store), **{
        "max_steps": 120, "batch_sizes": [128], "trials_per_batch_size": 1, **changes})


def _store(tmp_path, digits_store) -> Path:
    store = tmp_path / "store"
    if not store.exists():
        store.mkdir()
        share_datasets(digits_store, str(store))
    return store


def _start(tmp_path, digits_store, **changes) -> tuple[subprocess.Popen, Path]:
    store = _store(tmp_path, digits_store)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(_spec_dict(store, **changes)))
    child = subprocess.Popen([sys.executable, "-m", "batchscale.cli", "run", "--local", str(spec)],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True)
    return child, store


def _finish(child: subprocess.Popen, timeout: float = 300) -> tuple[str, str]:
    try:
        return child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        raise


def _train_in_this_process(store: Path) -> None:
    """The study trained as ``run --local`` trains it (stage 1's plan, then its packs), in
    this process: what the test needs is a finished trial in the store, and the CLI run
    that checks the copy is the second one."""
    spec = parse_spec(_spec_dict(store))
    study_store = StudyStore(str(store))
    for pack in plan_stage(spec, study_store, 1, pack_size=4, log=lambda *_: None):
        rounds = study_store.read_rounds(spec, pack.batch_size)
        run_pack(spec, pack_trials(spec, pack, rounds), study_store, log=lambda *_: None)


def test_a_copied_trial_folder_is_left_out_and_named(tmp_path, digits_store):
    store = _store(tmp_path, digits_store)
    _train_in_this_process(store)
    trials = store / "tiny" / "digits" / "fc_32" / "nesterov_momentum" / "128"
    assert json.loads((trials / "1" / "metadata.json").read_text())["status"] == "COMPLETE"
    shutil.copytree(trials / "1", trials / "3")  # as a user would copy a finished trial
    child, _ = _start(tmp_path, digits_store)
    out, err = _finish(child)
    copied = trials / "3" / "metadata.json"
    assert child.returncode == 3, err  # damaged store, not bad input (2) nor a failed run
    assert err == (f"batchscale: warning: {copied} has trial_id 1 but sits in the folder of "
                   "trial_id 3 (copied from another trial?); trial 128/3 left out\n")
    assert "report: " in out and "trials 1/1 done" in out


def _pack_task(store: Path) -> int | None:
    """The pid of a kfp train-pack task's Python process training into ``store``."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if args[1:3] == ["-m", "kfp.dsl.executor_main"] and '"lane"' in "".join(args) \
                and str(store) in "".join(args):  # not the `sh -ec` around it
            return int(pid)
    return None


def test_a_killed_pack_says_why_in_one_line(tmp_path, digits_store):
    child, store = _start(tmp_path, digits_store, max_steps=20000, protocol="full",
                          goals=[{"metric": "classification_error", "value": 0.01}])
    deadline = time.monotonic() + 240
    pid = None
    while pid is None and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
        pid = _pack_task(store)
    if pid is None:
        os.killpg(child.pid, signal.SIGKILL)
        pytest.fail("no train-pack task appeared")
    time.sleep(1.0)  # into its training
    os.kill(pid, signal.SIGKILL)
    out, err = _finish(child, timeout=400)
    assert child.returncode == 1
    last = err.strip().splitlines()[-1]
    assert last.startswith("batchscale: error: the local pipeline failed after "), err
    log = Path(last.rsplit("full log: ", 1)[-1]).read_text()
    assert ": task train-pack failed: Killed (SIGKILL: out of memory, or kill -9); full log: " in last, \
        log[-3000:]
    assert "see the log" not in out + err
