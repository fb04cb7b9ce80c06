"""Search rounds in the report, on a hand-made store: a re-search that resolves an edge
warning, a top-up that hits the trial cap, an older batch size without rounds; the trials
the rounds make the study expect; and what the study trained against protocol full.
Every value below worked out by hand from the rows."""

from __future__ import annotations

import json
import math

import pytest

from batchscale.analysis.reading.completeness import unfinished_trials
from batchscale.analysis.reading.study_reader import load_study
from batchscale.analysis.report import analyse, kfp_metrics, summary_json, write_report
from batchscale.analysis.statistics.censoring_notes import approximate_fit_note
from batchscale.analysis.statistics.search_rounds import space_text
from batchscale.analysis.statistics.training_cost import cost_sentence, training_cost
from batchscale.core.protocols import RACE
from batchscale.core.rounds import SearchRound
from batchscale.store.layout import StudyStore
from tests.unit.test_censoring import WORKLOAD, write_store

NAN = math.nan
LR_WIDE = {"type": "DOUBLE", "min_value": 0.01, "max_value": 0.3, "scale": "LOG_SCALE"}
LR = {"type": "DOUBLE", "min_value": 0.003, "max_value": 0.03, "scale": "LOG_SCALE"}
TRIALS = {
    16: (1000, {
        1: ("COMPLETE", "goal", 0.029, [(0, 0.9), (300, 0.07)]),  # round 1's best, at the top
        2: ("COMPLETE", "budget", 0.004, [(0, 0.9), (1000, 0.2)]),
        3: ("INFEASIBLE", "diverged", 0.02, [(0, 0.9), (50, NAN)]),
        4: ("COMPLETE", "race", 0.01, [(0, 0.9), (300, 0.3)]),
        5: ("COMPLETE", "goal", 0.1, [(0, 0.9), (100, 0.06)]),    # round 2's best, inside
        6: ("COMPLETE", "goal", 0.2, [(0, 0.9), (200, 0.07)])}),
    64: (500, {
        1: ("INFEASIBLE", "diverged", 0.02, [(0, 0.9), (50, NAN)]),
        2: ("INFEASIBLE", "diverged", 0.025, [(0, 0.9), (50, NAN)]),
        3: ("COMPLETE", "goal", 0.01, [(0, 0.9), (100, 0.07)]),
        4: ("COMPLETE", "budget", 0.005, [(0, 0.9), (500, 0.2)]),
        5: ("INFEASIBLE", "diverged", 0.02, [(0, 0.9), (50, NAN)]),
        6: ("INFEASIBLE", "diverged", 0.028, [(0, 0.9), (50, NAN)])}),
    256: (300, {  # no search_rounds in its study.json: an older store's batch size
        1: ("COMPLETE", "goal", 0.01, [(0, 0.9), (30, 0.05)]),
        2: ("INFEASIBLE", "diverged", 0.02, [(0, 0.9), (50, NAN)]),
        3: ("INFEASIBLE", "diverged", 0.025, [(0, 0.9), (50, NAN)]),
        4: ("COMPLETE", "budget", 0.004, [(0, 0.9), (300, 0.2)])}),
}


def _rounds(spec_space) -> dict:
    """16: the brief study.json form (paper configs only); 64: core.rounds' own form."""
    return {
        16: [{"round": 1, "trial_ids": [1, 4], "reason": "initial search",
              "parameter_configs": {"learning_rate": LR}},
             {"round": 2, "trial_ids": [5, 6], "parameter_configs": {"learning_rate": LR_WIDE},
              "reason": "re-search: learning_rate at the top of [0.003, 0.03]"}],
        64: [SearchRound(1, 1, 4, spec_space).to_dict(),
             SearchRound(2, 5, 6, spec_space, "top-up: 2 of 4 non-divergent").to_dict()],
    }


@pytest.fixture
def location(tmp_path):
    root = str(tmp_path / "store")
    plain = write_store(root, TRIALS, name="rounds", spec_extra={"max_trials_per_batch_size": 6})
    spec = load_study(plain).spec
    return write_store(root, TRIALS, name="rounds", rounds=_rounds(spec.search_space),
                       spec_extra={"max_trials_per_batch_size": 6})


def test_space_text_is_compact():
    assert space_text({"learning_rate": LR, "momentum": {
        "type": "DOUBLE", "min_value": 0.8, "max_value": 0.97, "scale": "REVERSE_LOG_SCALE"},
        "label_smoothing": {"type": "DISCRETE", "feasible_points": [0.0, 0.1]}}) == (
        "learning_rate [0.003, 0.03] log; momentum [0.8, 0.97] reverse log; "
        "label_smoothing {0, 0.1}")


def test_rounds_table_per_batch_size_and_round(location):
    analysis = analyse(load_study(location), resamples=0)
    rows = [(r.batch_size, r.round, r.trial_ids, r.finished, r.non_divergent, r.search_space,
             r.reason, r.best_trial, r.steps_to_result, r.at_edge, r.edge_warning)
            for r in analysis.rounds.itertuples()]
    assert rows == [
        (16, 1, "1–4", 4, 3, "learning_rate [0.003, 0.03] log", "initial search", 1, 300, True,
         "learning_rate 0.029 at the top of [0.003, 0.03]"),
        (16, 2, "5–6", 2, 2, "learning_rate [0.01, 0.3] log",
         "re-search: learning_rate at the top of [0.003, 0.03]", 5, 100, False, "resolved"),
        (64, 1, "1–4", 4, 2, "learning_rate [0.003, 0.03] log", "initial search", 3, 100, False, ""),
        (64, 2, "5–6", 2, 0, "learning_rate [0.003, 0.03] log", "top-up: 2 of 4 non-divergent",
         3, 100, False, ""),
        (256, 1, "1–4", 4, 2, "learning_rate [0.003, 0.03] log", "initial search", 1, 30, False, "")]
    assert analysis.round_notes == [
        "batch size 16: 5 non-divergent, the 4 wanted",
        "batch size 64: 2 of 4 non-divergent: the trial cap (6) was reached",
        "batch size 256: 2 of 4 non-divergent: no further round was run (4 of at most 6 trials)"]
    assert analysis.expected_trials == 16 and analysis.unfinished == []
    # the edge warning is against the hull the rounds searched: round 2's best is inside it
    assert analysis.warnings == []


def test_rounds_in_the_pages_and_summary_json(location, tmp_path, capsys):
    from batchscale.cli.analysis import print_summary

    analysis = analyse(load_study(location), resamples=0)
    written = write_report(analysis, str(tmp_path / "out"))
    markdown, page = written["pages"]["markdown"], written["pages"]["html"]
    assert "## Search rounds" in markdown
    assert ("| 16 | 2 | 5–6 | 2 | learning_rate [0.01, 0.3] log | re-search: learning_rate at the "
            "top of [0.003, 0.03] | 5 | 100 | resolved |") in markdown
    assert "- batch size 64: 2 of 4 non-divergent: the trial cap (6) was reached" in markdown
    assert '<h2 id="search-rounds">Search rounds</h2>' in page and "<td>resolved</td>" in page
    doc = summary_json(analysis)
    assert [r["round"] for r in doc["search_rounds"]] == [1, 2, 1, 2, 1]
    assert doc["search_rounds"][0]["at_edge"] is True and doc["search_rounds"][4]["at_edge"] is False
    assert doc["search_round_notes"] == analysis.round_notes
    print_summary(analysis.steps, doc, "/r/report.html")
    out = capsys.readouterr().out.splitlines()
    assert "search: batch size 64: 2 of 4 non-divergent: the trial cap (6) was reached" in out
    assert not any("batch size 16" in line for line in out if line.startswith("search:"))


def test_the_rounds_decide_which_trials_the_study_expects(location, tmp_path):
    store = StudyStore(location.rsplit("/", 1)[0])
    spec = load_study(location).spec
    assert unfinished_trials(spec, store) == []
    store.fs.delete(f"rounds/{WORKLOAD}/16/6/metadata.json")
    store.fs.delete(f"rounds/{WORKLOAD}/16/6/measurements.csv")
    missing = [(u.batch_size, u.trial_id, u.status) for u in unfinished_trials(spec, store)]
    assert missing == [(16, 6, "MISSING")]  # round 2's trial, beyond trials_per_batch_size


def test_trained_steps_against_protocol_full(location):
    cost = training_cost(load_study(location))
    # 16: trained 300+1000+50+300+100+200, full 1000 each but the diverged trial's 50;
    # 64: 50+50+100+500+50+50 against 50+50+500+500+50+50; 256: 30+50+50+300 vs 300+50+50+300
    assert cost == {"protocol": "race", "trials": 16, "trained_steps": 3180,
                    "trained_examples": 1950 * 16 + 800 * 64 + 430 * 256, "full_steps": 6950,
                    "full_examples": 5050 * 16 + 1200 * 64 + 700 * 256,
                    "fraction_of_full_steps": pytest.approx(3180 / 6950),
                    "fraction_of_full_examples": pytest.approx(192480 / 336800)}
    assert cost_sentence(cost) == (
        "Training cost: the 16 trials trained 3,180 steps (192,480 examples); protocol full "
        "(every non-diverged trial to its budget) would have trained 6,950 steps (336,800 "
        "examples): the study trained 46% of those steps and 57% of those examples.")
    analysis = analyse(load_study(location), resamples=0)
    assert summary_json(analysis)["training_cost"] == cost
    methods = write_report(analysis, None)["pages"]["markdown"].split("## Methods", 1)[1]
    assert "Protocol race: a trial stopped once it beat every goal" in methods
    assert cost_sentence(cost) in methods
    assert json.loads(json.dumps(summary_json(analysis)["training_cost"])) == cost
    metrics = kfp_metrics(analysis)  # the Kubeflow UI's Metrics: what the protocol trained
    assert (metrics["trained_steps"], metrics["full_steps"], metrics["trials"]) == (3180, 6950, 16)
    assert metrics["search_rounds_added"] == 2  # round 2 at batch sizes 16 and 64
    # a race study's regime fit is said to be approximate (the others' crossings censored)
    assert analysis.fits["classification_error<0.08"].fitted
    assert approximate_fit_note((RACE,)) in analysis.notes
