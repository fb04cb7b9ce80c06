"""Loading a workload from the paper's released layout: where it is, goals, statuses, first N."""

import json
import math

import pytest

from batchscale.analysis.reading.study_reader import load_study
from batchscale.core.spec import Goal, SpecError
from batchscale.workloads.defaults import default_goal
from tests import paper_database as db


@pytest.fixture
def root(tmp_path):
    db.write_paper_database(str(tmp_path))
    return tmp_path


def test_loads_trials_measurements_and_search_space(root):
    study = load_study(str(root / db.WORKLOAD))
    workload = (study.dataset, study.model, study.optimizer)
    assert workload == ("fashion_mnist", "simple_cnn_base", "momentum")
    assert study.name == db.WORKLOAD and study.layout == "paper" and study.spec is None
    assert study.goals == (default_goal("fashion_mnist", "simple_cnn_base"),)  # Figure 1's 0.1
    assert study.goals[0].value == 0.1
    assert study.batch_sizes == [2, 8]
    assert len(study.trials) == 8 and set(study.trials["status"]) == {"COMPLETE", "INCOMPLETE", "INFEASIBLE"}
    assert list(study.trials.columns[:4]) == ["batch_size", "trial_id", "status", "steps"]
    assert {"learning_rate", "momentum"} <= set(study.trials.columns)
    assert len(study.measurements) == sum(len(r) for t in db.TRIALS.values() for *_, r in t.values())
    assert study.measurements["val/classification_error"].isna().sum() == 1  # trial 9's nan
    assert study.search_space[2] == db.PARAMETER_CONFIGS
    assert len(study.counted_trials()) == 5
    assert set(study.counted_measurements()["trial_id"]) == {1, 2, 5, 3, 7}


def test_finds_the_one_workload_below_a_parent_folder(root):
    assert load_study(str(root / "fashion_mnist")).name == db.WORKLOAD
    assert load_study(str(root)).name == db.WORKLOAD


def test_several_workloads_must_be_named(root):
    db.write_paper_database(str(root), "cifar_10/resnet_8/nesterov_momentum")
    with pytest.raises(SpecError, match="holds 2 workloads; name one: .*cifar_10/resnet_8/nesterov"):
        load_study(str(root))
    assert load_study(str(root / "cifar_10")).goals == (Goal("classification_error", 0.3),)


def test_unknown_workload_needs_a_goal(root):
    db.write_paper_database(str(root / "other"), "svhn/wide_resnet/sgd")
    with pytest.raises(SpecError, match="no default goal for svhn/wide_resnet; pass one"):
        load_study(str(root / "other"))
    study = load_study(str(root / "other"), goals=["val/classification_error<0.2",
                                                   Goal("classification_error", 0.5)])
    assert study.goals == (Goal("classification_error", 0.2), Goal("classification_error", 0.5))
    # A goal on a metric the trials did not measure is refused, naming what they did.
    with pytest.raises(SpecError,
                       match="metric 'accuracy' is not measured here; allowed: classification_error"):
        load_study(str(root / "other"), goals=["accuracy>0.9"])
    with pytest.raises(SpecError, match="metric 'x' is not measured here"):
        load_study(str(root / "other"), goals=[Goal("x", 1.0)])


def test_first_n_trials_by_trial_id(root):
    study = load_study(str(root), num_trials=2)
    assert sorted(study.trials.query("batch_size == 2")["trial_id"]) == [1, 2]
    assert sorted(study.trials.query("batch_size == 8")["trial_id"]) == [3, 7]
    assert set(study.measurements["trial_id"]) == {1, 2, 3, 7}
    with_infeasible = load_study(str(root), num_trials=3, statuses=("COMPLETE", "INFEASIBLE"))
    # INCOMPLETE 4 comes after the third counted trial (3), so it is left out
    assert sorted(with_infeasible.trials.query("batch_size == 2")["trial_id"]) == [1, 2, 3]
    with pytest.raises(SpecError, match="num_trials: 3 requested but batch size 8 has only 2"):
        load_study(str(root), num_trials=3)


@pytest.mark.parametrize("bad, match", [
    ({"statuses": ("DONE",)}, "statuses: \\['DONE'\\] not allowed; choose from COMPLETE"),
    ({"num_trials": 0}, "num_trials: 0 must be a positive integer"),
])
def test_bad_options_are_one_line(root, bad, match):
    with pytest.raises(SpecError, match=match):
        load_study(str(root), **bad)


def test_missing_or_studyless_location_says_so(tmp_path):
    with pytest.raises(SpecError, match="is empty or does not exist"):
        load_study(str(tmp_path / "missing"))
    (tmp_path / "notes").mkdir()
    with pytest.raises(SpecError, match="holds no study"):
        load_study(str(tmp_path))


def test_reads_a_database_in_the_papers_released_layout(tmp_path):
    """No study_spec.json, paper column names, a test/ column we do not write, a trial
    folder without metadata yet (skipped)."""
    base = tmp_path / "paper" / "fashion_mnist" / "simple_cnn_base" / "sgd" / "1024"
    (base / "7").mkdir(parents=True)
    (base / "8").mkdir()
    (base / "study.json").write_text(json.dumps({
        "batch_size": 1024, "dataset": "fashion_mnist", "model": "simple_cnn_base",
        "optimizer": "sgd", "early_stopping": False, "train_steps": 0,
        "parameter_configs": {"learning_rate": {"type": "DOUBLE", "min_value": 0.01,
                                                "max_value": 10, "scale": "LOG_SCALE"}}}))
    (base / "7" / "metadata.json").write_text(json.dumps(
        {"parameters": {"learning_rate": 0.5}, "status": "COMPLETE", "steps": 300, "trial_id": 7}))
    (base / "7" / "measurements.csv").write_text(
        "step,train/cross_entropy_error,val/classification_error,test/classification_error\n"
        "0,2.3,0.9,0.9\n150,0.4,0.12,0.13\n300,0.3,0.09,0.095\n")
    study = load_study(str(tmp_path / "paper"))
    assert (study.dataset, study.optimizer, study.batch_sizes) == ("fashion_mnist", "sgd", [1024])
    assert study.trials.to_dict("records") == [
        {"batch_size": 1024, "trial_id": 7, "status": "COMPLETE", "steps": 300, "learning_rate": 0.5}]
    assert study.measurements["step"].tolist() == [0, 150, 300]
    assert study.measurements["test/classification_error"].tolist()[2] == 0.095


def test_metadata_is_a_table_of_its_own_not_metaparameters(tmp_path):
    """What metadata.json holds beside status, steps and parameters (wall_time, reasons, ...)
    is in ``Study.metadata``; ``trials`` keeps only the metaparameters as extra columns."""
    db.write_paper_database(str(tmp_path))
    meta = tmp_path / db.WORKLOAD / "8" / "3" / "metadata.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "wall_time": 12.5,
                                "stop_reason": "goal", "trainer_parameters": {"decay_steps": 9}}))
    study = load_study(str(tmp_path), num_trials=2)
    assert study.metaparameters == ["learning_rate", "momentum"]
    assert "wall_time" not in study.trials and "stop_reason" not in study.trials
    assert list(study.metadata.columns[:2]) == ["batch_size", "trial_id"]
    assert "trainer_parameters" not in study.metadata and "parameters" not in study.metadata
    assert study.metadata[["batch_size", "trial_id"]].values.tolist() == [[2, 1], [2, 2], [8, 3], [8, 7]]
    rows = study.metadata.set_index(["batch_size", "trial_id"])
    assert rows.loc[(8, 3), "wall_time"] == 12.5 and rows.loc[(8, 3), "stop_reason"] == "goal"
    assert math.isnan(rows.loc[(2, 1), "wall_time"])
