"""`batchscale report` end to end: our study and the paper's layout, local and gs:// (GCS
emulator, real client); the HTML rendered by a real headless Chromium with no network."""

import json
import math
import os

import numpy as np
import pytest

from batchscale.analysis.report import REPORT_FILES, kfp_metrics, report_study
from batchscale.analysis.results import open_study
from batchscale.cli.main import main
from batchscale.store.filesystem import open_root
from tests import paper_database as db
from tests.browser import chromium, run_probe
from tests.synthetic import synthetic_crossings

FIGURES_PAPER = {"steps_to_result.svg", "train_vs_val.svg", "budget_steps.svg",
                 "budget_examples.svg", "optimal_metaparameters.svg", "lr_momentum.svg",
                 "best_trial_curves.svg"}


def _objects(root):
    fs = open_root(root)
    return {p: fs.read_bytes(p) for p in fs.list_files("", recursive=True)}


def test_report_of_our_study_on_gcs(gcs_study, capsys):
    assert main(["report", f"{gcs_study}/tiny", "--resamples", "100"]) == 0
    out = capsys.readouterr().out
    assert "goal classification_error<0.2 (val)" in out
    assert "no regime fit" in out  # two batch sizes cannot determine S_min and B*
    assert f"report: {gcs_study}/tiny/report/report.html" in out
    fs = open_root(f"{gcs_study}/tiny/report")
    doc = json.loads(fs.read_text("summary.json"))
    expected = open_study(f"{gcs_study}/tiny").steps_to_result()
    got = [r for r in doc["steps_to_result"] if r["split"] == "val"]
    assert [r["steps_to_result"] for r in got] == [
        None if math.isnan(v) else v for v in expected["steps_to_result"]]
    assert set(REPORT_FILES) | {"steps_to_result.svg", "lr_momentum.svg"} <= set(fs.list_files(""))
    # goal detection folded into the report: goal_steps.csv is the results API's goal_steps()
    goal_steps = open_study(f"{gcs_study}/tiny").goal_steps()
    assert fs.read_text("goal_steps.csv") == goal_steps.to_csv(index=False)


def test_report_of_the_paper_layout_on_gcs_touches_only_the_report(gcs_root, capsys):
    url = db.write_paper_database(gcs_root)
    before = _objects(gcs_root)
    assert main(["report", gcs_root, "--goal", "classification_error<0.2",
                 "--goal", "classification_error<0.1", "--resamples", "50"]) == 0
    after = _objects(gcs_root)
    new = {p for p in after if p not in before}
    goals = "goal-classification_error-below-0.2+classification_error-below-0.1"  # beside its own
    assert all(p.startswith(f"{db.WORKLOAD}/report/{goals}/") for p in new)
    assert all(after[p] == before[p] for p in before)
    doc = json.loads(open_root(f"{url}/report/{goals}").read_text("summary.json"))
    for row in doc["steps_to_result"]:
        answer = db.ANSWERS[row["goal"]][row["split"]][row["batch_size"]]
        assert (row["steps_to_result"], row["best_trial"]) == answer
    assert doc["layout"] == "paper" and doc["workload"]["dataset"] == "fashion_mnist"
    assert list(doc) == ["study", "location", "layout", "workload", "counted_statuses", "goals",
                         "steps_to_result", "regimes", "optimal_metaparameters", "budgets",
                         "trial_counts", "search_space_warnings", "notes", "expected_trials",
                         "unfinished", "damaged", "protocol", "censoring", "search_rounds",
                         "search_round_notes", "training_cost", "time_and_cost",
                         "critical_batch_sizes", "answer", "robustness_k", "robustness",
                         "metaparameter_laws"]
    assert doc["protocol"] == "full"  # the paper's database: every trial to its budget
    assert doc["expected_trials"] is None and doc["unfinished"] == []  # no spec
    assert doc["damaged"] == []
    assert f"report: {url}/report/{goals}/report.html" in capsys.readouterr().out


@pytest.mark.parametrize("where", ["local", "gcs"])
def test_the_report_of_an_unfinished_study_names_its_missing_trials(where, tmp_path, request,
                                                                    capsys):
    """Pack tasks failed: some trials are missing, some INCOMPLETE (one with a checkpoint, one
    with a damaged one); the report is still written and says what is left and how to resume."""
    from tests.unit.test_completeness import partial_study

    root = str(tmp_path / "store") if where == "local" else request.getfixturevalue("gcs_root")
    spec, store = partial_study(root)
    assert main(["report", store.url(spec.name), "--resamples", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    said = [line for line in out if line.startswith("unfinished: ")]
    assert len(said) == 1 and said[0].startswith("unfinished: 7 of 10 trials (2 resumable from a checkpoint)")
    assert any(line.startswith("  Caution: 7 of 10 trials unfinished") for line in out[-3:])
    fs = open_root(store.url(f"{spec.name}/report"))
    doc = json.loads(fs.read_text("summary.json"))
    assert doc["expected_trials"] == 10
    assert [(u["batch_size"], u["trial_id"], u["status"], u["resume_step"])
            for u in doc["unfinished"]] == [
        (16, 2, "INCOMPLETE", 120), (16, 4, "INCOMPLETE", None), (16, 5, "MISSING", None),
        (64, 2, "INCOMPLETE", None), (64, 3, "MISSING", None), (64, 4, "MISSING", None),
        (64, 5, "MISSING", 30)]
    markdown = fs.read_text("summary.md")
    assert markdown.index("## Unfinished trials") < markdown.index("## Regimes")
    assert "| 64 | 4 | 3–5 | 2 | 5@30 |" in markdown and "batchscale run --local SPEC" in markdown
    assert "Unfinished trials</h2>" in fs.read_text("report.html")
    result, _ = report_study(store.url(spec.name), resamples=0, num_trials=1)
    assert kfp_metrics(result)["unfinished_trials"] == 7.0  # --trials does not hide any


def test_report_to_another_folder_with_budgets_and_first_trials(tmp_path):
    url = db.write_paper_database(str(tmp_path / "db"))
    out = tmp_path / "out"
    assert main(["report", url, "--out", str(out), "--trials", "2", "--goal",
                 "classification_error<0.2", "--step-budget", "100", "--example-budget", "400",
                 "--resamples", "0"]) == 0
    assert not (tmp_path / "db" / db.WORKLOAD / "report").exists()
    doc = json.loads((out / "summary.json").read_text())
    val = {r["batch_size"]: (r["steps_to_result"], r["best_trial"])
           for r in doc["steps_to_result"] if r["split"] == "val"}
    assert val == db.FIRST_TWO_VAL_02
    budgets = {(r["kind"], r["budget"], r["batch_size"]): r["best_value"] for r in doc["budgets"]}
    assert budgets[("steps", 100, 2)] == 0.25 and budgets[("examples", 400, 8)] == 0.15
    assert set(os.listdir(out)) >= FIGURES_PAPER - {"budget_steps.svg"} | {"report.html"}


def test_bad_report_arguments_are_one_line(tmp_path, capsys):
    url = db.write_paper_database(str(tmp_path))
    assert main(["report", url, "--statuses", "DONE"]) == 2
    assert main(["report", url, "--goal", "error"]) == 2
    assert main(["report", str(tmp_path / "nothing")]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 3 and all(e.startswith("batchscale: error: ") for e in errors)
    assert "--statuses" in errors[0] and "METRIC<VALUE" in errors[1] and "does not exist" in errors[2]


def test_regimes_in_the_report_recover_a_known_curve(tmp_path):
    rng = np.random.default_rng(7)
    batch_sizes = 2 ** np.arange(1, 13)
    crossings = synthetic_crossings(400.0, 128.0, batch_sizes, 40, rng)
    url = db.write_synthetic_database(str(tmp_path), crossings)
    result, written = report_study(url, resamples=200)
    fit = result.fits["classification_error<0.01"]
    assert fit.fitted
    assert abs(fit.s_min.value / 400 - 1) < 0.1 and abs(fit.b_star.value / 128 - 1) < 0.1
    assert fit.s_min.low <= fit.s_min.value <= fit.s_min.high
    metrics = kfp_metrics(result)
    assert metrics["val/classification_error<0.01/b_star"] == pytest.approx(fit.b_star.value)
    assert metrics["val/classification_error<0.01/steps_to_result/b2"] > 0
    page = open(written["html"]).read()
    assert "B*" in page and "Methods" in page


def test_html_report_renders_every_figure_offline(tmp_path):
    chromium()
    url = db.write_paper_database(str(tmp_path / "db"))
    _, written = report_study(url, goals=["classification_error<0.2"], resamples=0,
                              out=str(tmp_path / "report"))
    html = open(written["html"]).read()
    assert "http://" not in html and "https://" not in html
    figures = run_probe(html, "[...document.images].map(i => [i.complete, i.naturalWidth, "
                              "i.naturalHeight])", tmp_path)
    svgs = [f for f in os.listdir(tmp_path / "report") if f.endswith(".svg")]
    assert len(figures) == len(svgs) >= 6
    for complete, width, height in figures:
        assert complete and width > 300 and height > 200
