"""Progress during a run: done, diverged and running counts, best steps so far (finished
trials read once), and the ETA from the rate measured in this run."""

import pytest

from batchscale.core.spec import TrialSpec
from batchscale.pipelines.progress import ProgressTracker
from batchscale.store.layout import StudyStore
from batchscale.validation import parse_spec
from tests.conftest import tiny_spec_dict


def _finish(store, spec, batch_size, trial_id, status, val_errors):
    trial = TrialSpec(spec.name, batch_size, trial_id, {"learning_rate": 0.1, "momentum": 0.9})
    rows = [{"step": 10 * i, "val/classification_error": e} for i, e in enumerate(val_errors)]
    store.write_measurements(spec, trial, rows)
    store.write_metadata(spec, trial, {"trial_id": trial_id, "status": status,
                                       "parameters": trial.parameters})


def test_progress_counts_and_best_steps(tmp_path):
    spec = parse_spec(tiny_spec_dict(str(tmp_path)))  # batch sizes 16, 128; 2 trials each
    store = StudyStore(spec.store)
    tracker = ProgressTracker(spec, store)
    assert tracker.poll().line() == "trials 0/4 done | best steps per batch size 16:- 128:-"

    _finish(store, spec, 16, 1, "COMPLETE", [0.9, 0.5, 0.15])       # goal 0.2 reached at step 20
    _finish(store, spec, 16, 2, "INFEASIBLE", [0.9, 0.1])           # diverged trials do not count
    _finish(store, spec, 128, 1, "COMPLETE", [0.9, 0.3])            # not reached
    store.write_metadata(spec, TrialSpec(spec.name, 128, 2, {}), {"status": "INCOMPLETE"})
    progress = tracker.poll()
    assert progress.line() == ("trials 3/4 done, 1 diverged, 1 in progress | "
                               "best steps per batch size 16:20 128:-")

    _finish(store, spec, 16, 1, "COMPLETE", [0.1])  # a finished trial is cached, not re-read
    _finish(store, spec, 128, 2, "COMPLETE", [0.9, 0.19])
    assert tracker.poll().line() == "trials 4/4 done, 1 diverged | best steps per batch size 16:20 128:10"


def test_eta_comes_from_this_runs_rate_not_from_re_used_trials(tmp_path):
    spec = parse_spec(tiny_spec_dict(str(tmp_path)))  # 4 trials
    store = StudyStore(spec.store)
    _finish(store, spec, 16, 1, "COMPLETE", [0.9])  # done before this run: re-used
    now = [100.0]
    tracker = ProgressTracker(spec, store, clock=lambda: now[0])
    first = tracker.poll()
    assert first.done == 1 and first.eta_seconds is None and first.eta() == ""
    store.write_metadata(spec, TrialSpec(spec.name, 16, 2, {}), {"status": "INCOMPLETE"})
    now[0] = 110.0
    assert tracker.poll().running == 1  # training seen: the clock starts here
    now[0] = 130.0
    _finish(store, spec, 16, 2, "COMPLETE", [0.9])
    assert tracker.poll().eta_seconds is None  # one trial finished: no rate yet
    now[0] = 150.0
    _finish(store, spec, 128, 1, "COMPLETE", [0.9])
    progress = tracker.poll()
    # 2 trials in 40 s since training was first seen, 1 left: 20 s
    assert progress.eta_seconds == pytest.approx(20.0) and progress.eta() == "ETA 20s"


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (59.4, "59s"), (130, "2m10s"),
                                            (3600 * 3 + 300, "3h05m")])
def test_durations_read_as_people_write_them(seconds, text):
    from batchscale.pipelines.progress import duration

    assert duration(seconds) == text


def test_the_eta_counts_the_trials_later_rounds_will_add(tmp_path):
    """Batch 16's two trials diverge: the planner will top it up with min(2 / 0.25, the 6
    the cap of 8 leaves) = 6 trials, exactly. That one decision sets q = 2/3 and m = 6 for
    batch 128, still training: min(6 (2/3 + 4/9), 6) = 6 (rounds.expected). 1 trial left
    + 12 later at 3 trials per 40 s: 173 s."""
    spec = parse_spec(tiny_spec_dict(str(tmp_path), max_rounds=3))
    store = StudyStore(spec.store)
    now = [100.0]
    tracker = ProgressTracker(spec, store, clock=lambda: now[0])
    for b in (16, 128):
        for trial_id in (1, 2):
            store.write_metadata(spec, TrialSpec(spec.name, b, trial_id, {}), {"status": "INCOMPLETE"})
    first = tracker.poll()
    assert first.later == pytest.approx(4 * (0.5 + 0.25))  # the prior: q 1/2, m 2, 2 rounds
    now[0] = 140.0
    _finish(store, spec, 16, 1, "INFEASIBLE", [0.9])
    _finish(store, spec, 16, 2, "INFEASIBLE", [0.9])
    _finish(store, spec, 128, 1, "COMPLETE", [0.9, 0.5])
    progress = tracker.poll()
    assert progress.later == pytest.approx(12.0)
    assert progress.eta_seconds == pytest.approx(13 * 40 / 3)
    assert progress.eta() == "ETA 2m53s (incl. ~12 trials later rounds may add)"


def test_one_round_adds_nothing_to_the_eta(tmp_path):
    spec = parse_spec(tiny_spec_dict(str(tmp_path)))  # max_rounds 1
    progress = ProgressTracker(spec, StudyStore(spec.store)).poll()
    assert progress.later == 0
