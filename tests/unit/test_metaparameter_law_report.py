"""The report's "Metaparameters against batch size": a study in the paper's layout whose
best learning rate grows as √B gets the square-root law, boxes for 2x the largest and half
the smallest batch size, a figure, a section in every medium and summary.json's
``metaparameter_laws``; too few batch sizes say so instead."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from batchscale.analysis.figures.plots_laws import LAWS_FIGURE, metaparameter_laws_plot
from batchscale.analysis.pages.law_pages import TITLE, section_of
from batchscale.analysis.pages.report_summary import plain
from batchscale.analysis.pages.sections import render_console, render_html, render_markdown
from batchscale.analysis.reading.study_reader import load_study
from batchscale.analysis.statistics.metaparameter_law_fits import LAWS_CAPTION, edge_notes, metaparameter_laws
from batchscale.analysis.statistics.steps import crossings, steps_to_result
from batchscale.store.filesystem import open_root
from tests import paper_database as db

WORKLOAD = "mnist/fc/momentum"
GOAL = "classification_error<0.1"
SIZES = (8, 16, 32, 64, 128)
# each batch size: three trials at 1/2, 1 and 2 times 0.01·√B; the middle one first beats the goal
FACTORS = {1: (0.5, 300), 2: (1.0, 100), 3: (2.0, 200)}


def _write(fs, sizes) -> str:
    for b in sizes:
        base = f"{WORKLOAD}/{b}"
        fs.write_text(f"{base}/study.json", json.dumps({
            "batch_size": b, "dataset": "mnist", "model": "fc", "optimizer": "momentum",
            "train_steps": 0, "parameter_configs": db.PARAMETER_CONFIGS}))
        for trial_id, (factor, crossing) in FACTORS.items():
            params = {"learning_rate": 0.01 * math.sqrt(b) * factor * (1 + 0.02 * (b % 3)),
                      "momentum": 0.9}
            fs.write_text(f"{base}/{trial_id}/metadata.json", json.dumps({
                "parameters": params, "status": "COMPLETE", "steps": 400, "trial_id": trial_id}))
            rows = [(s, 0.05 if s >= crossing else 0.5) for s in (0, 100, 200, 300, 400)]
            lines = ["step,train/classification_error,val/classification_error"]
            lines += [f"{s},{v},{v}" for s, v in rows]
            fs.write_text(f"{base}/{trial_id}/measurements.csv", "\n".join(lines) + "\n")
    return fs.url(WORKLOAD)


def _laws(location: str):
    study = load_study(location, goals=[GOAL])
    goal = study.goals[0]
    return metaparameter_laws(study, study.trials, crossings(study, goal),
                              steps_to_result(study, goal))


@pytest.fixture(scope="module")
def laws(tmp_path_factory):
    return _laws(_write(open_root(str(tmp_path_factory.mktemp("laws"))), SIZES))


def test_the_square_root_law_is_chosen_and_boxes_proposed(laws):
    assert laws.chosen["learning_rate"].form == "sqrt"
    assert [b for b, _, _ in laws.boxes] == [256, 4]
    up = dict((p.name, p) for p in laws.boxes[0][1])
    centre = math.sqrt(up["learning_rate"].min * up["learning_rate"].max)
    assert centre == pytest.approx(0.01 * math.sqrt(256), rel=0.1)
    assert up["momentum"] == laws.space[1]  # fixed at 0.9 in every best trial: kept


def test_the_section_renders_in_every_medium(laws):
    section = section_of(laws, (metaparameter_laws_plot(laws, "t"), LAWS_CAPTION))
    html, markdown = "\n".join(render_html(section)), "\n".join(render_markdown(section))
    console = "\n".join(render_console(section, width=100))
    for text in (html, markdown, console):
        assert TITLE in text and "learning_rate ∝ √B" in text and "fitted box for batch size 256" in text
    assert "<figure" in html and LAWS_FIGURE in markdown
    assert "Proposed search boxes" in markdown and "| 256 | learning_rate | log |" in markdown


def test_summary_json_form_of_the_laws(laws):
    laws = json.loads(json.dumps(plain(laws.to_dict()), allow_nan=False))
    assert laws["chosen"]["learning_rate"] == "sqrt"
    assert laws["batch_sizes"] == list(SIZES)
    assert {f["form"] for f in laws["fits"]["learning_rate"]} == {
        "constant", "linear", "sqrt", "power", "saturating"}
    assert laws["proposed_boxes"][0]["batch_size"] == 256


def test_edge_warnings_become_notes_of_the_laws(laws):
    warnings = [{"batch_size": 64, "parameter": "learning_rate"},
                {"batch_size": 8, "parameter": "learning_rate"}, {"batch_size": 8, "parameter": "x"}]
    notes = edge_notes(warnings, ["learning_rate", "momentum"])
    assert notes == ["best learning_rate at an edge of its searched range at batch size 8, 64: the "
                     "optimum there may lie outside, so the laws through those points follow the "
                     "range, not the optimum"]
    shown = "\n".join(render_markdown(section_of(replace(laws, notes=notes), None)))
    assert "- best learning_rate at an edge" in shown


def test_too_few_batch_sizes_say_so(tmp_path):
    laws = _laws(db.write_paper_database(str(tmp_path)))
    assert not laws.fitted and laws.reason == "needs 3 batch sizes with a best trial, has 2"
    assert [p.name for p in laws.space] == ["learning_rate", "momentum"]  # the paper's ranges
    shown = render_markdown(section_of(laws, None))
    assert "No metaparameter laws: needs 3 batch sizes with a best trial, has 2." in shown
    figure = metaparameter_laws_plot(laws, "t")
    assert b"<svg" in figure and b"no laws: needs 3" in figure
