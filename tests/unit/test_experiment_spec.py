"""The experiment spec: each axis derives its studies from the resolved base through
parse_spec, refuses bad input in one line, and every shipped experiment parses."""

from pathlib import Path

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


# (case, what is changed in the experiment, the message's words); docs/bad-input.md's
# "Experiments" table lists the same cases.
CASES = [
    ("one-value", {"axis": {"optimizer": ["sgd"]}},
     "axis.optimizer: must be a list of at least two values to compare"),
    ("unknown-axis", {"axis": {"speed": [1, 2]}}, "axis: unknown kind 'speed'; allowed: optimizer, model"),
    ("value-twice", {"axis": {"optimizer": ["sgd", "sgd"]}}, "axis.optimizer: lists a value twice"),
    ("unknown-optimizer", {"axis": {"optimizer": ["sgd", "adagrad"]}},
     "axis: optimizer 'adagrad' (study adagrad): workload.optimizer"),
    ("fixed-out-of-range", {"axis": {"fixed": {"label_smoothing": [0.0, 2.0]}}},
     "axis: fixed label_smoothing 2.0"),
    ("one-class", {"axis": {"classes": [1, 2]}}, "axis.classes: 1 is out of range"),
    ("data-size-zero", {"axis": {"data_size": [0, 500]}}, "axis.data_size: 0 is out of range"),
    ("data-size-too-large", {"axis": {"data_size": [500, 9000]}},
     "axis: data_size 9000 (study train_9000): workload.options.train_size"),
    ("study-named-comparison", {"axis": {"model": ["comparison", "fc_64"]}},
     "axis.model: a value gives the study name 'comparison'"),
    ("normalize-unmeasured", {"normalize_at": 3},
     "normalize_at: batch size 3 is not measured by every study"),
    ("override-unknown-study", {"overrides": {"adam": {}}},
     "overrides.adam: names no study of this experiment"),
    ("override-store", {"overrides": {"sgd": {"store": "/x"}}},
     "overrides.sgd.store: is the experiment's to set"),
    ("override-the-axis", {"overrides": {"sgd": {"workload": {"optimizer": "adam"}}}},
     "overrides.sgd: changes the axis's own field (optimizer: adam, not sgd)"),
    ("goal-ladder-of-one", {"axis": {"goal": ["classification_error<0.1"]}},
     "axis.goal: must be a list of at least two values to compare"),
    ("name-slash", {"experiment": "a/b"}, "experiment: 'a/b' is not allowed"),
    ("base-unknown", {"base": "nope"}, "base: 'nope' is not a shipped study"),
    ("base-bad-field", {"base": {"workload": {"dataset": "mnist_5k", "model": "fc_128_128"},
                                 "trials_per_batch_size": 0}},
     "base.trials_per_batch_size: 0 is out of range"),
    ("unknown-field", {"colour": 1}, "colour: unknown experiment field"),
]


@pytest.mark.parametrize("case, changes, message", CASES, ids=[c[0] for c in CASES])
def test_bad_experiments_are_refused_in_one_line(case, changes, message):
    with pytest.raises(SpecError) as err:
        parse_experiment(raw(**changes))
    assert str(err.value).startswith(message) and "\n" not in str(err.value), str(err.value)


def test_docs_bad_input_lists_every_experiment_case():
    """docs/bad-input.md's "Experiments" table: one row per case, the same words."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "bad-input.md").read_text()
    section = doc.split("## Experiments", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1].strip("`")
    assert rows == {case: message for case, _, message in CASES}
    assert f"Cases tested: {len(CASES)}." in section


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


def test_an_experiment_over_a_study_folder_is_refused_by_the_pipelines_first_task(tmp_path):
    """A cluster run has no ``run --local`` preflight: its first task refuses an experiment
    whose folder is a study's before it writes the experiment's record there."""
    from types import SimpleNamespace

    from batchscale.components.prepare_experiment_data import prepare_experiment_data

    (tmp_path / "fig").mkdir()
    (tmp_path / "fig" / "study_spec.json").write_text("{}")
    out = SimpleNamespace(path=str(tmp_path / "card.md"))
    with pytest.raises(SpecError, match=r"^experiment: .*/fig is a study's folder"):
        prepare_experiment_data.python_func(experiment_spec=raw(store=str(tmp_path)),
                                            store_root="", workload=out)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["fig", "study_spec.json"]


def test_a_study_the_pipeline_was_not_compiled_for_is_refused_before_stage_1_writes(tmp_path):
    """The pack sizes are a compile-time map by study; an experiment_spec edited in the
    Kubeflow UI to other axis values gets one line, not a KeyError after some studies
    were registered."""
    from batchscale.rounds.experiment_stage import plan_experiment_lanes

    experiment = parse_experiment(raw(store=str(tmp_path)))
    with pytest.raises(SpecError, match=r"^experiment_spec: study 'momentum' is not one this "
                                        r"pipeline was compiled for \(its studies: sgd, "):
        plan_experiment_lanes(experiment, 1, {"sgd": 10, "adam": 10.0}, lanes=2)
    assert list(tmp_path.iterdir()) == []
