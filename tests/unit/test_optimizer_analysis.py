"""The analysis names each optimizer's own parameters: an AdamW study's tables carry β₁
where a momentum study's carry γ, its effective learning rate is η, and its figures and
methods say so; the paper's database reads as before (tests/unit/test_steps.py)."""

from __future__ import annotations

import json
import math

import pytest

from batchscale.analysis.pages.report_sections import effective_text, step_columns
from batchscale.analysis.pages.report_summary import summary_json
from batchscale.analysis.reading.study_reader import load_study
from batchscale.analysis.report import analyse
from batchscale.analysis.statistics.goal_steps import goal_steps_table
from batchscale.analysis.statistics.metaparameters import optimal_metaparameters
from batchscale.analysis.statistics.steps import steps_to_result
from batchscale.core.goals import parse_goal
from batchscale.store.filesystem import open_root
from tests import paper_database as db

WORKLOAD = "fashion_mnist/simple_cnn_base/adamw"
GOAL = "classification_error<0.1"


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The paper database's trials, as an AdamW study: each momentum becomes beta_1."""
    fs = open_root(str(tmp_path_factory.mktemp("adamw")))
    configs = {"learning_rate": db.PARAMETER_CONFIGS["learning_rate"],
               "beta_1": db.PARAMETER_CONFIGS["momentum"]}
    for batch_size, trials in db.TRIALS.items():
        base = f"{WORKLOAD}/{batch_size}"
        fs.write_text(f"{base}/study.json", json.dumps({
            "batch_size": batch_size, "dataset": "fashion_mnist", "model": "simple_cnn_base",
            "optimizer": "adamw", "train_steps": 0, "parameter_configs": configs}))
        for trial_id, (status, params, rows) in trials.items():
            params = {"learning_rate": params["learning_rate"], "beta_1": params["momentum"]}
            fs.write_text(f"{base}/{trial_id}/metadata.json", json.dumps({
                "parameters": params, "status": status, "steps": rows[-1][0], "trial_id": trial_id}))
            lines = ["step,train/classification_error,val/classification_error"]
            lines += [f"{s},{db._csv(t)},{db._csv(v)}" for s, v, t in rows]
            fs.write_text(f"{base}/{trial_id}/measurements.csv", "\n".join(lines) + "\n")
    return load_study(fs.url(WORKLOAD), goals=[GOAL])


def test_tables_carry_beta_1_and_the_learning_rate_as_effective(study):
    table = steps_to_result(study, parse_goal(GOAL)[0]).set_index("batch_size")
    # the same best trials as the momentum database: trial 2 (lr 0.5, 0.99) at batch 2
    assert table.loc[2, "best_trial"] == 2 and table.loc[2, "beta_1"] == 0.99
    assert math.isnan(table.loc[2, "momentum"])  # AdamW has none
    assert table.loc[2, "effective_learning_rate"] == 0.5  # η, not η/(1−β₁)
    assert step_columns(table.reset_index())[8:11] == ["learning_rate", "beta_1",
                                                      "effective_learning_rate"]
    optimal = optimal_metaparameters(table.reset_index(), "adamw")
    assert list(optimal.columns[3:7]) == ["learning_rate", "momentum", "beta_1",
                                          "effective_learning_rate"]
    assert list(optimal["effective_learning_rate"]) == list(optimal["learning_rate"])
    goals = goal_steps_table(study)
    assert goals["momentum"].isna().all()
    assert (goals["effective_learning_rate"] == goals["learning_rate"]).all()


def test_figures_and_methods_name_beta_1_and_eta(study):
    analysis = analyse(study, resamples=20)
    captions = {name: caption for name, (_, caption) in analysis.figures.items()}
    assert "learning rate, β₁ and effective learning rate η at each" in captions[
        "optimal_metaparameters.svg"]
    assert "1 − β₁ per batch size" in captions["lr_momentum.svg"]
    assert "constant effective learning rate" not in captions["lr_momentum.svg"]
    scatter = analysis.figures["lr_momentum.svg"][0].decode()
    assert "η/(1−γ) contours" not in scatter
    # the metaparameter laws ran (two batch sizes: too few to fit) and summary.json says so
    assert analysis.laws.reason == "needs 3 batch sizes with a best trial, has 2"
    assert summary_json(analysis)["metaparameter_laws"]["reason"] == analysis.laws.reason
    assert "metaparameter_laws.svg" in analysis.figures
    assert effective_text("adamw").startswith("Effective learning rate: η itself, for adamw")
    assert effective_text("momentum").startswith("Effective learning rate: η/(1−γ)")


def test_the_paper_database_keeps_momentum(tmp_path):
    study = load_study(db.write_paper_database(str(tmp_path)), goals=[GOAL])
    table = steps_to_result(study, parse_goal(GOAL)[0])
    assert "beta_1" not in table and step_columns(table)[8:11] == [
        "learning_rate", "momentum", "effective_learning_rate"]
    analysis = analyse(study, resamples=20)
    assert "momentum and effective learning rate η/(1−γ)" in analysis.figures[
        "optimal_metaparameters.svg"][1]


def test_a_study_without_momentum_or_own_columns_shows_no_momentum_column():
    """Plain SGD, or an Adam-family study that searches none of beta_1...: its trials hold
    no momentum, and the steps table does not show an empty momentum column."""
    import pandas as pd

    summary = pd.DataFrame({"batch_size": [8, 16], "steps_to_result": [100, 60],
                            "learning_rate": [0.1, 0.2], "momentum": [float("nan")] * 2,
                            "effective_learning_rate": [0.1, 0.2]})
    assert "momentum" not in step_columns(summary)
    assert "momentum" in step_columns(summary.assign(momentum=[0.9, 0.95]))
