"""The calibration's arithmetic and record: predicted against fitted per study, the
per-predictor summary, the choice ``plan`` makes from it, calibration.json's round trip, and
its pages (no probe runs here: tests/integration/test_calibrate_command.py runs them)."""

from __future__ import annotations

import json
import math

import pytest

from batchscale.core.critical_batch_size import DEFINITIONS, CbsEstimate
from batchscale.planning.calibration import (
    Calibration,
    CalibrationRow,
    best_predictor,
    read_calibration,
    summarize,
    write_calibration,
)
from batchscale.planning.calibration_pages import console_lines, html, markdown, table, write_pages
from batchscale.store.filesystem import open_root


def row(study, name, predicted, fitted=100.0, low=None, high=None, examples=1000, sweep=100_000):
    low = predicted / 2 if low is None else low
    high = predicted * 2 if high is None else high
    return CalibrationRow(study, "mnist_5k / fc / sgd", "error<0.1",
                          CbsEstimate(name, predicted, low, high, 0.9, examples),
                          CbsEstimate("b_star_fit", fitted, fitted / 1.5, fitted * 1.5, 0.95),
                          sweep, "probed by calibrate")


def test_row_ratio_cover_overlap_and_share():
    r = row("a", "b_simple", 50.0, low=40.0, high=60.0, examples=2_000, sweep=100_000)
    assert r.ratio == pytest.approx(0.5)
    assert not r.covered  # 100 is outside [40, 60]
    assert r.overlap is False  # fitted [66.7, 150] vs [40, 60]
    assert r.share == pytest.approx(0.02)
    wide = row("a", "b_simple", 50.0, low=40.0, high=120.0)
    assert wide.covered and wide.overlap
    assert math.isnan(row("a", "b_simple", 50.0, examples=None).share)


def test_summary_scores_doublings_off_either_way():
    rows = [row("a", "b_simple", 25.0), row("b", "b_simple", 400.0), row("c", "b_simple", 100.0),
            row("a", "b_branched", 80.0), row("b", "b_branched", 125.0)]
    records = {r.name: r for r in summarize(rows)}
    simple, branched = records["b_simple"], records["b_branched"]
    assert simple.studies == 3 and simple.median_log2_error == pytest.approx(2.0)
    assert simple.within_2x == 1  # only c; 4x low and 4x high are both off by 2 doublings
    assert simple.median_ratio == pytest.approx(1.0)  # the median ratio alone would hide that
    assert branched.within_2x == 2
    assert best_predictor(list(records.values())).name == "b_branched"
    assert "within 2x of the fitted B* on 2 of 2 studies" in branched.sentence()


def test_no_choice_from_a_single_study_and_ties_go_to_the_cheaper():
    assert best_predictor(summarize([row("a", "b_branched", 100.0)])) is None
    rows = [row(s, "b_simple", 100.0, examples=5000) for s in "ab"] + \
           [row(s, "b_branched", 100.0, examples=1000) for s in "ab"]
    assert best_predictor(summarize(rows)).name == "b_branched"


def test_calibration_json_round_trip_and_refusals(tmp_path):
    fs = open_root(str(tmp_path))
    missing, why = read_calibration(fs)
    assert missing is None and why == f"{tmp_path}/calibration/calibration.json is missing"
    cal = Calibration([row("a", "b_simple", 50.0), row("b", "b_simple", 90.0)],
                      [("c", "unfinished: 3 trial(s) still to train")], "2026-11-27T00:00:00Z", 3.0)
    write_calibration(fs, cal)
    back, problem = read_calibration(fs)
    assert problem is None
    assert back.to_dict() == cal.to_dict()
    assert back.best.name == "b_simple"
    raw = json.loads((tmp_path / "calibration/calibration.json").read_text())
    assert raw["definitions"]["b_simple"] == DEFINITIONS["b_simple"].definition
    raw["format"] = 99
    (tmp_path / "calibration/calibration.json").write_text(json.dumps(raw))
    back, problem = read_calibration(fs)
    assert back is None and "format 99" in problem


def test_pages_state_every_definition_and_the_numbers(tmp_path):
    cal = Calibration([row("a", "b_simple", 50.0), row("b", "b_simple", 90.0),
                       row("a", "b_branched", 130.0)], [("c", "no fitted B*")])
    frame = table(cal)
    assert list(frame["predicted / fitted"]) == [0.5, 0.9, 1.3]
    for text in (markdown(cal), html(cal, None), "\n".join(console_lines(cal))):
        for name in ("b_star_fit", "b_simple", "b_branched"):
            assert DEFINITIONS[name].definition.split(" (")[0][:40] in text.replace("&#x27;", "'")
        assert "c: no fitted B*" in text
    write_pages(open_root(str(tmp_path)), cal)
    svg = (tmp_path / "calibration/calibration.svg").read_text()
    assert svg.count("<text") > 5 and "predicted against fitted" in svg
    assert (tmp_path / "calibration/calibration.csv").read_text().count("\n") == 4


def test_the_plan_goes_by_the_best_calibrated_predictor_and_says_why():
    from batchscale.planning.predictions import chosen_prediction

    estimates = {"b_simple": CbsEstimate("b_simple", 400.0, 300.0, 500.0, 0.9, 100),
                 "b_branched": CbsEstimate("b_branched", 128.0, 128.0, 256.0, 0.75, 900)}
    good_branched = Calibration([row("a", "b_simple", 400.0), row("b", "b_simple", 350.0),
                                 row("a", "b_branched", 120.0), row("b", "b_branched", 90.0)])
    chosen, line = chosen_prediction(estimates, good_branched)
    assert chosen.name == "b_branched"
    assert "best-calibrated" in line and "within 2x of the fitted B* on 2 of 2 studies" in line
    chosen, line = chosen_prediction({"b_simple": estimates["b_simple"]}, good_branched)
    assert chosen.name == "b_simple" and "B_branch, was not measured here" in line
    chosen, line = chosen_prediction(estimates, Calibration([row("a", "b_branched", 100.0)]))
    assert chosen.name == "b_simple" and "no predictor" in line and "1 study" in line
    chosen, line = chosen_prediction(estimates, None, "is missing")
    assert chosen.name == "b_simple" and "no calibration in this store (is missing)" in line


def test_a_one_sided_b_star_is_shown_but_not_scored():
    one_sided = CalibrationRow("f", "fashion", "error<0.14",
                               CbsEstimate("b_simple", 628.0, 512.0, 791.0, 0.9, 10),
                               CbsEstimate("b_star_fit", 1457.0, 715.0, math.inf, 0.95), 10_000,
                               "probed")
    assert not one_sided.scored and math.isnan(one_sided.ratio)
    records = summarize([one_sided, row("a", "b_simple", 100.0)])
    assert records[0].studies == 1
    assert table(Calibration([one_sided]))["predicted / fitted"][0] == "not scored: B* one-sided"


CALIBRATE_CASES = {  # docs/bad-input.md's "Calibrate" table: case -> argv after the folder
    "calibrate-store-not-a-folder": ["nowhere"],
    "calibrate-no-study": [],
    "calibrate-branch-rule": ["--branch-rule", "cubic"],
    "calibrate-probe-seconds": ["--probe-seconds", "0"],
}


def test_calibrate_refuses_bad_input_in_one_line_as_the_doc_says(tmp_path, capsys):
    import re
    from pathlib import Path

    from batchscale.cli.main import main

    doc = (Path(__file__).resolve().parents[2] / "docs" / "bad-input.md").read_text()
    rows = {m[1]: m[2] for m in re.finditer(r"^\| `(calibrate-[a-z-]+)` \|[^|]*\| 2 \| `([^`]*)` \| \|$",
                                            doc, re.M)}
    assert sorted(rows) == sorted(CALIBRATE_CASES)
    (tmp_path / "store" / "datasets").mkdir(parents=True)  # a store root with no study
    folder = str(tmp_path / "store")
    for case, extra in CALIBRATE_CASES.items():
        argv = ["calibrate", f"{folder}/{extra[0]}"] if extra[:1] == ["nowhere"] else \
            ["calibrate", folder, *extra]
        assert main(argv) == 2, case
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1, (case, err)
        path = argv[1]
        assert err[0].startswith("batchscale: error: " + rows[case].replace("<folder>", path)), case
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == ["datasets"]  # nothing written


def test_the_plan_never_goes_by_a_prediction_that_measured_nothing():
    """A branched probe that ran but measured no branch point (out of time or examples, a
    base run that diverged) gives B_branch = NaN [0, inf]: the plan must not size its grid,
    estimate and budgets by it, even where B_branch is the best-calibrated predictor."""
    from batchscale.planning.predictions import chosen_prediction

    estimates = {"b_simple": CbsEstimate("b_simple", 400.0, 300.0, 500.0, 0.9, 100),
                 "b_branched": CbsEstimate("b_branched", math.nan, 0.0, math.inf, 0.75, 900)}
    good_branched = Calibration([row("a", "b_simple", 400.0), row("b", "b_simple", 350.0),
                                 row("a", "b_branched", 120.0), row("b", "b_branched", 90.0)])
    chosen, line = chosen_prediction(estimates, good_branched)
    assert chosen.name == "b_simple" and math.isfinite(chosen.value)
    assert "B_branch, measured nothing here" in line
