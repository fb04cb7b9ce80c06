"""Goal detection is strict, first-step, and direction-aware."""

from components.goal_detection.goals import all_goals_reached, beats, detect_trial_goals, first_step_reaching
from components.spec import Goal

ROWS = [
    {"step": 0, "val/classification_error": 0.9, "train/classification_error": 0.9},
    {"step": 10, "val/classification_error": 0.10, "train/classification_error": 0.08},
    {"step": 5, "val/classification_error": 0.2, "train/classification_error": 0.2},
    {"step": 20, "val/classification_error": 0.05, "train/classification_error": 0.04},
    {"step": 30, "val/classification_error": 0.03, "train/classification_error": float("nan")},
]


def test_strictly_beats_and_ignores_non_finite():
    goal = Goal("classification_error", 0.1)
    assert not beats(0.1, goal) and beats(0.0999, goal)
    assert not beats(float("nan"), goal) and not beats(None, goal)
    up = Goal("average_precision", 0.3, "maximize")
    assert beats(0.31, up) and not beats(0.3, up)


def test_first_step_in_step_order_even_if_rows_are_not_sorted():
    assert first_step_reaching(ROWS, Goal("classification_error", 0.1)) == 20  # 0.10 is not < 0.10
    assert first_step_reaching(ROWS, Goal("classification_error", 0.25)) == 5
    assert first_step_reaching(ROWS, Goal("classification_error", 0.1), "train") == 10
    assert first_step_reaching(ROWS, Goal("classification_error", 0.01)) is None


def test_all_goals_and_per_split_records():
    goals = [Goal("classification_error", 0.25), Goal("classification_error", 0.04)]
    assert all_goals_reached(ROWS, goals)
    assert not all_goals_reached(ROWS[:4], goals)
    records = detect_trial_goals(ROWS, goals)
    by = {(r["goal"], r["split"]): r["step"] for r in records}
    assert by[("classification_error<0.04", "val")] == 30
    assert by[("classification_error<0.04", "train")] is None  # 0.04 is not < 0.04, then NaN
