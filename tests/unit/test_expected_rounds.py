"""What later search rounds will likely add, for the run console's ETA (rounds.expected):
exactly what the planner will add to a batch size whose trials are all finished, and for
the others the rounds left, each taken with the chance the study's decisions so far give,
never past the trial cap. Numbers worked out by hand on the tiny study (2 trials per
batch size, batch sizes 16 and 128, 3 rounds, a cap of 8 trials)."""

import pytest

from batchscale.core.rounds import SearchRound, initial_round
from batchscale.rounds.expected import expected_added, later_round_trials, success_rate
from batchscale.search.next_round import TrialResult
from batchscale.validation import parse_spec
from tests.conftest import tiny_spec_dict


@pytest.fixture
def spec(tmp_path):
    return parse_spec(tiny_spec_dict(str(tmp_path), max_rounds=3))


def _first_rounds(spec):
    return {16: [initial_round(spec)], 128: [initial_round(spec)]}


def test_the_arithmetic_of_rounds_left():
    assert expected_added(2, 10, 30, 0.5) == pytest.approx(7.5)  # 10 (1/2 + 1/4)
    assert expected_added(3, 10, 5, 0.9) == 5  # the trial cap's room bounds it
    assert expected_added(0, 10, 30, 0.9) == 0 and expected_added(2, 10, 0, 0.9) == 0
    assert success_rate(0, 0) == 0.5 and success_rate(1, 5) == pytest.approx(2 / 7)


def test_before_any_decision_every_batch_size_counts_the_prior(spec):
    assert spec.trial_cap == 8
    # q = 1/2, m = 2 trials, 2 rounds left: 2 (1/2 + 1/4) = 1.5 per batch size
    assert later_round_trials(spec, _first_rounds(spec), {16: None, 128: None}) == pytest.approx(3.0)


def test_a_finished_batch_size_counts_the_round_the_planner_will_add(spec):
    # trial 1 diverged: the planner tops up 1 / (1/2 survival) = 2 trials, exactly
    results = [TrialResult(1, {"learning_rate": 0.06}, True, None, None),
               TrialResult(2, {"learning_rate": 0.063}, False, 40, 0.1)]
    # one decision, which added: q = 2/3, m = 2. Batch 16: 2 + 2 (2/3) for its last round;
    # batch 128: 2 (2/3 + 4/9)
    expected = 2 + 4 / 3 + 2 * (2 / 3 + 4 / 9)
    assert later_round_trials(spec, _first_rounds(spec), {16: results, 128: None}) == pytest.approx(expected)


def test_a_finished_batch_size_the_planner_leaves_alone_adds_nothing_and_lowers_q(spec):
    results = [TrialResult(1, {"learning_rate": 0.06}, False, 50, 0.1),
               TrialResult(2, {"learning_rate": 0.063}, False, 40, 0.1)]  # no edge, no top-up
    # one decision, which added nothing: q = 1/3; batch 128: 2 (1/3 + 1/9)
    assert later_round_trials(spec, _first_rounds(spec), {16: results, 128: None}) == pytest.approx(8 / 9)


def test_recorded_rounds_set_the_size_and_the_last_round_adds_nothing(spec):
    space = spec.search_space
    rounds = {16: [initial_round(spec), SearchRound(2, 3, 8, space, "top-up")],  # 6 more: the cap
              128: [initial_round(spec), SearchRound(2, 3, 4, space, "top-up"),
                    SearchRound(3, 5, 6, space, "re-search")]}  # round 3 of 3: none left
    # batch 16 is at the cap, batch 128 at its last round: nothing more
    assert later_round_trials(spec, rounds, {16: None, 128: None}) == 0
    rounds[16] = rounds[16][:1]
    # decisions: 2 added (batch 128's, 2 trials each): q = 3/4, m = 2; batch 16 at round 1
    # (room 6): 2 (3/4 + 9/16)
    assert later_round_trials(spec, rounds, {16: None, 128: None}) == pytest.approx(2 * (3 / 4 + 9 / 16))
