"""The experiment spec: each axis derives its studies from the resolved base through
parse_spec, refuses bad input in one line, and every shipped experiment parses."""

import pytest

from batchscale.core.spec import SpecError
from batchscale.validation.experiment_spec import is_experiment, parse_experiment
from batchscale.validation.spec_files import default_spec_dict, load_spec_dict, shipped_experiments


def raw(**changes):
    out = {"experiment": "fig", "store": "/tmp/store", "base": "quickstart",
           "axis": {"optimizer": ["sgd", "momentum", "nesterov_momentum"]}}
    out.update(changes)
    return out


def test_optimizer_axis_studies_differ_from_the_base_only_in_the_optimizer():
    experiment = parse_experiment(raw())
    base = parse_experiment(raw()).study("nesterov_momentum")
    assert [s.label for s in experiment.studies] == ["sgd", "momentum", "nesterov_momentum"]
    sgd = experiment.study("sgd")
    assert sgd.workload.optimizer == "sgd"
    assert [p.name for p in sgd.search_space] == ["learning_rate"]  # sgd reads no momentum
    assert [p.name for p in experiment.study("momentum").search_space] == ["learning_rate", "momentum"]
    for spec in experiment.specs:  # the experiment's folder is each study's store root
        assert spec.store == "/tmp/store/fig" and spec.batch_sizes == base.batch_sizes
        assert spec.max_steps == base.max_steps and spec.goals == base.goals
    quickstart = default_spec_dict("quickstart")
    assert experiment.normalize_at == min(quickstart["batch_sizes"])
    assert experiment.locations()[0] == "/tmp/store/fig/sgd"
    assert experiment.trials == 3 * len(quickstart["batch_sizes"]) * quickstart["trials_per_batch_size"]


def test_other_axes():
    fixed = parse_experiment(raw(axis={"fixed": {"label_smoothing": [0.0, 0.1]}}))
    assert [s.label for s in fixed.studies] == ["label_smoothing_0", "label_smoothing_0.1"]
    assert fixed.study("label_smoothing_0.1").fixed["label_smoothing"] == 0.1
    models = parse_experiment(raw(axis={"model": ["fc_64_64", "fc_128_128_128"]}))
    assert [s.workload.model for s in models.specs] == ["fc_64_64", "fc_128_128_128"]
    ladder = ["classification_error<0.1", "val/classification_error<0.08"]
    goals = parse_experiment(raw(axis={"goal": ladder}))
    assert len(goals.studies) == 1 and [g.value for g in goals.specs[0].goals] == [0.1, 0.08]
    override = parse_experiment(raw(overrides={"sgd": {"trials_per_batch_size": 3,
                                                       "workload": {"precision": "float32"}}}))
    assert override.study("sgd").trials_per_batch_size == 3
    assert override.study("momentum").trials_per_batch_size == 10
    assert parse_experiment(raw(), store_root="gs://bucket/x").study("sgd").store == "gs://bucket/x/fig"


@pytest.mark.parametrize("changes, message", [
    ({"axis": {"optimizer": ["sgd"]}}, "axis.optimizer: must be a list of at least two values"),
    ({"axis": {"speed": [1, 2]}}, "axis: unknown kind 'speed'; allowed: optimizer, model"),
    ({"axis": {"optimizer": ["sgd", "sgd"]}}, "lists a value twice"),
    ({"axis": {"optimizer": ["sgd", "adagrad"]}},
     "axis: optimizer 'adagrad' (study adagrad): workload.optimizer"),
    ({"axis": {"fixed": {"label_smoothing": [0.0, 2.0]}}}, "axis: fixed label_smoothing 2.0"),
    ({"axis": {"classes": [1, 2]}}, "axis.classes: 1 is out of range"),
    ({"normalize_at": 3}, "normalize_at: batch size 3 is not measured by every study"),
    ({"overrides": {"adam": {}}}, "overrides.adam: names no study of this experiment"),
    ({"overrides": {"sgd": {"store": "/x"}}}, "overrides.sgd.store: is the experiment's to set"),
    ({"experiment": "a/b"}, "experiment: 'a/b' is not allowed"),
    ({"base": "nope"}, "base: 'nope' is not a shipped study"),
    ({"base": {"workload": {"dataset": "mnist_5k", "model": "fc_128_128"}, "trials_per_batch_size": 0}},
     "base.trials_per_batch_size: 0 is out of range"),
    ({"colour": 1}, "colour: unknown experiment field"),
])
def test_bad_experiments_are_refused_in_one_line(changes, message):
    with pytest.raises(SpecError) as err:
        parse_experiment(raw(**changes))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_every_shipped_experiment_parses_and_round_trips():
    assert {"figure2_local", "figure3_local", "figure4_local", "figure6_local", "figure7_local",
            "figure2_paper", "figure3_paper", "figure4_paper", "figure6_paper",
            "figure7_paper"} <= set(shipped_experiments())
    for name in shipped_experiments():
        spec = load_spec_dict(name)
        assert is_experiment(spec) and not is_experiment(default_spec_dict("quickstart"))
        experiment = parse_experiment(spec)
        again = parse_experiment(experiment.to_dict())  # the form that crosses KFP
        assert again.specs == experiment.specs, name
        assert all(s.spec.name == s.label for s in experiment.studies)
