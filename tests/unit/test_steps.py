"""Steps to result as the paper computes it: earliest step, COMPLETE trials, ties to lower id."""

import math

import pandas as pd

from components.aggregate.steps import scaling_factor, steps_to_result


def _row(batch_size, trial_id, step, status="COMPLETE", split="val"):
    return {"batch_size": batch_size, "trial_id": trial_id, "status": status,
            "goal": "classification_error<0.1", "split": split, "step": step,
            "learning_rate": 0.1 * trial_id, "momentum": 0.9, "effective_learning_rate": trial_id}


def test_earliest_complete_trial_wins_ties_to_lower_id():
    table = pd.DataFrame([
        _row(8, 1, 400), _row(8, 2, 300), _row(8, 3, 300), _row(8, 4, 100, status="INFEASIBLE"),
        _row(8, 5, math.nan), _row(64, 1, math.nan), _row(64, 2, 50), _row(64, 2, 10, split="train"),
    ])
    summary = steps_to_result(table).set_index("batch_size")
    assert summary.loc[8, "steps_to_result"] == 300 and summary.loc[8, "best_trial"] == 2
    assert summary.loc[8, "infeasible"] == 1 and summary.loc[8, "reached"] == 3
    assert summary.loc[8, "examples_to_result"] == 2400
    assert summary.loc[64, "steps_to_result"] == 50 and summary.loc[64, "learning_rate"] == 0.2
    assert scaling_factor(steps_to_result(table), "classification_error<0.1") == 6.0
    assert steps_to_result(table, "train").set_index("batch_size").loc[64, "steps_to_result"] == 10


def test_no_trial_reaching_gives_nan_not_an_error():
    summary = steps_to_result(pd.DataFrame([_row(8, 1, math.nan)]))
    assert math.isnan(summary["steps_to_result"].iloc[0]) and summary["best_trial"].iloc[0] is None
