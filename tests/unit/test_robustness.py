"""Robustness of steps to result (``statistics.robustness``): the k-th best trial and the
share of trials that reach the goal, on the hand-made paper database (ties, diverged and
INCOMPLETE trials, fewer than k reaching) and the hand-made race store (censoring), with
the values worked out by hand in the comments; then the report's section, figure, CSV and
summary.json on the quickstart-like store."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from batchscale.analysis.figures.plots_robustness import ROBUSTNESS_FIGURE, ordinal, robustness_plot
from batchscale.analysis.reading.study_reader import load_study
from batchscale.analysis.report import REPORT_FILES
from batchscale.analysis.statistics.robustness import (
    robustness_columns,
    robustness_table,
    wilson_interval,
)
from batchscale.analysis.statistics.steps import steps_to_result
from batchscale.cli.main import main
from batchscale.core.goals import parse_goal
from batchscale.store.filesystem import open_root
from tests import paper_database as db
from tests import report_store as qs
from tests.svg_figures import external_references, outside, size_px, too_small
from tests.unit.test_censoring import RACE, write_store

NAN = math.nan


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    return load_study(db.write_paper_database(str(tmp_path_factory.mktemp("paper"))),
                      goals=["classification_error<0.2", "classification_error<0.1"])


@pytest.fixture(scope="module")
def race(tmp_path_factory):
    return load_study(write_store(str(tmp_path_factory.mktemp("race")), RACE),
                      goals=["classification_error<0.08", "classification_error<0.05"])


def _rows(table: pd.DataFrame, k: int = 3) -> dict:
    """batch size -> (trials, complete, reached, stopped_early, steps k1..k, censored k1..k)."""
    out = {}
    for r in table.to_dict("records"):
        steps = tuple(None if math.isnan(r[f"steps_k{j}"]) else int(r[f"steps_k{j}"])
                      for j in range(1, k + 1))
        out[r["batch_size"]] = (r["trials"], r["complete"], r["reached"], r["stopped_early"], steps,
                                tuple(r[f"censored_k{j}"] for j in range(1, k + 1)))
    return out


def test_wilson_interval_by_hand():
    # 3 of 4: centre (0.75 + z²/8) / (1 + z²/4), half z sqrt(3/64 + z²/64) / (1 + z²/4)
    low, high = wilson_interval(3, 4)
    assert low == pytest.approx(0.30064, abs=1e-4) and high == pytest.approx(0.95441, abs=1e-4)
    assert wilson_interval(0, 10) == (0.0, pytest.approx(0.27753, abs=1e-4))
    assert wilson_interval(10, 10) == (pytest.approx(0.72247, abs=1e-4), 1.0)
    assert all(math.isnan(v) for v in wilson_interval(0, 0))


def test_kth_best_and_shares_on_the_paper_database(paper):
    loose, strict = paper.goals
    table = robustness_table(paper, loose)
    assert list(table.columns) == robustness_columns(3)
    # <0.2, B=2: COMPLETE 1 at 250, 2 at 250 (a tie), 5 at 120; INFEASIBLE 3 counts as a
    # trial that did not reach; INCOMPLETE 4 is not counted. B=8: 3 and 7 both at 50.
    assert _rows(table) == {2: (4, 3, 3, 0, (120, 250, 250), ("", "", "")),
                            8: (3, 2, 2, 0, (50, 50, None), ("", "", ""))}
    shares = table.set_index("batch_size")
    assert shares.loc[2, "share_reached"] == 0.75 and shares.loc[2, "share_reached_complete"] == 1.0
    assert shares.loc[8, "share_reached"] == pytest.approx(2 / 3)
    assert (shares.loc[2, "share_low"], shares.loc[2, "share_high"]) == wilson_interval(3, 4)
    assert set(table["share_censored"]) == {""}
    # <0.1, B=2: trial 2 at 250, trial 1 at 400, trial 5 never; B=8: trial 3 at 100 only
    assert _rows(robustness_table(paper, strict, k=2), 2) == {
        2: (4, 3, 2, 0, (250, 400), ("", "")), 8: (3, 2, 1, 0, (100, None), ("", ""))}


@pytest.mark.parametrize("split", ["val", "train"])
def test_the_best_is_steps_to_result(paper, race, split):
    for study in (paper, race):
        for goal in study.goals:
            robust = robustness_table(study, goal, split, k=1)
            steps = steps_to_result(study, goal, split)
            assert robust["steps_k1"].equals(steps["steps_to_result"].astype(float))
            assert list(robust["censored_k1"]) == list(steps["censored"])
            assert list(robust["reached"]) == list(steps["reached"])


def test_early_stopping_makes_bounds_not_values(race):
    strict = parse_goal("classification_error<0.05")[0]
    table = robustness_table(race, strict)
    # 16: trial 1 at 200; trial 2 stopped (goal) at 100 without beating it, so the best is
    # at most 200, a 2nd best is unknown (trial 2 might have reached) and a 3rd could not
    # exist (trial 3 ran its budget without, trial 4 diverged). 64: none reached, trials
    # 1, 2, 4 stopped early: all three unknown. 256: trial 1 at 30; trial 2 raced to 30
    # (its crossing would come after 30: the best is exact), so a 2nd is unknown.
    assert _rows(table) == {
        16: (4, 3, 1, 1, (200, None, None), ("upper bound", "stopped early", "")),
        64: (4, 4, 0, 3, (None, None, None), ("stopped early",) * 3),
        256: (3, 3, 1, 1, (30, None, None), ("", "stopped early", ""))}
    rows = table.set_index("batch_size")
    assert list(rows["share_censored"]) == ["lower bound"] * 3
    # the interval runs from the low end of those that reached to the high end of those
    # plus the censored ones
    assert rows.loc[16, "share_reached"] == 0.25
    assert (rows.loc[16, "share_low"], rows.loc[16, "share_high"]) == (
        wilson_interval(1, 4)[0], wilson_interval(2, 4)[1])
    assert (rows.loc[64, "share_low"], rows.loc[64, "share_high"]) == (0.0, wilson_interval(3, 4)[1])
    # the study's own goal: only raced trials are censored, and they stopped at the best
    own = _rows(robustness_table(race, race.goals[0]))
    assert own[16] == (4, 3, 2, 0, (100, 200, None), ("", "", ""))


def test_k_is_a_whole_number_from_one(paper):
    for k in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="k: .* must be a whole number"):
            robustness_table(paper, paper.goals[0], k=k)


def test_the_figure_is_legible_and_marks_bounds(race):
    strict = parse_goal("classification_error<0.05")[0]
    table = robustness_table(race, strict)
    svg = robustness_plot(table, "race")
    width, _ = size_px(svg)
    assert 1000 <= width <= 1118
    assert too_small(svg) == [] and outside(svg) == [] and external_references(svg) == []
    assert b"upper bound: a trial stopped early" in svg and b"lower bound: trials stopped" in svg
    assert b"3rd best trial: none at any batch size; unknown where trials stopped early" in svg
    empty = robustness_plot(table.iloc[0:0], "nothing")
    assert b"no batch size reached the goal" in empty and b"no trials" in empty
    assert [ordinal(k) for k in (1, 2, 3, 4, 11, 12, 21, 22)] == [
        "best", "2nd best", "3rd best", "4th best", "11th best", "12th best", "21st best", "22nd best"]


def test_the_report_has_the_section_its_figure_csv_and_summary(tmp_path, capsys):
    location = qs.build(str(tmp_path / "store"))
    assert main(["report", location, "--robustness-k", "0", "--out", str(tmp_path / "no")]) == 2
    assert "--robustness-k: 0 must be 1 or more" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()
    assert main(["report", location, "--resamples", "0", "--robustness-k", "4",
                 "--out", str(tmp_path / "report")]) == 0
    folder = open_root(str(tmp_path / "report"))
    assert "robustness.csv" in REPORT_FILES
    csv = pd.read_csv(folder.url("robustness.csv"))
    assert list(csv.columns) == robustness_columns(4) and len(csv) == len(qs.BATCH_SIZES)
    doc = json.loads(folder.read_text("summary.json"))
    assert doc["robustness_k"] == 4 and len(doc["robustness"]) == len(qs.BATCH_SIZES)
    at_8 = next(r for r in doc["robustness"] if r["batch_size"] == 8)
    # trials 1 and 2 reached (770, 962); trial 3 raced to 770 without; trial 4 diverged
    assert (at_8["steps_k1"], at_8["steps_k2"], at_8["steps_k3"]) == (770, 962, None)
    assert (at_8["censored_k2"], at_8["censored_k3"], at_8["share_censored"]) == (
        "upper bound", "stopped early", "lower bound")
    html, markdown = folder.read_text("report.html"), folder.read_text("summary.md")
    section = html[html.index('<h2 id="robustness"'):]
    section = section[:section.index("<h2", 4)]
    assert section.count("<img") == 1 and 'alt="robustness.svg"' in section
    assert html.count('alt="robustness.svg"') == 1  # not also under Figures
    assert ">≥ 50% [15%, 95%]<" in section and ">≤ 962<" in section and ">stopped early<" in section
    assert "4th best" in section and "protocol race" in section
    assert "## Robustness" in markdown and "robustness.svg (embedded in report.html)" in markdown
    assert folder.read_bytes(ROBUSTNESS_FIGURE).startswith(b"<?xml")
