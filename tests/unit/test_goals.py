"""The one goal rule and syntax: strict, first-step, direction-aware, and refusing goals
that name a metric the workload does not measure or point the wrong way."""

import math
import re

import numpy as np
import pandas as pd
import pytest

from batchscale.core.goals import Goal, all_goals_reached, check_goal, first_step_reaching, parse_goal
from batchscale.core.names import METRIC_DIRECTIONS, METRIC_RANGES
from batchscale.core.spec import SpecError
from batchscale.workloads.defaults import default_goal

ROWS = [
    {"step": 0, "val/classification_error": 0.9, "train/classification_error": 0.9},
    {"step": 10, "val/classification_error": 0.10, "train/classification_error": 0.08},
    {"step": 5, "val/classification_error": 0.2, "train/classification_error": 0.2},
    {"step": 20, "val/classification_error": 0.05, "train/classification_error": 0.04},
    {"step": 30, "val/classification_error": 0.03, "train/classification_error": float("nan")},
]


def test_strictly_beats_and_ignores_non_finite():
    goal = Goal("classification_error", 0.1)
    assert not goal.beats(0.1) and goal.beats(0.0999)
    assert not goal.beats(float("nan")) and not goal.beats(None) and not goal.beats(-math.inf)
    up = Goal("average_precision", 0.3, "maximize")
    assert up.beats(0.31) and not up.beats(0.3) and not up.beats(math.inf)


def test_beats_is_the_same_rule_on_arrays_and_series():
    goal = Goal("classification_error", 0.1)
    values = [0.2, 0.1, 0.05, math.nan, -math.inf]
    expected = [goal.beats(v) for v in values]
    assert expected == [False, False, True, False, False]
    assert list(goal.beats(np.array(values))) == expected
    assert list(goal.beats(pd.Series(values))) == expected


def test_first_step_in_step_order_even_if_rows_are_not_sorted():
    assert first_step_reaching(ROWS, Goal("classification_error", 0.1)) == 20  # 0.10 is not < 0.10
    assert first_step_reaching(ROWS, Goal("classification_error", 0.25)) == 5
    assert first_step_reaching(ROWS, Goal("classification_error", 0.1), "train") == 10
    assert first_step_reaching(ROWS, Goal("classification_error", 0.01)) is None


def test_all_goals_and_per_split_records():
    goals = [Goal("classification_error", 0.25), Goal("classification_error", 0.04)]
    assert all_goals_reached(ROWS, goals)
    assert not all_goals_reached(ROWS[:4], goals)
    by = {(g.label, s): first_step_reaching(ROWS, g, s) for g in goals for s in ("val", "train")}
    assert by[("classification_error<0.04", "val")] == 30
    assert by[("classification_error<0.04", "train")] is None  # 0.04 is not < 0.04, then NaN


@pytest.mark.parametrize("text, goal, split", [
    ("classification_error<0.3", Goal("classification_error", 0.3), None),
    ("val/average_precision>0.31", Goal("average_precision", 0.31, "maximize"), "val"),
    (" train/cross_entropy_error < 3.9 ", Goal("cross_entropy_error", 3.9), "train"),
    ("classification_error<1e-2", Goal("classification_error", 0.01), None),
])
def test_parse_goal(text, goal, split):
    assert parse_goal(text) == (goal, split)
    assert parse_goal(goal.label)[0] == goal  # the label reads back as the same goal


@pytest.mark.parametrize("text, message", [
    ("classification_error", "must look like METRIC<VALUE or METRIC>VALUE"),
    ("<0.3", "must look like"),
    ("error<abc", "must look like"),
    ("a<1<2", "must look like"),
    ("classification_error=0.05", "'=' is not a direction"),
    ("accuracy>0.9", "metric 'accuracy' is not measured here; allowed: classification_error"),
    ("classification_error>0.1",
     "classification_error improves by falling; write classification_error<VALUE"),
    ("average_precision<0.3", "improves by rising"),
    ("test/classification_error<0.1", "split 'test'; allowed: val, train"),
])
def test_parse_goal_refuses_with_one_line(text, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(")) as err:
        parse_goal(text)
    assert "\n" not in str(err.value) and str(err.value).startswith("goal: ")


def test_goals_are_checked_against_the_metrics_measured():
    with pytest.raises(SpecError, match="metric 'average_precision' is not measured here; allowed: "
                                        "classification_error, cross_entropy_error"):
        parse_goal("average_precision>0.3", ("classification_error", "cross_entropy_error"), "--goal")
    with pytest.raises(SpecError, match="not a finite number"):
        check_goal(Goal("classification_error", math.inf))


def test_the_papers_default_goals_come_from_the_workload_registry():
    assert default_goal("cifar_10", "resnet_8") == Goal("classification_error", 0.3)
    assert default_goal("open_images", "resnet_50") == Goal("average_precision", 0.31, "maximize")
    assert default_goal("common_crawl", "transformer_base") == default_goal("c4", "transformer_base")
    assert default_goal("cifar_10", "no_such_model") is None


@pytest.mark.parametrize("text", [
    "classification_error<0.5", "classification_error<0", "classification_error<0.999",
    "cross_entropy_error<0", "cross_entropy_error<1e6", "average_precision>0.001", "average_precision>1",
])
def test_goals_inside_the_metrics_range_pass(text):
    goal, _ = parse_goal(text)
    assert check_goal(goal) == goal


@pytest.mark.parametrize("goal, allowed", [
    (Goal("classification_error", 1.5),
     "lies in [0, 1]; allowed: classification_error<VALUE with 0 < VALUE < 1"),
    (Goal("classification_error", 1.0), "lies in [0, 1]"),  # every evaluation that errs less beats it
    (Goal("classification_error", -0.1), "lies in [0, 1]"),
    (Goal("cross_entropy_error", -1.0),
     "lies in [0, inf); allowed: cross_entropy_error<VALUE with 0 < VALUE"),
    (Goal("average_precision", 0.0, "maximize"), "(or 1: never reached"),
    (Goal("average_precision", 1.2, "maximize"), "lies in [0, 1]"),
])
def test_goals_outside_the_metrics_range_are_refused_in_every_form(goal, allowed):
    """The one range rule: a Goal, its label through parse_goal (--goal, report) and a
    spec's goal mapping all meet it."""
    with pytest.raises(SpecError, match=f"^goal: {re.escape(goal.label)} is out of range for .*"
                                        f"{re.escape(allowed)}"):
        check_goal(goal)
    with pytest.raises(SpecError, match=f"^--goal: {re.escape(goal.label)} is out of range"):
        parse_goal(goal.label, where="--goal")


def test_every_metric_a_goal_may_name_has_a_range():
    assert set(METRIC_RANGES) == set(METRIC_DIRECTIONS)
    assert all(lo < hi for lo, hi in METRIC_RANGES.values())
