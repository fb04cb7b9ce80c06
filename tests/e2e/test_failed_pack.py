"""A pack task fails mid-study: the pipeline still trains every other pack, then the fan-in
writes the report from the store, naming the trial that is missing.

The failure is injected from outside, as a damaged store would cause it: a regular file
sits where one trial's folder must be created, so writing that trial fails (also as root),
and only the pack holding it fails. Nothing in the product knows about the test.

The pipeline runs as ``batchscale run --local`` runs it, in a child process
(``batchscale.pipelines.local_run``, no retries): kfp.local in the test's own process
would write to its stdout after the test is over.
"""

import json
import os
import subprocess
import sys

import pytest

from batchscale.pipelines.task_log import TaskLog
from batchscale.search.trials import make_trials
from batchscale.store.layout import StudyStore
from batchscale.validation import parse_spec
from tests.conftest import share_datasets, tiny_spec_dict


@pytest.mark.slow
def test_a_failed_pack_still_ends_with_a_report_naming_the_missing_trial(digits_store, tmp_path):
    root = str(tmp_path / "store")
    os.makedirs(root)
    share_datasets(digits_store, root)
    spec = parse_spec(tiny_spec_dict(root, name="faulty", max_steps=20, pack_size=1))
    store = StudyStore(root)
    trials = make_trials(spec)
    broken = next(t for t in trials if (t.batch_size, t.trial_id) == (128, 2))
    blocker = os.path.join(root, store.trial_dir(spec, broken))
    os.makedirs(os.path.dirname(blocker))
    with open(blocker, "w") as fh:
        fh.write("not a folder")

    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec.to_dict()))
    run = subprocess.run([sys.executable, "-m", "batchscale.pipelines.local_run", str(spec_file),
                          str(tmp_path / "kfp")], capture_output=True, text=True, timeout=600)
    assert run.returncode != 0 and "FAILURE" in run.stdout + run.stderr  # the run failed ...
    # ... and `run --local`'s console reads that from this log as it is written: which task
    # failed, with the exception it died of
    log = tmp_path / "run.log"
    log.write_text(run.stdout + run.stderr)
    failed = [e for e in TaskLog(str(log)).read() if e.kind == "failed"]
    assert [e.task for e in failed] == ["train-pack"], failed
    assert failed[0].detail.split(":")[0].endswith("Error"), failed

    # ... yet every other pack trained, and aggregate ran after the failed loop
    assert [store.is_done(spec, t) for t in trials] == [t is not broken for t in trials]
    report = os.path.join(root, "faulty", "report")
    for name in ("report.html", "summary.json", "summary.md", "goal_steps.csv"):
        assert os.path.exists(os.path.join(report, name)), name
    with open(os.path.join(report, "summary.json")) as fh:
        summary = json.load(fh)
    val = [r for r in summary["steps_to_result"] if r["split"] == "val"]
    assert {r["batch_size"]: r["complete"] + r["infeasible"] for r in val} == {16: 2, 128: 1}
    # the report names the trial to resume, and how
    missing = [(r["batch_size"], r["trial_id"], r["status"]) for r in summary["unfinished"]]
    assert missing == [(128, 2, "MISSING")]
    with open(os.path.join(report, "summary.md")) as fh:
        page = fh.read()
    assert "Unfinished trials" in page and "1 MISSING" in page and "run the same study again" in page
