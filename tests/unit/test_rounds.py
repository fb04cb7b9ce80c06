"""Search rounds: what ``next_round`` adds from a batch size's finished trials (re-search at
an edge, re-search without a goal, top-up of non-divergent trials, the cap), how rounds
are recorded in study.json, and that the planner adds a round once however often a stage
runs. The end-to-end runs (real training) are tests/integration/test_protocol_rounds.py."""

import json
import math

import pytest

from batchscale.core.edges import search_edge, to_scale
from batchscale.core.rounds import SearchRound, initial_round, read_rounds, searched_configs
from batchscale.core.spec import Parameter
from batchscale.rounds.planner import plan_stage, planned_trials
from batchscale.search.next_round import TrialResult, next_round, recentred
from batchscale.search.trials import batch_trials, sample_parameters
from batchscale.store.layout import StudyStore
from batchscale.validation import default_spec_dict, parse_spec

LR = Parameter("learning_rate", "log", 0.01, 0.1)
MOMENTUM = Parameter("momentum", "reverse_log", 0.8, 0.97)


def _spec(root="/tmp/unused", **changes):
    raw = {**default_spec_dict(), "store": root, "batch_sizes": [64], "trials_per_batch_size": 4,
           "max_steps": 100, "search_space": {
               "learning_rate": {"scale": "log", "min": 0.01, "max": 0.1},
               "momentum": {"scale": "reverse_log", "min": 0.8, "max": 0.97}}}
    return parse_spec({**raw, **changes})


def _result(trial_id, lr, momentum=0.9, step=None, diverged=False, best=0.5):
    return TrialResult(trial_id, {"learning_rate": lr, "momentum": momentum}, diverged, step,
                       None if diverged else best)


def test_a_best_trial_at_the_top_edge_is_re_searched_around_it_twice_as_wide():
    spec = _spec()
    rounds = [initial_round(spec)]
    results = [_result(1, 0.02, step=80), _result(2, 0.099, step=40), _result(3, 0.05, step=60),
               _result(4, 0.011)]
    added = next_round(spec, rounds, results, 2)
    assert (added.round, added.first, added.last) == (2, 5, 8)  # N new trials, ids continue
    assert "learning_rate" in added.reason and "top" in added.reason and "trial 2" in added.reason
    new = {p.name: p for p in added.space}
    width = math.log(0.1) - math.log(0.01)
    assert math.log(new["learning_rate"].max) - math.log(new["learning_rate"].min) == pytest.approx(2 * width)
    assert math.sqrt(new["learning_rate"].max * new["learning_rate"].min) == pytest.approx(0.099)
    assert new["momentum"] == MOMENTUM  # the other parameter keeps its range
    # with the new round recorded, the same best value is inside what was searched
    hull = searched_configs([*rounds, added])
    assert search_edge(0.099, hull["learning_rate"]) is None
    assert search_edge(0.099, searched_configs(rounds)["learning_rate"])[0] == "max"


def test_an_edge_at_a_hard_limit_is_not_re_searched():
    spec = _spec(search_space={"learning_rate": {"scale": "log", "min": 0.01, "max": 0.1},
                               "momentum": {"scale": "linear", "min": 0.5, "max": 0.9999}})
    results = [_result(1, 0.03, momentum=0.9999, step=40), _result(2, 0.05, momentum=0.6)]
    results += [_result(3, 0.04, momentum=0.7), _result(4, 0.06, momentum=0.8)]
    assert next_round(spec, [initial_round(spec)], results, 2) is None


def test_a_best_trial_inside_and_enough_non_divergent_trials_add_nothing():
    spec = _spec()
    results = [_result(i, lr, step=s) for i, (lr, s) in enumerate(
        [(0.02, 80), (0.04, 30), (0.05, 60), (0.08, 70)], start=1)]
    assert next_round(spec, [initial_round(spec)], results, 2) is None


def test_diverged_trials_are_topped_up_in_the_same_space_for_the_divergence_rate():
    spec = _spec()
    results = [_result(1, 0.04, step=30), _result(2, 0.09, diverged=True),
               _result(3, 0.05, step=60), _result(4, 0.095, diverged=True)]
    added = next_round(spec, [initial_round(spec)], results, 2)
    assert added.space == initial_round(spec).space
    assert added.reason == "top-up: 2 of 4 trials non-divergent"
    assert (added.first, added.last) == (5, 8)  # 2 missing at a survival rate of 1/2: 4 more


def test_the_cap_bounds_every_round():
    spec = _spec(max_trials_per_batch_size=6)
    results = [_result(1, 0.04, step=30)] + [_result(i, 0.09, diverged=True) for i in (2, 3, 4)]
    added = next_round(spec, [initial_round(spec)], results, 2)
    assert (added.first, added.last) == (5, 6)  # 3 missing at survival 1/4 would be 12
    full = [initial_round(spec), SearchRound(2, 5, 6, initial_round(spec).space, "top-up")]
    assert next_round(spec, full, results, 3) is None


def test_no_trial_reaching_the_goal_widens_every_range_around_the_closest():
    spec = _spec()
    results = [_result(1, 0.02, best=0.3), _result(2, 0.05, best=0.12), _result(3, 0.07, best=0.2),
               _result(4, 0.09, diverged=True)]
    added = next_round(spec, [initial_round(spec)], results, 2)
    assert "no trial reached classification_error<0.08" in added.reason and "trial 2" in added.reason
    new = {p.name: p for p in added.space}
    assert math.sqrt(new["learning_rate"].min * new["learning_rate"].max) == pytest.approx(0.05)
    half = to_scale(0.97, "REVERSE_LOG_SCALE") - to_scale(0.8, "REVERSE_LOG_SCALE")
    assert to_scale(new["momentum"].max, "REVERSE_LOG_SCALE") == pytest.approx(
        to_scale(0.9, "REVERSE_LOG_SCALE") + half)


def test_recentred_ranges_stay_within_the_parameters_limits():
    wide = recentred(Parameter("momentum", "linear", 0.5, 0.99), 0.98)
    assert wide.max < 1 and wide.min == pytest.approx(0.49)
    steps = recentred(Parameter("warmup_steps", "linear", 0, 10, integer=True), 1)
    assert (steps.min, steps.max) == (0, 11) and isinstance(steps.min, int)
    assert recentred(Parameter("label_smoothing", "discrete", values=(0.0, 0.1)), 0.1) is None


def test_rounds_round_trip_through_study_json_and_trials_take_their_rounds_space():
    spec = _spec()
    moved = (Parameter("learning_rate", "log", 0.05, 0.5), MOMENTUM)
    rounds = [initial_round(spec), SearchRound(2, 5, 8, moved, "re-search: x")]
    again = read_rounds({"search_rounds": [r.to_dict() for r in rounds]}, spec)
    assert again == rounds
    trials = batch_trials(spec, 64, rounds)
    assert [t.trial_id for t in trials] == list(range(1, 9))
    assert [t.parameters for t in trials[:4]] == sample_parameters(spec, 4)  # round 1 unchanged
    assert all(0.05 <= t.parameters["learning_rate"] <= 0.5 for t in trials[4:])
    # a study.json without rounds (older studies) has round 1 only, growing with the spec
    assert read_rounds({}, _spec(trials_per_batch_size=6)) == [initial_round(_spec(trials_per_batch_size=6))]
    grown = read_rounds({"search_rounds": [rounds[0].to_dict()]}, _spec(trials_per_batch_size=6))
    assert grown[0].trial_ids == range(1, 7)


def _finish(store, spec, trial, status, error, step=50):
    rows = [{"step": 0, "val/classification_error": 0.9, "train/cross_entropy_error": 2.0},
            {"step": step, "val/classification_error": error, "train/cross_entropy_error": 1.0}]
    store.write_measurements(spec, trial, rows)
    store.write_metadata(spec, trial, {"trial_id": trial.trial_id, "status": status, "steps": step,
                                       "max_steps": 100, "stop_reason": "goal",
                                       "parameters": trial.parameters})


def test_plan_stage_adds_a_round_once_and_packs_only_unfinished_trials(tmp_path):
    root = str(tmp_path / "store")
    spec, store = _spec(root), StudyStore(root)
    first = plan_stage(spec, store, 1, pack_size=3, log=lambda *_: None)
    assert [(p.batch_size, p.trial_ids) for p in first] == [(64, (1, 2)), (64, (3, 4))]
    assert plan_stage(spec, store, 2, 3, log=lambda *_: None) == first  # unfinished: resumed
    trials = planned_trials(spec, store)
    best = max(trials, key=lambda t: t.parameters["learning_rate"])
    for trial in trials:  # the largest learning rate is the only one to reach the goal
        _finish(store, spec, trial, "COMPLETE", 0.05 if trial is best else 0.3)
    assert search_edge(best.parameters["learning_rate"],
                       searched_configs(store.read_rounds(spec, 64))["learning_rate"]) is not None
    second = plan_stage(spec, store, 2, 3, log=lambda *_: None)
    assert [p.trial_ids for p in second] == [(5, 6), (7, 8)]
    study = json.loads(store.fs.read_text(f"{store.batch_dir(spec, 64)}/study.json"))
    assert [r["round"] for r in study["search_rounds"]] == [1, 2]
    assert study["parameter_configs"]["learning_rate"]["max_value"] > 0.1  # the hull
    assert study["protocol"] == "goal" and study["early_stopping"] is True
    assert plan_stage(spec, store, 2, 3, log=lambda *_: None) == second  # a retried stage
    assert len(store.read_rounds(spec, 64)) == 2
    store.register_study(spec)  # registering again keeps the rounds
    assert len(store.read_rounds(spec, 64)) == 2
    assert [t.trial_id for t in planned_trials(spec, store)] == list(range(1, 9))
