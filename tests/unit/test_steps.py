"""Steps to result, budgets and best values on a hand-computed database in the paper's layout."""

import math

import pandas as pd
import pytest

from batchscale.analysis.reading.study_reader import load_study
from batchscale.analysis.statistics.goal_steps import GOAL_STEP_COLUMNS, goal_steps_table
from batchscale.analysis.statistics.steps import (
    all_steps_to_result,
    best_under_budget,
    crossings,
    default_budgets,
    steps_to_result,
)
from batchscale.core.goals import Goal, parse_goal
from tests import paper_database as db


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("paper")
    url = db.write_paper_database(str(root))
    return load_study(url, goals=list(db.ANSWERS))


def _by_batch(table):
    return {int(r.batch_size): (None if math.isnan(r.steps_to_result) else int(r.steps_to_result),
                                None if pd.isna(r.best_trial) else int(r.best_trial))
            for r in table.itertuples()}


@pytest.mark.parametrize("goal", list(db.ANSWERS))
@pytest.mark.parametrize("split", ["val", "train"])
def test_steps_to_result_matches_hand_computed_answers(study, goal, split):
    table = steps_to_result(study, parse_goal(goal)[0], split)
    assert _by_batch(table) == db.ANSWERS[goal][split]
    for row in table.itertuples():
        assert {k: getattr(row, k) for k in db.COUNTS[row.batch_size]} == db.COUNTS[row.batch_size]
        assert row.examples_to_result == row.steps_to_result * row.batch_size


def test_best_trial_metaparameters_and_effective_learning_rate(study):
    table = steps_to_result(study, parse_goal("classification_error<0.1")[0]).set_index("batch_size")
    assert table.loc[2, "learning_rate"] == 0.5 and table.loc[2, "momentum"] == 0.99
    assert table.loc[2, "effective_learning_rate"] == pytest.approx(50.0)
    assert table.loc[2, "reached"] == 2  # trials 1 and 2; 5 never gets below 0.1


def test_all_goals_and_splits_at_once(study):
    table = all_steps_to_result(study)
    assert len(table) == 2 * 2 * 2  # goals x splits x batch sizes
    for (goal, split), group in table.groupby(["goal", "split"]):
        assert _by_batch(group) == db.ANSWERS[goal][split]


@pytest.mark.parametrize("goal", list(db.ANSWERS))
def test_step_and_example_budgets(study, goal):
    by_steps = steps_to_result(study, parse_goal(goal)[0], step_budget=200)
    by_examples = steps_to_result(study, parse_goal(goal)[0], example_budget=480)
    assert {b: s for b, (s, _) in _by_batch(by_steps).items()} == db.STEP_BUDGET_200[goal]
    assert {b: s for b, (s, _) in _by_batch(by_examples).items()} == db.EXAMPLE_BUDGET_480[goal]


def test_best_value_under_budgets(study):
    steps = best_under_budget(study, "classification_error", [100], "steps")
    examples = best_under_budget(study, "classification_error", [400], "examples")
    for table, answer in ((steps, db.BEST_STEP_BUDGET_100), (examples, db.BEST_EXAMPLE_BUDGET_400)):
        got = {r.batch_size: (r.best_value, r.trial_id, r.step) for r in table.itertuples()}
        assert got == answer
    with pytest.raises(ValueError, match="'steps' or 'examples'"):
        best_under_budget(study, "classification_error", [1], "epochs")


def test_maximised_goal_and_missing_metric(study):
    up = steps_to_result(study, Goal("classification_error", 0.85, "maximize"))
    assert _by_batch(up) == {2: (0, 1), 8: (0, 3)}  # every trial starts at 0.9
    missing = steps_to_result(study, parse_goal("average_precision>0.3")[0])
    assert missing["steps_to_result"].isna().all() and (missing["reached"] == 0).all()


def test_crossings_give_the_evaluation_interval(study):
    table = crossings(study, parse_goal("classification_error<0.2")[0]).set_index(["batch_size", "trial_id"])
    assert set(table.index) == {(2, 1), (2, 2), (2, 5), (8, 3), (8, 7)}  # COMPLETE only
    assert tuple(table.loc[(2, 5)]) == (120.0, 0.0)
    assert tuple(table.loc[(2, 1)]) == (250.0, 100.0)
    assert tuple(table.loc[(2, 2)]) == (250.0, 100.0)


def test_counting_infeasible_trials_when_asked(tmp_path):
    url = db.write_paper_database(str(tmp_path))
    study = load_study(url, goals=["classification_error<0.2"], statuses=("COMPLETE", "INFEASIBLE"))
    assert _by_batch(steps_to_result(study, study.goals[0])) == {2: (100, 3), 8: (50, 3)}


def scaling_factor(summary: pd.DataFrame, goal: str) -> float | None:
    """Steps to result at the smallest batch size over that at the largest (both reached)."""
    reached = summary[(summary["goal"] == goal)].dropna(subset=["steps_to_result"])
    if len(reached) < 2:
        return None
    ordered = reached.sort_values("batch_size")
    return float(ordered["steps_to_result"].iloc[0] / ordered["steps_to_result"].iloc[-1])


def test_scaling_factor_and_default_budgets(study):
    table = steps_to_result(study, parse_goal("classification_error<0.2")[0])
    assert scaling_factor(table, "classification_error<0.2") == pytest.approx(120 / 50)
    assert default_budgets(study, "steps") == [16, 64, 256]  # largest evaluated step 400
    assert default_budgets(study, "examples") == [8, 32, 128, 512][1:]  # median(2*400, 8*100)


def test_goal_steps_of_every_trial_whatever_its_status(study):
    """The per-trial goal table (report/goal_steps.csv): every loaded trial, each goal and
    split, the first step that strictly beats the goal; diverged and unfinished trials too."""
    table = goal_steps_table(study)
    assert list(table.columns) == GOAL_STEP_COLUMNS
    assert len(table) == 8 * 2 * 2  # trials x goals x splits
    assert table[["batch_size", "trial_id"]].drop_duplicates().values.tolist() == [
        [2, 1], [2, 2], [2, 3], [2, 4], [2, 5], [8, 3], [8, 7], [8, 9]]
    step = table.set_index(["goal", "split", "batch_size", "trial_id"])["step"]
    assert step[("classification_error<0.2", "val", 2, 5)] == 120
    assert step[("classification_error<0.2", "val", 2, 3)] == 100  # INFEASIBLE, reached anyway
    assert step[("classification_error<0.2", "val", 2, 4)] == 100  # INCOMPLETE
    assert step[("classification_error<0.2", "train", 2, 1)] == 250  # 0.2 itself is not below
    assert math.isnan(step[("classification_error<0.1", "val", 8, 9)])  # NaN never beats
    # steps to result is the earliest counted (COMPLETE) step of this table, per batch size
    counted = table[(table["status"] == "COMPLETE") & (table["split"] == "val")]
    firsts = counted.groupby(["goal", "batch_size"])["step"].min()
    for goal, answers in db.ANSWERS.items():
        assert {b: firsts[(goal, b)] for b in (2, 8)} == {b: s for b, (s, _) in answers["val"].items()}
    row = table[(table["trial_id"] == 2) & (table["batch_size"] == 2)].iloc[0]
    assert row["parameters"] == {"learning_rate": 0.5, "momentum": 0.99}
    assert row["effective_learning_rate"] == pytest.approx(50.0) and row["steps_run"] == 400
