"""End to end: a stopping protocol added by a plugin (``BATCHSCALE_PLUGINS``), not by
batchscale, runs a study through ``validate``, ``run --local`` and ``report``: every
process of the study (the CLI, kfp.local's task subprocesses) imports the plugin and
finds the protocol by name in its spec. The plugin is tests/stand_ins/protocol_plugin.py:
``goal_alone``, a trial stops once it beats every goal."""

import json
import os
import subprocess
import sys

import pytest
import yaml

from tests.conftest import tiny_spec_dict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _batchscale(*args, cwd):
    """The CLI in a subprocess; it and kfp.local's tasks inherit the environment (the
    fixture's BATCHSCALE_PLUGINS) and import ``tests`` from the repository (PYTHONPATH)."""
    return subprocess.run([sys.executable, "-m", "batchscale.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": ROOT})


@pytest.mark.slow
def test_a_plugin_protocol_runs_a_study_and_the_report_names_it(protocol_plugin, tmp_path):
    from batchscale.core import protocols

    alone = protocols.find("goal_alone")  # the plugin, imported in this process as well
    store = tmp_path / "store"
    spec_file = tmp_path / "alone.yaml"  # 2 batch sizes x 2 trials, a goal fc_32 beats early
    spec_file.write_text(yaml.safe_dump(tiny_spec_dict(str(store), name="alone",
                                                       protocol="goal_alone")))

    out = _batchscale("validate", str(spec_file), cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout)["protocol"] == "goal_alone"
    refused = _batchscale("validate", str(spec_file), "--protocol", "fast", cwd=tmp_path)
    assert refused.returncode == 2 and "goal_alone (" + alone.summary + ")" in refused.stderr

    out = _batchscale("run", "--local", str(spec_file), cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert "trials 4/4 done" in out.stdout

    folders = sorted(store.glob("alone/digits/fc_32/nesterov_momentum/*"))
    assert len(folders) == 2
    for folder in folders:  # each batch size's study.json: the protocol's name
        study = json.loads((folder / "study.json").read_text())
        assert study["protocol"] == "goal_alone" and study["early_stopping"] is True
    metadata = [json.loads(p.read_text()) for p in sorted(store.glob("alone/*/*/*/*/*/metadata.json"))]
    assert len(metadata) == 4
    stopped = [m for m in metadata if m["status"] == "COMPLETE"]
    assert stopped and all(m["stop_reason"] in (protocols.STOP_GOAL, protocols.STOP_BUDGET)
                           for m in stopped)
    assert any(m["stop_reason"] == protocols.STOP_GOAL and m["steps"] < 300 for m in stopped)

    report = store / "alone" / "report"
    (report / "report.html").unlink()
    out = _batchscale("report", str(store / "alone"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads((report / "summary.json").read_text())
    assert summary["protocol"] == "goal_alone"
    html = " ".join((report / "report.html").read_text().split())
    assert "goal_alone" in html and alone.method in html  # the record's words (analysis)
