"""Loading a workload from the paper's released layout: where it is, goals, statuses, first N."""

import pytest

from batchscale.analysis.study_reader import load_study
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
