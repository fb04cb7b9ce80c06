"""The stopping protocols' rule (``stop_rule.trial_outcome``) and the crossings ``race``
stops by (``store.crossings``). Racing on real training, with steps to result identical
across the three protocols, is tests/integration/test_protocol_rounds.py."""

import pytest

from batchscale.core.spec import TrialSpec
from batchscale.store.crossings import CrossingBoard
from batchscale.store.filesystem import open_root
from batchscale.store.layout import StudyStore
from batchscale.training.stop_rule import raced, trial_outcome
from batchscale.training.trial_lifecycle import finish_trial
from batchscale.validation import default_spec_dict, parse_spec


def _spec(protocol, goals=("classification_error<0.1",)):
    return parse_spec({**default_spec_dict(), "store": "/tmp/unused", "batch_sizes": [64],
                       "max_steps": 100, "protocol": protocol, "goals": list(goals)})


def _rows(*errors, step=10, entropy=None):
    return [{"step": i * step, "val/classification_error": e,
             "val/cross_entropy_error": (entropy or [1.0] * len(errors))[i],
             "train/cross_entropy_error": 1.0} for i, e in enumerate(errors)]


class Board:
    def __init__(self, earliest):
        self.known = earliest

    def earliest(self):
        return dict(self.known)


@pytest.mark.parametrize("protocol, expected", [("full", None), ("goal", ("COMPLETE", "goal")),
                                                ("race", ("COMPLETE", "goal"))])
def test_a_trial_beating_every_goal_stops_unless_the_protocol_is_full(protocol, expected):
    assert trial_outcome(_spec(protocol), _rows(0.5, 0.05), True, 10, 100) == expected


def test_full_still_stops_at_the_budget_and_on_divergence():
    spec = _spec("full")
    assert trial_outcome(spec, _rows(0.5, 0.05), True, 100, 100) == ("COMPLETE", "budget")
    assert trial_outcome(spec, _rows(0.5, 0.05), False, 10, 100) == ("INFEASIBLE", "diverged")


def test_race_stops_a_trial_once_its_step_reaches_the_earliest_crossing():
    spec, rows = _spec("race"), _rows(0.5, 0.3, 0.2)  # evaluated at 0, 10, 20; no crossing
    assert trial_outcome(spec, rows, True, 20, 100, Board({0: 30})) is None  # could still be first
    assert trial_outcome(spec, rows, True, 20, 100, Board({0: 20})) == ("COMPLETE", "race")
    assert trial_outcome(spec, rows, True, 20, 100, Board({})) is None
    assert trial_outcome(_spec("goal"), rows, True, 20, 100, Board({0: 10})) is None
    # at the budget the trial ran its budget: not censored, whatever the board says
    assert trial_outcome(spec, rows, True, 100, 100, Board({0: 10})) == ("COMPLETE", "budget")


def test_with_two_goals_a_trial_races_on_until_no_goal_is_left_to_win():
    spec = _spec("race", goals=("classification_error<0.1", "cross_entropy_error<0.5"))
    rows = _rows(0.5, 0.05, 0.04, entropy=[1.0, 0.9, 0.8])  # beat goal 0 at step 10, not goal 1
    assert not raced(spec, rows, 20, {0: 5})  # goal 1: nobody has crossed it yet
    assert not raced(spec, rows, 20, {1: 30})  # goal 1: it could still be first
    assert raced(spec, rows, 20, {1: 20})
    assert not raced(spec, _rows(0.5, 0.3, 0.2), 20, {1: 10})  # goal 0 still open for it


def test_the_board_sees_its_own_crossings_at_once_and_others_when_it_polls(tmp_path):
    fs = open_root(str(tmp_path))
    now = [0.0]
    mine = CrossingBoard(fs, "s", 64, poll_seconds=10, clock=lambda: now[0])
    other = CrossingBoard(fs, "s", 64, poll_seconds=10, clock=lambda: now[0])
    assert mine.earliest() == {} and other.earliest() == {}
    mine.publish(3, {0: 40, 1: 90})
    assert mine.earliest() == {0: 40, 1: 90}
    assert other.earliest() == {}  # listed less than 10 s ago
    now[0] = 10.0
    assert other.earliest() == {0: 40, 1: 90}
    other.publish(7, {0: 30})
    now[0] = 20.0
    assert mine.earliest() == {0: 30, 1: 90}
    assert sorted(fs.list_files("s/crossings/64")) == ["g0-s30-t7", "g0-s40-t3", "g1-s90-t3"]
    assert CrossingBoard(fs, "s", 128).earliest() == {}  # per batch size


def test_only_complete_trials_publish_their_crossings(tmp_path):
    spec = parse_spec({**default_spec_dict(), "store": str(tmp_path), "batch_sizes": [64],
                       "max_steps": 100, "goals": ["classification_error<0.1"]})
    store = StudyStore(str(tmp_path))
    board = CrossingBoard(store.fs, spec.name, 64)
    for trial_id, status in ((1, "INFEASIBLE"), (2, "COMPLETE")):
        trial = TrialSpec(spec.name, 64, trial_id, {"learning_rate": 0.1})
        finish_trial(store, spec, trial, {"trial_id": trial_id}, _rows(0.5, 0.05, 0.04), (status, "x"),
                     20, 1000, 1.0, 1.0, lambda *_: None, board)
    assert store.fs.list_files(f"{spec.name}/crossings/64") == ["g0-s10-t2"]
