"""A study may grow but not change: the refusal names the field (store.compatibility), and
the one rule of which stored trials are finished under a budget (core.trial_state)."""

from __future__ import annotations

import json

import pytest

from batchscale.core.errors import SpecError
from batchscale.core.trial_state import continues, is_finished, keeps_checkpoint
from batchscale.store.compatibility import STUDY_SPEC_KEY, check_same_study, stored_spec_dict
from batchscale.store.filesystem import open_root
from batchscale.validation import parse_spec
from tests.conftest import tiny_spec_dict


def stored(**changes) -> dict:
    return parse_spec(tiny_spec_dict("s", **changes)).to_dict()


def spec(**changes):
    return parse_spec(tiny_spec_dict("s", **changes))


@pytest.mark.parametrize("changes", [
    {"batch_sizes": [16, 128, 256]},          # more batch sizes
    {"trials_per_batch_size": 5},             # more trials
    {"max_steps": 600},                       # larger budgets
    {"parallelism": 1, "pack_size": 3, "checkpoint_seconds": 5.0},
    {"max_rounds": 5, "max_trials_per_batch_size": 20},  # more search rounds, a higher cap
    {"protocol": "race"},                     # from goal: both stop only what cannot matter
], ids=["batch sizes", "trials", "budget", "placement", "rounds", "protocol"])
def test_a_study_may_grow(changes):
    check_same_study(stored(), spec(**changes), "S")
    moved = parse_spec(tiny_spec_dict("elsewhere", **changes))  # another store location
    check_same_study(stored(), moved, "S")


@pytest.mark.parametrize("changes, field", [
    ({"seed": 1}, "seed"),
    ({"fixed": {"momentum": 0.8}}, "fixed.momentum"),
    ({"search_space": {"learning_rate": {"scale": "log", "min": 0.01, "max": 0.2}}},
     "search_space.learning_rate.min"),
    ({"goals": [{"metric": "classification_error", "value": 0.1}]}, "goals"),
    ({"workload": {"dataset": "digits", "model": "fc_64", "optimizer": "nesterov_momentum"}},
     "workload.model"),
    ({"evaluation": {"train_examples": 400}}, "evaluation.train_examples"),
    ({"backend": "tensorflow"}, "backend"),
])
def test_any_other_change_is_refused_naming_the_field(changes, field):
    with pytest.raises(SpecError) as err:
        check_same_study(stored(), spec(**changes), "S")
    message = str(err.value)
    assert message.startswith(f"{field}: differs from study 'tiny' in S (")
    assert "\n" not in message


def test_budgets_only_grow():
    with pytest.raises(SpecError, match=r"^max_steps\.16: 200 is below the 300 steps"):
        check_same_study(stored(), spec(max_steps={16: 200, 128: 300}), "S")



@pytest.mark.parametrize("before, after, field", [
    ({"trials_per_batch_size": 4}, {"trials_per_batch_size": 2}, "trials_per_batch_size: 2 is below the 4"),
    ({"max_rounds": 3}, {"max_rounds": 2}, "max_rounds: 2 is below the 3"),
    ({"max_trials_per_batch_size": 12}, {"max_trials_per_batch_size": 10},
     "max_trials_per_batch_size: 10 is below the 12"),
    ({"trials_per_batch_size": 4}, {"trials_per_batch_size": 4, "max_trials_per_batch_size": 10},
     "max_trials_per_batch_size: 10 is below the 16"),  # 0 was its default, 4 x the trials
], ids=["trials", "rounds", "cap", "cap from its default"])
def test_trial_counts_only_grow(before, after, field):
    """A study keeps every trial it trained, and its rounds were planned under the larger
    counts: fewer would make the rounds' derivation disown trained trials."""
    with pytest.raises(SpecError, match=rf"^{field} study 'tiny' already has; it may only grow"):
        check_same_study(stored(**before), spec(**{**before, **after}), "S")
    check_same_study(stored(**before), spec(**before), "S")  # unchanged: fine

def test_a_budget_fraction_schedule_cannot_grow_its_budget():
    changes = {"schedule": "linear",
               "fixed": {"momentum": 0.9, "end_learning_rate_factor": 0.1, "decay_fraction": 0.5}}
    check_same_study(stored(**changes), spec(**changes), "S")  # unchanged: fine
    with pytest.raises(SpecError, match=r"^max_steps\.16: .*decay_fraction"):
        check_same_study(stored(**changes), spec(max_steps=600, **changes), "S")


def test_the_stored_spec_is_found_without_study_spec_json(tmp_path):
    fs = open_root(str(tmp_path))
    assert stored_spec_dict(fs, "tiny") is None  # a new study
    copy = stored(seed=3)
    fs.write_text("tiny/digits/fc_32/nesterov_momentum/16/study.json",
                  json.dumps({"batch_size": 16, STUDY_SPEC_KEY: copy}))
    assert stored_spec_dict(fs, "tiny") == copy
    fs.write_text("tiny/study_spec.json", json.dumps(stored()))
    assert stored_spec_dict(fs, "tiny") == stored()  # study_spec.json first


@pytest.mark.parametrize("metadata, max_steps, finished, goes_on", [
    (None, 300, False, False),
    ({"status": "INCOMPLETE", "max_steps": 300}, 300, False, False),
    ({"status": "COMPLETE", "stop_reason": "goal", "max_steps": 30}, 600, True, False),
    ({"status": "INFEASIBLE", "stop_reason": "diverged", "max_steps": 30}, 600, True, False),
    ({"status": "COMPLETE", "stop_reason": "budget", "max_steps": 300}, 300, True, False),
    ({"status": "COMPLETE", "stop_reason": "budget", "max_steps": 30}, 600, False, True),
])
def test_which_stored_trials_are_finished(metadata, max_steps, finished, goes_on):
    assert is_finished(metadata, max_steps) is finished
    assert continues(metadata, max_steps) is goes_on


def test_only_budget_stopped_trials_keep_their_checkpoint():
    assert keeps_checkpoint("budget")
    assert not keeps_checkpoint("goal") and not keeps_checkpoint("diverged")


def test_a_study_may_not_switch_to_or_from_full_and_older_studies_stopped_at_the_goal():
    with pytest.raises(SpecError, match=r"^protocol: differs from study 'tiny' in S \(race there, "
                                        r"full here\); a study may switch between goal and race"):
        check_same_study(stored(protocol="race"), spec(protocol="full"), "S")
    with pytest.raises(SpecError, match=r"^protocol: .*\(full there, goal here\)"):
        check_same_study(stored(protocol="full"), spec(protocol="goal"), "S")
    legacy = {k: v for k, v in stored().items() if k not in ("protocol", "max_rounds",
                                                              "max_trials_per_batch_size")}
    check_same_study(legacy, spec(), "S")  # registered before protocols: it stopped at goals
    with pytest.raises(SpecError, match=r"\(goal there, full here\)"):
        check_same_study(legacy, spec(protocol="full"), "S")
