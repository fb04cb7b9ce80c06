"""Leases that would block a trial for ever, or crash a run, and waits nobody saw (issue 26).

Built as a forger, a crash or a second writer leaves them in the store:

- a lease of another host whose expiry lies far in the future (a forged file, a writer
  whose clock runs ahead) binds no longer than ``lease_seconds`` after the pack first saw
  it: the trial is taken over and the study ends with the uninterrupted result;
- a lease file that is no lease record is named in one line and taken over at once;
- while another live writer holds a trial, ``run --local``'s console says which trials
  wait on whom and until when; once it gives them back the study ends as uninterrupted.

The unit tests (tests/unit/test_leases.py, test_lease_waits.py) cover each malformed kind
and the renewal window; these run the real pack and the real ``run --local``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import yaml

from batchscale.search.trials import make_trials
from batchscale.store.layout import StudyStore
from batchscale.store.leases import LEASES_DIR, Leases, lease_dir
from batchscale.training.packs import run_pack
from batchscale.validation import parse_spec
from tests.conftest import share_datasets, tiny_spec_dict, trial_histories

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FORGED = {"owner": "pod-7:1:forged", "host": "pod-7", "pid": 1, "expires": 4102444800.0}  # 2100


def _spec_dict(root: str) -> dict:
    return tiny_spec_dict(root, name="leased", batch_sizes=[16], trials_per_batch_size=2,
                          max_steps=150, parallelism=1)


def _prepared(root: str, digits_store: str):
    os.makedirs(root, exist_ok=True)
    share_datasets(digits_store, root)
    spec, store = parse_spec(_spec_dict(root)), StudyStore(root)
    store.register_study(spec)
    return spec, store


@pytest.fixture(scope="module")
def reference(digits_store, tmp_path_factory):
    """The uninterrupted pack's trial histories."""
    spec, store = _prepared(str(tmp_path_factory.mktemp("uninterrupted")), digits_store)
    run_pack(spec, make_trials(spec), store, log=lambda *_: None)
    return trial_histories(store, spec)


@pytest.mark.timeout(120)
def test_a_far_future_lease_is_taken_over_within_the_bound_and_a_malformed_one_at_once(
        reference, digits_store, tmp_path):
    spec, store = _prepared(str(tmp_path / "store"), digits_store)
    first, second = make_trials(spec)
    far = f"{lease_dir(spec.name, 16, first.trial_id)}/0.json"
    malformed = f"{lease_dir(spec.name, 16, second.trial_id)}/0.json"
    store.fs.write_text(far, json.dumps(FORGED))
    store.fs.write_text(malformed, json.dumps({**FORGED, "expires": "soon"}))
    said = []
    started = time.monotonic()
    run_pack(spec, [first, second], store, log=said.append, lease_seconds=3.0)
    took = time.monotonic() - started

    assert trial_histories(store, spec) == reference
    assert store.fs.list_files(f"{spec.name}/{LEASES_DIR}", recursive=True) == []
    text = "\n".join(said)
    assert said.count(f"lease: lease file {store.fs.url(malformed)} is malformed "
                      f'(expires is not a number: "soon"); treated as expired') == 1, text
    assert "lease: trial 16/1 waits on another writer (pod-7:1:forged); taken over by " in text
    assert ("lease: trial 16/1 taken over from pod-7:1:forged (not renewed for 3 s since this "
            "writer first saw it)") in said, text
    assert took < 3.0 + 60, f"the forged lease held the pack {took:.0f} s"


@pytest.mark.timeout(240)
def test_run_local_says_which_trials_wait_on_another_writer_until_when(reference, digits_store,
                                                                       tmp_path):
    """A live writer (this test, renewing) holds both trials as ``run --local`` starts;
    it gives them back once the console has said so."""
    root = str(tmp_path / "store")
    spec, store = _prepared(root, digits_store)
    spec_file = tmp_path / "leased.yaml"
    spec_file.write_text(yaml.safe_dump(_spec_dict(root)))
    other = Leases(store.fs, lambda *_: None, lease_seconds=60)
    for trial in make_trials(spec):
        assert other.acquire(lease_dir(spec.name, 16, trial.trial_id))
    proc = subprocess.Popen([sys.executable, "-m", "batchscale.cli", "run", "--local", str(spec_file),
                             "--work-dir", str(tmp_path / "w")], cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": ROOT})
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if "waiting on another writer until" in line:
                other.release_all()  # seen: the other writer is done with them
        proc.wait(timeout=60)
    finally:
        other.release_all()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = "\n".join(lines)
    assert proc.returncode == 0, out
    said = [line.split("] ", 1)[1] for line in lines if line.startswith("[")]
    wait = next(line for line in said if "wait on another writer" in line)
    assert wait.startswith(f"training: trials 16/1, 16/2 wait on another writer ({other.owner}); "
                           "taken over by "), out
    until = wait.split("taken over by ", 1)[1][:8]
    assert any(line.startswith("training: trials 0/2 done, 2 waiting on another writer until "
                               f"{until} | ") for line in said), out
    assert said.index(wait) < min(i for i, line in enumerate(said) if "2/2 done" in line)
    assert trial_histories(store, spec) == reference
    assert store.fs.list_files(f"{spec.name}/{LEASES_DIR}", recursive=True) == []
