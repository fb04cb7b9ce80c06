"""The study store on a local folder: the paper's layout, refusal to mix specs, resumable
trial records and measurements.csv read back. tests/integration/test_store_gcs.py runs the
same tests on gs:// (real client, GCS emulator). Reading whole studies, ours and the
paper's, is the study reader's (tests/unit/test_loading.py)."""

import json
import math

import numpy as np
import pytest

from batchscale.core.spec import SpecError, TrialSpec
from batchscale.store.layout import StudyStore, parse_measurements
from batchscale.validation import default_spec_dict, parse_spec


@pytest.fixture
def root(tmp_path):
    return str(tmp_path / "store")


def _spec(root, **changes):
    return parse_spec({**default_spec_dict(), "store": root, **changes})


def _snapshot(store):
    return {p: store.fs.read_bytes(p) for p in store.fs.list_files("", recursive=True)}


def test_register_writes_the_paper_layout(root):
    spec = _spec(root, batch_sizes=[8, 64], max_steps=100)
    store = StudyStore(root)
    store.register_study(spec)
    study = json.loads(store.fs.read_text("quickstart/mnist_5k/fc_128_128/nesterov_momentum/64/study.json"))
    assert study["batch_size"] == 64 and study["optimizer"] == "nesterov_momentum"
    assert study["parameter_configs"]["momentum"]["scale"] == "REVERSE_LOG_SCALE"
    assert study["parameter_configs"]["learning_rate"] == {
        "type": "DOUBLE", "min_value": 0.003, "max_value": 1.0, "scale": "LOG_SCALE"}
    assert parse_spec(store.read_spec_dict("quickstart")) == spec


def test_a_different_spec_under_the_same_name_is_refused_and_nothing_changes(root):
    store = StudyStore(root)
    store.register_study(_spec(root))
    before = _snapshot(store)
    with pytest.raises(SpecError, match=r"^seed: differs from study 'quickstart' in .* \(0 there, 3 here\)"):
        store.register_study(_spec(root, seed=3))
    assert _snapshot(store) == before
    store.register_study(_spec(root, trials_per_batch_size=12))  # growing is allowed


def test_trial_records_round_trip_and_mark_done(root):
    spec = _spec(root, batch_sizes=[16], max_steps=10)
    store = StudyStore(root)
    store.register_study(spec)
    trial = TrialSpec("quickstart", 16, 3, {"learning_rate": 0.1, "momentum": 0.9})
    assert store.read_metadata(spec, trial) is None and not store.is_done(spec, trial)
    store.write_metadata(spec, trial, {"trial_id": 3, "status": "INCOMPLETE", "parameters": trial.parameters})
    assert not store.is_done(spec, trial)
    rows = [{"step": 0, "val/classification_error": 0.9, "wall_time": 0.0},
            {"step": 5, "val/classification_error": 0.123456789, "wall_time": 1.5}]
    store.write_measurements(spec, trial, rows)
    store.write_metadata(spec, trial, {"trial_id": 3, "status": "INFEASIBLE", "parameters": trial.parameters})
    assert store.is_done(spec, trial)
    assert store.read_metadata(spec, trial)["status"] == "INFEASIBLE"
    assert store.fs.exists("quickstart/mnist_5k/fc_128_128/nesterov_momentum/16/3/measurements.csv")
    assert store.read_measurements(spec, trial) == rows  # floats exactly, steps as int
    assert isinstance(store.read_measurements(spec, trial)[1]["step"], int)
    other = TrialSpec("quickstart", 16, 4, {})
    assert store.read_measurements(spec, other) == []  # not started yet


def test_dataset_cache_round_trip(root):
    store = StudyStore(root)
    assert not store.has_dataset("toy")
    images = np.arange(2 * 4 * 4, dtype=np.uint8).reshape(2, 4, 4, 1)
    store.write_dataset("toy", {"train": (images, np.array([0, 1]))}, {"name": "toy"})
    assert store.has_dataset("toy")
    x, y = store.read_split("toy", "train")
    assert np.array_equal(x, images) and list(y) == [0, 1]


def test_parse_measurements_keeps_every_column_and_marks_bad_values_nan():
    """The paper's column names and a test/ column we do not write; an unparsable value is
    NaN, a row without a step is dropped."""
    table = parse_measurements("step,train/cross_entropy_error,val/classification_error,"
                               "test/classification_error\n0,2.3,0.9,0.9\n150,0.4,oops,0.13\n"
                               ",1,1,1\n300,0.3,0.09,0.095\n")
    assert list(table.columns) == ["step", "train/cross_entropy_error", "val/classification_error",
                                   "test/classification_error"]
    assert table["step"].tolist() == [0, 150, 300] and str(table["step"].dtype) == "int64"
    assert math.isnan(table["val/classification_error"].iloc[1])
    assert table["test/classification_error"].iloc[2] == 0.095


def test_study_json_claims_a_grown_budget_only_once_its_trials_ran_it(root):
    """Growing max_steps: study.json keeps the old budget until every trial of the batch
    size has finished under the new one (aggregate's settle_budgets), so it never claims a
    budget its trials did not run."""
    from batchscale.search.trials import make_trials

    def claimed(spec, batch_size):
        return json.loads(store.fs.read_text(f"{store.batch_dir(spec, batch_size)}/study.json"))["max_steps"]

    store = StudyStore(root)
    short = _spec(root, batch_sizes=[8, 16], max_steps=30)
    store.register_study(short)
    long = _spec(root, batch_sizes=[8, 16], max_steps=600)
    store.register_study(long)
    assert claimed(long, 8) == claimed(long, 16) == 30
    trials = make_trials(long)
    for trial in trials:  # batch 8 finished under 600 steps; batch 16 one trial still at 30
        budget = 30 if (trial.batch_size, trial.trial_id) == (16, 1) else 600
        store.write_metadata(long, trial, {"status": "COMPLETE", "stop_reason": "budget",
                                           "max_steps": budget, "steps": budget})
    assert store.settle_budgets(long, trials) == [8]
    assert (claimed(long, 8), claimed(long, 16)) == (600, 30)
    store.write_metadata(long, trials[[t.batch_size for t in trials].index(16)],
                         {"status": "COMPLETE", "stop_reason": "goal", "max_steps": 600, "steps": 70})
    assert store.settle_budgets(long, trials) == [16] and claimed(long, 16) == 600


def test_measurements_read_back_exactly_with_no_warning():
    """Floats written as repr() come back bit for bit (the analysis agrees exactly with the
    paper's code), on pandas 2 and 3 alike, without pandas 3's deprecation warning."""
    import warnings

    import numpy as np

    values = np.random.default_rng(0).random(2000) * np.logspace(-8, 8, 2000)
    text = "step,val/x\n" + "".join(f"{i},{float(v)!r}\n" for i, v in enumerate(values))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = parse_measurements(text)
    assert (table["val/x"].to_numpy() == values).all()
