"""End to end: `batchscale run --local` runs the real pipeline through kfp.local on real
digits images, writes the report, re-uses finished trials, and `report` rebuilds it."""

import json
import os
import subprocess
import sys
import time

import pytest
import yaml

from tests.conftest import tiny_spec_dict
from tests.tensorboard_events import check_study_runs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _batchscale(*args, cwd):
    started = time.time()
    out = subprocess.run([sys.executable, "-m", "batchscale.cli", *args], cwd=cwd, capture_output=True,
                         text=True, timeout=600, env={**os.environ, "PYTHONPATH": ROOT})
    return out, time.time() - started


@pytest.mark.slow
def test_local_study_end_to_end_and_rerun(tmp_path):
    store = tmp_path / "store"
    spec_file = tmp_path / "tiny.yaml"
    spec_file.write_text(yaml.safe_dump(tiny_spec_dict(str(store))))
    out, first = _batchscale("run", "--local", str(spec_file), cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert "trials 4/4 done" in out.stdout
    assert "report: " + str(store / "tiny" / "report" / "report.html") in out.stdout

    report = store / "tiny" / "report"
    summary = json.loads((report / "summary.json").read_text())
    validation = [r for r in summary["steps_to_result"] if r["split"] == "val"]
    assert [r["batch_size"] for r in validation] == [16, 128]
    assert all(r["complete"] + r["infeasible"] == 2 for r in validation)
    assert summary["regimes"]["classification_error<0.2"]["fitted"] is False  # 2 batch sizes
    # time and cost to result on this machine, from the trials' own timings (each trial
    # trained alone on the CPU): figures, the fastest and cheapest named, here and on the console
    assert (report / "time_to_result.svg").exists() and (report / "cost_to_result.svg").exists()
    timed = summary["time_and_cost"]["summary"]
    fastest, cheapest = timed["fastest"]["batch_size"], timed["cheapest"]["batch_size"]
    assert {fastest, cheapest} <= {16, 128} and timed["device_kind"] == "cpu"
    assert f"fastest batch size {fastest}" in out.stdout and f"cheapest {cheapest}" in out.stdout
    profile = summary["time_and_cost"]["step_times"]
    assert {r["source"] for r in profile} <= {"trials", "trials (few)"}
    html = (report / "report.html").read_text()
    assert html.count('src="data:image/svg+xml;base64,') >= 4 and "http://" not in html
    assert (report / "steps_to_result.csv").exists() and (report / "summary.md").exists()
    assert (report / "goal_steps.csv").exists()  # aggregate folds goal detection in
    logs = list((tmp_path / ".batchscale" / "logs").glob("tiny-*.log"))
    assert logs and "Executing task" in logs[0].read_text()  # kfp's task logs went to the file

    metadata = sorted(store.glob("tiny/digits/fc_32/nesterov_momentum/*/*/metadata.json"))
    assert len(metadata) == 4
    # live curves: every trial's TensorBoard run, read back by TensorBoard's own reader
    assert check_study_runs(str(store), "tiny", tmp_path / "tensorboard-copy") == 4
    before = {p: p.read_bytes() for p in metadata}
    out, second = _batchscale("run", "--local", str(spec_file), cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert {p: p.read_bytes() for p in metadata} == before  # nothing retrained
    assert "] re-used 4 finished trials\n" in out.stdout  # and the console says so
    print(f"first run {first:.1f}s, re-run {second:.1f}s")

    (report / "report.html").unlink()
    out, _ = _batchscale("report", str(store / "tiny"), "--wide", cwd=tmp_path)
    assert out.returncode == 0 and "steps_to_result" in out.stdout  # every column, as named
    assert (report / "report.html").exists()


@pytest.mark.slow
def test_new_workload_from_a_spec_only_on_a_gcs_store(gcs_emulator, tmp_path):
    """A workload other than the quickstart's (8x8 digits, the fastest real data; ResNet-8
    and every other workload train in tests/integration/test_workload_training.py), named
    in a spec that gives no goal, search space or schedule (the workload's defaults fill
    them), runs through the same pipeline with a gs:// store (GCS emulator, real client in
    every task)."""
    root = f"gs://{gcs_emulator['bucket']}/e2e"
    spec_file = tmp_path / "toy.yaml"
    spec_file.write_text(yaml.safe_dump({
        "name": "toy", "store": root, "workload": {"dataset": "digits", "model": "fc_128_128"},
        "batch_sizes": [32], "trials_per_batch_size": 2, "max_steps": 10, "max_rounds": 2,
        "evaluation": {"train_examples": 200}}))  # two rounds: enough to see one added
    out, _ = _batchscale("run", "--local", str(spec_file), cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert f"report: {root}/toy/report/report.html" in out.stdout

    from batchscale.analysis.reading.study_reader import load_study
    from batchscale.store.layout import StudyStore
    from batchscale.validation import parse_spec

    store = StudyStore(root)
    assert store.has_dataset("digits")
    spec = parse_spec(store.read_spec_dict("toy"))
    assert spec.goals[0].value == 0.1 and {p.name for p in spec.search_space} == {"learning_rate", "momentum"}
    study = load_study(f"{root}/toy")
    assert study.model == "fc_128_128"
    # the pipeline's search rounds ran: 10 steps are too few for the goal, so later rounds
    # re-searched wider ranges (trials 3, 4, ...), each trial trained and recorded
    rounds = store.read_rounds(spec, 32)
    ids = [i for r in rounds for i in r.trial_ids]
    assert rounds[0].trial_ids == range(1, 3) and ids == list(range(1, len(ids) + 1))
    assert len(rounds) == 2 and rounds[1].reason.startswith(("re-search", "top-up")), rounds
    assert study.trials[["batch_size", "trial_id"]].values.tolist() == [[32, i] for i in ids]
    assert set(study.trials["status"]) <= {"COMPLETE", "INFEASIBLE"}
    assert study.measurements.groupby("trial_id").size().to_dict().keys() == set(ids)
    assert "steps_to_result" in store.fs.read_text("toy/report/steps_to_result.csv")
    assert "trial_id" in store.fs.read_text("toy/report/goal_steps.csv")  # goal detection folded in
    assert check_study_runs(root, "toy", tmp_path / "tensorboard-copy") == len(ids)  # on gs:// too
