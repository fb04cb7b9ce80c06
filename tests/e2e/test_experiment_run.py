"""End to end: an experiment through `batchscale run --local` (kfp.local, real digits
images; two studies of 2 batch sizes x 2 trials, the least that makes one): stopped half
way and run again, it re-uses every finished trial; each of its studies is a valid study
in the paper's layout whose own report gives the table the experiment wrote; `report` of
the experiment's folder rebuilds the comparison unchanged."""

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import yaml

from batchscale.cli.main import main
from tests.conftest import tiny_spec_dict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = {**os.environ, "PYTHONPATH": ROOT}


def _batchscale(*args, cwd):
    return subprocess.run([sys.executable, "-m", "batchscale.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600, env=ENV)


def _finished(folder):
    """Trial files (metadata, measurements) of every finished trial under ``folder``."""
    out = {}
    for meta in folder.glob("*/digits/fc_32/*/*/*/metadata.json"):
        if json.loads(meta.read_text()).get("status") in ("COMPLETE", "INFEASIBLE"):
            measurements = meta.parent / "measurements.csv"
            out[meta] = (meta.read_bytes(), measurements.read_bytes() if measurements.exists() else b"")
    return out


@pytest.mark.slow
def test_experiment_stopped_half_way_resumes_and_each_study_stands_alone(tmp_path):
    base = tiny_spec_dict(str(tmp_path / "unused"))  # batch sizes 16 and 128, 2 trials each
    del base["name"], base["store"]
    spec_file = tmp_path / "exp.yaml"
    spec_file.write_text(yaml.safe_dump({
        "experiment": "opt", "store": str(tmp_path / "store"), "base": base,
        "axis": {"optimizer": ["sgd", "nesterov_momentum"]}}))
    folder = tmp_path / "store" / "opt"
    child = subprocess.Popen([sys.executable, "-m", "batchscale.cli", "run", "--local", str(spec_file)],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=ENV)
    deadline = time.time() + 300
    while len(_finished(folder)) < 2 and child.poll() is None and time.time() < deadline:
        time.sleep(0.5)
    child.send_signal(signal.SIGTERM)  # half way: stop the run (the CLI ends its pipeline)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 128 + signal.SIGTERM, out[-2000:] + err[-2000:]
    before = _finished(folder)
    assert 2 <= len(before) < 8, len(before)

    again = _batchscale("run", "--local", str(spec_file), cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    after = _finished(folder)
    assert len(after) == 8
    assert {p: after[p] for p in before} == before  # every finished trial re-used, byte for byte
    # and the console says so (its count is what the first poll found done, which on a
    # busy machine may include a trial the re-run itself finished before that poll)
    said = re.search(r"re-used (\d+) finished trials", again.stdout)
    assert said and len(before) <= int(said[1]) < 8, again.stdout[-2000:]
    assert (folder / "experiment.json").exists()
    comparison = folder / "comparison"
    assert (comparison / "comparison.html").exists() and (comparison / "comparison.json").exists()
    assert (comparison / "compare_kth_best.svg").exists()  # the robustness overlay

    for label in ("sgd", "nesterov_momentum"):
        # the paper's layout: <study>/<dataset>/<model>/<optimizer>/<batch size>/study.json
        # and <trial>/metadata.json + measurements.csv
        workload = folder / label / "digits" / "fc_32" / label
        assert sorted(int(p.name) for p in workload.iterdir() if p.is_dir()) == [16, 128]
        paper = json.loads((workload / "16" / "study.json").read_text())
        assert paper["batch_size"] == 16 and paper["optimizer"] == label
        inside = list(csv.DictReader(open(folder / label / "report" / "steps_to_result.csv")))
        assert main(["report", str(folder / label), "--out", str(tmp_path / f"alone-{label}")]) == 0
        assert list(csv.DictReader(open(tmp_path / f"alone-{label}" / "steps_to_result.csv"))) == inside

    findings = json.loads((comparison / "comparison.json").read_text())
    (comparison / "comparison.html").unlink()
    assert main(["report", str(folder)]) == 0
    assert (comparison / "comparison.html").exists()
    assert json.loads((comparison / "comparison.json").read_text()) == findings
