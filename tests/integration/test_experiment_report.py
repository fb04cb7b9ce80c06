"""report_experiment end to end on synthetic studies in a store (paper-layout studies in
the experiment's folder, tests/paper_database.py): the files exist, the pages state the
findings first, the metrics carry the fits, and a real headless Chromium shows the page
with the findings first and every figure loaded (one comparison for all: its bootstrap
fits and figures are the cost)."""

import json

import numpy as np

from batchscale.analysis.experiment import format_experiment, report_experiment
from batchscale.core.experiment import Axis, ExperimentSpec, ExperimentStudy
from tests import paper_database as db
from tests.browser import run_probe
from tests.synthetic import synthetic_crossings

PROBE = ("{first: document.querySelector('h2').textContent, "
         "findings: document.querySelector('ul').innerText, "
         "images: document.querySelectorAll('figure img').length, "
         "loaded: Array.from(document.querySelectorAll('figure img'))"
         ".every(function (i) { return i.complete && i.naturalWidth > 0; })}")

SIZES = [2 ** k for k in range(1, 10)]
WORKLOADS = {"sgd": ("mnist/simple_cnn_base/sgd", 400, 32),
             "momentum": ("mnist/simple_cnn_base/momentum", 50, 256)}


def figure4_like(tmp_path) -> ExperimentSpec:
    """Two optimizers whose B* are 32x apart, written as studies of experiment fig4."""
    studies = []
    for i, (value, (workload, s_min, b_star)) in enumerate(WORKLOADS.items()):
        crossings = synthetic_crossings(s_min, b_star, SIZES, 8, np.random.default_rng(i),
                                        spread=0.1, failure=0.1)
        db.write_synthetic_database(str(tmp_path / "fig4"), crossings, workload=workload)
        studies.append(ExperimentStudy(workload, value, None))
    experiment = ExperimentSpec("fig4", str(tmp_path), Axis("optimizer", ("sgd", "momentum")),
                                tuple(studies), {}, normalize_at=2)
    return experiment


def test_report_experiment_writes_the_comparison_with_findings_first(tmp_path):
    result, written = report_experiment(figure4_like(tmp_path))

    folder = tmp_path / "fig4" / "comparison"
    for name in ("comparison.html", "comparison.md", "comparison.json", "comparison.csv",
                 "compare_steps_normalized.svg", "compare_steps.svg"):
        assert (folder / name).is_file(), name
    regime = next(f for f in result.findings if f.topic == "regime")
    assert regime.resolved, regime.sentence
    doc = json.loads((folder / "comparison.json").read_text())
    assert doc["findings"][0]["sentence"] == result.findings[0].sentence
    assert str(tmp_path) not in (folder / "comparison.json").read_text()
    markdown = written["pages"]["markdown"]
    assert markdown.index("## Findings") < markdown.index("## Regime fits")
    assert regime.sentence in markdown
    momentum = "mnist/simple_cnn_base/momentum"
    assert written["metrics"][f"{momentum}/b_star/low"] == result.fits[momentum].b_star.low
    assert written["metrics"]["findings_resolved"] == result.resolved >= 1
    console = format_experiment(result, width=100)
    assert regime.sentence in console and "b_star" in console
    shown = run_probe(written["pages"]["html"], PROBE, tmp_path)
    assert shown["first"] == "Findings"
    for finding in result.findings:
        assert finding.sentence in shown["findings"]
    assert shown["images"] >= 2 and shown["loaded"]
