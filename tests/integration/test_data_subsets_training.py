"""A study with ``train_size`` (and ``classes``) trains on that subset, end to end: one
trial of a tiny digits study through ``run_trial`` (the real pipeline, model and
lifecycle), whose recorded epochs say how many training examples it saw."""

from __future__ import annotations

from batchscale.search.trials import make_trials
from batchscale.store.layout import StudyStore
from batchscale.training.trainer import run_trial
from batchscale.validation import parse_spec
from tests.conftest import share_datasets, tiny_spec_dict


def test_a_trial_trains_on_the_nested_subset_of_its_classes(digits_store, tmp_path):
    root = str(tmp_path / "store")
    share_datasets(digits_store, root)  # prepared once, whatever the options
    workload = {"dataset": "digits", "model": "fc_32", "optimizer": "nesterov_momentum",
                "options": {"train_size": 100, "classes": 3}}
    spec = parse_spec(tiny_spec_dict(root, workload=workload, batch_sizes=[16], trials_per_batch_size=1,
                                     max_steps=10, evaluation={"train_examples": 50}))
    store = StudyStore(root)
    store.register_study(spec)
    trial = make_trials(spec)[0]
    meta = run_trial(spec, trial, store, log=lambda *_: None)
    assert meta["status"] == "COMPLETE" and 1 <= meta["steps"] <= 10  # the goal may stop it early
    assert meta["epochs"] == meta["steps"] * 16 / 100  # epochs of the 100 examples kept
    rows = store.read_measurements(spec, trial)
    assert rows[-1]["val/classification_error"] < 2 / 3  # three classes: better than chance
