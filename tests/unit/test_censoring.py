"""What an early-stopping protocol leaves unknown, on hand-made stores of our layout: the
protocol a study ran under (old stores and the paper's data included), which trials are
censored for a goal, steps to result marked exact / upper bound / stopped early, best
values under a budget marked censored, the refusal of a goal no trial could show, and
the Figure 9 scatter's "stopped early" outcome. Values worked out by hand below."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from batchscale.analysis.compare import compare_studies
from batchscale.analysis.figures.plots import budget_plot
from batchscale.analysis.reading.censoring import (
    implied,
    protocols,
    stop_table,
    study_protocol,
    trial_censoring,
)
from batchscale.analysis.reading.study_reader import load_study
from batchscale.analysis.report import analyse, write_report
from batchscale.analysis.statistics.goal_steps import goal_steps_table
from batchscale.analysis.statistics.metaparameters import trial_outcomes
from batchscale.analysis.statistics.steps import best_under_budget, steps_to_result
from batchscale.cli.main import main
from batchscale.core import protocols as protocol_table
from batchscale.core.edges import hull_configs
from batchscale.core.errors import SpecError
from batchscale.core.goals import Goal, parse_goal
from batchscale.store.filesystem import open_root
from batchscale.validation import default_spec_dict, parse_spec
from tests import paper_database as db

WORKLOAD = "mnist_5k/fc_128_128/nesterov_momentum"
LR = {"type": "DOUBLE", "min_value": 0.003, "max_value": 0.03, "scale": "LOG_SCALE"}
# Study goal classification_error<0.08 (val); the stricter goal is <0.05.
# batch size -> (budget, trial id -> (status, stop_reason, learning rate, [(step, val error)]))
RACE = {
    16: (1000, {
        1: ("COMPLETE", "goal", 0.01, [(0, 0.9), (100, 0.3), (200, 0.04)]),   # beats both at 200
        2: ("COMPLETE", "goal", 0.02, [(0, 0.9), (100, 0.07)]),               # <0.05 censored at 100
        3: ("COMPLETE", "budget", 0.004, [(0, 0.9), (500, 0.2), (1000, 0.1)]),
        4: ("INFEASIBLE", "diverged", 0.029, [(0, 0.9), (50, math.nan)])}),
    64: (500, {
        1: ("COMPLETE", "goal", 0.01, [(0, 0.9), (50, 0.2), (100, 0.07)]),    # censored at 100
        2: ("COMPLETE", "race", 0.02, [(0, 0.9), (50, 0.5), (150, 0.3)]),     # censored at 150
        3: ("COMPLETE", "budget", 0.004, [(0, 0.9), (250, 0.3), (500, 0.2)]),
        4: ("COMPLETE", "goal", 0.005, [(0, 0.9), (100, 0.1), (200, 0.06)])}),  # censored at 200
    256: (300, {
        1: ("COMPLETE", "goal", 0.01, [(0, 0.9), (30, 0.04)]),                # beats both at 30
        2: ("COMPLETE", "race", 0.02, [(0, 0.9), (30, 0.5)]),                 # stopped at 30: exact
        3: ("COMPLETE", "budget", 0.004, [(0, 0.9), (150, 0.3), (300, 0.2)])}),
}


def write_store(root: str, batches: dict, protocol: str | None = "race", name: str = "racing",
                rounds: dict | None = None, spec_extra: dict | None = None) -> str:
    """Our layout by hand: study_spec.json, each batch size's study.json (``protocol``
    None: an older store, without the key) and every trial; returns STORE/STUDY."""
    budgets = {b: budget for b, (budget, _) in batches.items()}
    raw = {**default_spec_dict(), "name": name, "store": root, "batch_sizes": sorted(batches),
           "trials_per_batch_size": 4, "max_steps": budgets,
           "search_space": {"learning_rate": {"scale": "log", "min": 0.003, "max": 0.03}},
           "fixed": {"momentum": 0.9, "label_smoothing": 0.0}, **(spec_extra or {})}
    if protocol is not None:
        raw["protocol"] = protocol
    spec = parse_spec(raw)
    fs = open_root(root)
    fs.write_text(f"{name}/study_spec.json", json.dumps(spec.to_dict()))
    for batch_size, (budget, trials) in batches.items():
        base = f"{name}/{WORKLOAD}/{batch_size}"
        study_json = {"batch_size": batch_size, "dataset": "mnist_5k", "model": "fc_128_128",
                      "optimizer": "nesterov_momentum", "early_stopping": protocol not in (None, "full"),
                      "train_steps": 0, "max_steps": budget,
                      "goals": [g.__dict__ for g in spec.goals], "parameter_configs": {"learning_rate": LR}}
        if protocol is not None:
            study_json["protocol"] = protocol
        if rounds and batch_size in rounds:  # the top level is the hull of every round's
            study_json["search_rounds"] = rounds[batch_size]
            study_json["parameter_configs"] = hull_configs(
                [r["parameter_configs"] for r in rounds[batch_size]])
        fs.write_text(f"{base}/study.json", json.dumps(study_json))
        for trial_id, (status, reason, lr, rows) in trials.items():
            fs.write_text(f"{base}/{trial_id}/metadata.json", json.dumps({
                "trial_id": trial_id, "status": status, "stop_reason": reason, "steps": rows[-1][0],
                "max_steps": budget, "parameters": {"learning_rate": lr, "momentum": 0.9}}))
            lines = ["step,train/classification_error,val/classification_error,"
                     "val/cross_entropy_error"]
            lines += [f"{s},{v + 0.01!r},{v!r},{2 * v!r}" for s, v in rows]
            fs.write_text(f"{base}/{trial_id}/measurements.csv", "\n".join(lines) + "\n")
    return f"{root}/{name}"


def _without_budget_trials(batches: dict) -> dict:
    return {b: (budget, {i: t for i, t in trials.items() if t[1] != "budget"})
            for b, (budget, trials) in batches.items()}


@pytest.fixture
def race(tmp_path):
    return load_study(write_store(str(tmp_path), RACE), goals=["classification_error<0.08",
                                                               "classification_error<0.05"])


def _marks(table) -> dict:
    return {int(r.batch_size): (None if math.isnan(r.steps_to_result) else int(r.steps_to_result),
                                r.censored, int(r.stopped_early)) for r in table.itertuples()}


def test_the_protocol_of_new_old_and_paper_stores(tmp_path):
    study = load_study(write_store(str(tmp_path / "new"), RACE))
    assert study_protocol(study) == (protocol_table.RACE,)
    assert set(protocols(study).values()) == {protocol_table.RACE}
    old = load_study(write_store(str(tmp_path / "old"), RACE, protocol=None))
    assert study_protocol(old) == (protocol_table.LEGACY,)  # older batchscale stores stopped at the goals
    paper = load_study(db.write_paper_database(str(tmp_path / "paper")))  # early_stopping true
    assert study_protocol(paper) == (protocol_table.PAPER,)  # its early stopping left trials INCOMPLETE
    assert set(stop_table(paper)["stop_reason"]) == {"budget", "diverged", ""}


def test_a_protocol_this_process_does_not_know_keeps_its_name_and_censors_every_stop(tmp_path, race):
    """A study.json naming a protocol whose plugin is not loaded here is never read as
    another protocol: a stand-in keeps its name, treats every early stop as censored (as
    race does) and says why in the report's words."""
    location = write_store(str(tmp_path / "s"), RACE)
    fs = open_root(str(tmp_path / "s"))
    for batch_size in RACE:
        path = f"racing/{WORKLOAD}/{batch_size}/study.json"
        fs.write_text(path, json.dumps({**json.loads(fs.read_text(path)), "protocol": "stranger"}))
    study = load_study(location, goals=["classification_error<0.08", "classification_error<0.05"])
    (found,) = study_protocol(study)
    assert found.name == "stranger" and found.races and found.fit_approximate
    assert protocol_table.find("stranger") is None and "not registered here" in found.method
    goal = parse_goal("classification_error<0.05")[0]
    assert trial_censoring(study, goal).equals(trial_censoring(race, goal))


def test_implied_goals_are_as_strict_on_the_same_metric_and_the_stop_split():
    own = (Goal("classification_error", 0.08),)
    assert implied(Goal("classification_error", 0.1), own)
    assert implied(Goal("classification_error", 0.08), own)
    assert not implied(Goal("classification_error", 0.05), own)
    assert not implied(Goal("cross_entropy_error", 3.0), own)
    assert not implied(Goal("classification_error", 0.1), own, split="train")


def test_censored_trials_are_those_stopped_early_without_beating_the_goal(race):
    table = trial_censoring(race, parse_goal("classification_error<0.05")[0]).set_index(
        ["batch_size", "trial_id"])
    assert sorted(table.index[table["censored"]]) == [(16, 2), (64, 1), (64, 2), (64, 4), (256, 2)]
    assert table.loc[(64, 2), "last_step"] == 150 and table.loc[(16, 4), "stop_reason"] == "diverged"
    study_goal = trial_censoring(race, race.goals[0]).set_index(["batch_size", "trial_id"])
    assert sorted(study_goal.index[study_goal["censored"]]) == [(64, 2), (256, 2)]  # raced


def test_steps_to_result_says_exact_upper_bound_or_stopped_early(race):
    strict = steps_to_result(race, race.goals[1])
    # 16: trial 1 at 200, trial 2 stopped at 100 before it; 64: nobody beat it, 3 stopped
    # early; 256: trial 1 at 30, trial 2 stopped at 30 (its crossing would come later)
    assert _marks(strict) == {16: (200, "upper bound", 1), 64: (None, "stopped early", 3),
                              256: (30, "", 0)}
    # the study's own goal: race stops at or after the best crossing, nothing changes
    assert _marks(steps_to_result(race, race.goals[0])) == {16: (100, "", 0), 64: (100, "", 0),
                                                            256: (30, "", 0)}
    # under a 150-step budget only 64's trial 1 (stopped at 100) hides a step inside it
    assert _marks(steps_to_result(race, race.goals[1], step_budget=150))[64] == (
        None, "stopped early", 1)


def test_best_value_under_a_budget_is_censored_where_a_trial_stopped_before_it(race):
    steps = best_under_budget(race, "classification_error", [100, 1000], "steps")
    censored = {(r.budget, r.batch_size): r.censored for r in steps.itertuples()}
    assert censored == {(100, 16): False, (100, 64): False, (100, 256): True,
                        (1000, 16): True, (1000, 64): True, (1000, 256): True}
    examples = best_under_budget(race, "classification_error", [1600, 10_000], "examples")
    assert {(r.budget, r.batch_size): r.censored for r in examples.itertuples()} == {
        (1600, 16): False, (1600, 64): False, (1600, 256): False,
        (10_000, 16): True, (10_000, 64): True, (10_000, 256): True}
    hollow = budget_plot(steps, "race", "validation error", protocol="race")
    assert hollow != budget_plot(steps.assign(censored=False), "race", "validation error",
                                 protocol="race")


def test_a_stricter_goal_is_refused_when_no_trial_ran_to_its_budget(tmp_path, capsys):
    url = write_store(str(tmp_path), _without_budget_trials(RACE))
    with pytest.raises(SpecError) as err:
        load_study(url, goals=["classification_error<0.05"])
    message = str(err.value)
    assert message == (
        "goal classification_error<0.05 is stricter than the goals study 'racing' stopped its "
        "trials at (classification_error<0.08, protocol race): trials stopped once those were "
        "met, so steps to this goal cannot be measured; run a study with protocol: full or with "
        "this goal")
    with pytest.raises(SpecError, match="is not implied by the goals .* protocol race"):
        load_study(url, goals=["cross_entropy_error<0.3"])
    assert load_study(url, goals=["classification_error<0.1"]).goals[0].value == 0.1  # implied
    assert load_study(url).goals[0].value == 0.08
    assert main(["report", url, "--goal", "classification_error<0.05", "--resamples", "0"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert errors == [f"batchscale: error: {message}"]


def test_the_report_says_what_a_stricter_goal_is_based_on(tmp_path, capsys):
    url = write_store(str(tmp_path), RACE)
    assert main(["report", url, "--goal", "classification_error<0.05", "--resamples", "0"]) == 0
    out = capsys.readouterr().out
    assert "early stopping: classification_error<0.05 (validation): not implied by the goals the " \
           "trials stopped at (classification_error<0.08, protocol race)" in out
    assert "an upper bound at 16 (1 trial stopped early before it)" in out
    assert "unknown (stopped early) at 64" in out and "exact at batch size(s) 256" in out
    report = open_root(f"{url}/report/goal-classification_error-below-0.05")  # beside its own
    doc = json.loads(report.read_text("summary.json"))
    assert doc["protocol"] == "race" and len(doc["censoring"]) == 2  # val and train
    val = [r for r in doc["steps_to_result"] if r["split"] == "val"]
    assert [(r["batch_size"], r["censored"]) for r in val] == [
        (16, "upper bound"), (64, "stopped early"), (256, "")]
    markdown = report.read_text("summary.md")
    assert "## Early stopping" in markdown and "| 64 | — | stopped early |" in markdown
    assert "stopped early</td>" in report.read_text("report.html")
    assert "censored" in report.read_text("budgets.csv").splitlines()[0]


def test_trials_stopped_early_are_their_own_outcome(race, tmp_path):
    trials = pd.DataFrame({"status": ["COMPLETE", "COMPLETE", "COMPLETE", "INFEASIBLE"],
                           "reached": [True, False, False, False],
                           "stopped_early": [False, True, False, True]})
    assert trial_outcomes(trials).tolist() == ["reached", "stopped early", "not reached",
                                               "infeasible"]
    analysis = analyse(race, resamples=0)
    flags = analysis.trials.set_index(["batch_size", "trial_id"])["stopped_early"]
    assert sorted(flags.index[flags]) == [(64, 2), (256, 2)]  # raced past the best crossing
    assert (analysis.budgets.columns[-1], analysis.budgets["censored"].any()) == ("censored", True)
    write_report(analysis, str(tmp_path / "out"))
    assert (tmp_path / "out" / "lr_momentum.svg").stat().st_size > 1000


def test_compare_and_the_goal_table_say_unknown_not_never(tmp_path):
    url = write_store(str(tmp_path), RACE)
    result = compare_studies([url], goal="classification_error<0.05")
    notes = " ".join(result.notes)
    assert "early stopping (protocol race): steps to result is exact at batch size(s) 256" in notes
    assert "an upper bound at 16 (1 trial stopped early before it)" in notes
    assert "unknown (stopped early) at 64" in notes and "no batch size reached" not in notes
    table = goal_steps_table(load_study(url, goals=["classification_error<0.05"]))
    val = table[table["split"] == "val"].set_index(["batch_size", "trial_id"])
    assert val.loc[(64, 2), ["stop_reason", "censored"]].tolist() == ["race", True]
    assert val.loc[(64, 3), ["stop_reason", "censored"]].tolist() == ["budget", False]
    assert math.isnan(val.loc[(64, 2), "step"]) and math.isnan(val.loc[(64, 3), "step"])
