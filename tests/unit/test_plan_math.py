"""The plan's arithmetic: the proposed grid around the predicted knee, and the study's
estimate under each protocol, on made-up inputs small enough to check by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from batchscale.core.errors import CommandFailed
from batchscale.planning.estimate import estimate_study, parallel_for_seconds, step_time_at
from batchscale.planning.grid import MIN_POINTS, propose_grid
from batchscale.planning.noise_scale import NoiseScale
from batchscale.planning.pack_costs import PackCosts
from batchscale.validation import parse_spec
from tests.conftest import tiny_spec_dict


def _noise(value, low=None, high=None):
    return NoiseScale(value, low or value, high or value, 0.9, 8, 512, 50, ())


def test_the_grid_spans_the_interval_from_a_sixteenth_to_sixteen_times():
    grid = propose_grid(_noise(100, 64, 160), largest=100_000)
    assert grid == [2 ** e for e in range(2, 13)]  # 64/16 = 4 .. 160*16 = 2560 -> 4096
    full = propose_grid(_noise(500, 400, 700), largest=4000)  # reaches the training set
    assert full[0] == 16 and full[-1] == 4000 and 2048 in full and 4096 not in full
    tiny = propose_grid(_noise(1, 1, 1), largest=1000, smallest=1)  # widened to MIN_POINTS
    assert len(tiny) >= MIN_POINTS and tiny[0] == 1
    with pytest.raises(ValueError, match="smallest <= largest"):
        propose_grid(_noise(10), largest=4, smallest=8)


def test_step_times_are_measured_interpolated_or_extrapolated():
    measured = {16: 0.001, 64: 0.004}
    assert step_time_at(16, measured) == (0.001, "measured")
    t, how = step_time_at(32, measured)
    assert how == "interpolated" and t == pytest.approx(0.002)  # log-log halfway
    t, how = step_time_at(256, measured)
    assert how == "extrapolated" and t == pytest.approx(0.016)  # 64's time per example
    with pytest.raises(CommandFailed, match="no step time"):
        step_time_at(8, {})


def _spec(tmp_path, protocol):
    return parse_spec(tiny_spec_dict(str(tmp_path), batch_sizes=[16, 128], trials_per_batch_size=2,
                                     max_steps={16: 300, 128: 100}, protocol=protocol,
                                     evaluation={"resolution": 0.5, "train_examples": 500},
                                     parallelism=2))


@pytest.mark.parametrize("protocol", ["full", "goal", "race"])
def test_the_estimate_under_each_protocol_by_hand(tmp_path, protocol):
    # B_n = 16: S(16) = 2 S_min; probe crossings at batch 16: 200 and 240, one that never
    # reached -> S_min = 100, S(128) = 112.5, a crossing at batch 128 scales by 112.5/200
    spec = _spec(tmp_path, protocol)
    times = {16: 0.01, 128: 0.04}
    est = estimate_study(spec, _noise(16), 16, [200, 240, None], times, devices=1, price=3.6,
                         price_source="test")
    assert est.s_min == pytest.approx(100)
    [b16, b128] = est.per_batch
    assert b16.predicted_steps == pytest.approx(200) and b128.predicted_steps == pytest.approx(112.5)
    assert b128.over_budget and not b16.over_budget  # 112.5 > 100
    per_trial = {"full": (300, 100),
                 "goal": ((200 + 240 + 300) / 3, (100 + 100 + 100) / 3),
                 "race": (200, 100)}[protocol]
    assert (b16.trained_steps, b128.trained_steps) == pytest.approx(tuple(2 * p for p in per_trial))
    assert est.trained_steps == pytest.approx(b16.trained_steps + b128.trained_steps)
    assert est.full_steps == 2 * (300 + 100) and est.trials == 4
    compute = b16.trained_steps * 0.01 + b128.trained_steps * 0.04
    assert est.device_hours == pytest.approx(compute / 3600)  # no evaluation time given
    # parallelism 2: one pack task per batch size (2 trials, pack_size automatic), side by side
    assert est.wall_seconds == pytest.approx(max(b16.trained_steps * 0.01, b128.trained_steps * 0.04))
    assert est.cost == pytest.approx(est.device_hours * 3.6)
    assert any("exceed the budget at batch size(s) 128" in n for n in est.notes)
    with_evaluations = estimate_study(spec, _noise(16), 16, [200, 240, None], times,
                                      evaluation_seconds=1.0)
    assert with_evaluations.device_hours > est.device_hours  # evaluations take device time
    # what a pack pays besides steps: 10 s start-up per pack, 1 s per trial, 3 light tasks
    # (prepare, one plan-round, aggregate) of 2 s
    costs = PackCosts(startup_seconds=10, trial_seconds=1, light_task_seconds=2)
    started = estimate_study(spec, _noise(16), 16, [200, 240, None], times, costs=costs)
    assert started.wall_seconds == pytest.approx(est.wall_seconds + 10 + 2 * 1 + 3 * 2)
    assert started.device_hours == est.device_hours


def test_the_parallel_for_is_simulated_longest_first_with_later_rounds_top_ups(tmp_path):
    # 4 batch sizes, one pack each, 2 lanes; pack seconds 1, 1, 1, 3 in batch-size order
    assert parallel_for_seconds([1, 1, 1, 3], float, 2) == 4  # the 3 s pack starts last
    assert parallel_for_seconds([3, 1, 1, 1], float, 2) == 3  # longest first
    assert parallel_for_seconds([3, 1, 1, 1], float, 1) == 6
    spec = parse_spec(tiny_spec_dict(str(tmp_path), batch_sizes=[16, 32, 64, 128], trials_per_batch_size=1,
                                     max_steps=100, max_rounds=1, parallelism=2,
                                     evaluation={"resolution": 0.5, "train_examples": 500}))
    times = {16: 0.01, 32: 0.01, 64: 0.01, 128: 0.03}  # 1, 1, 1 and 3 s a trial
    est = estimate_study(spec, _noise(16), 16, [None], times)
    assert est.wall_seconds == pytest.approx(3)  # the planner starts batch size 128 first
    # a third of the probe runs diverged: round 2 tops up the probe's batch size
    again = replace(spec, max_rounds=2, trials_per_batch_size=2)
    topped = estimate_study(again, _noise(16), 16, [None, None, None], times, diverged_share=1 / 3)
    assert any("about 1 top-up trial(s) at batch size 16" in n for n in topped.notes)
    base = estimate_study(again, _noise(16), 16, [None, None, None], times)
    assert topped.wall_seconds == pytest.approx(base.wall_seconds + 1)  # one trial at 16: 1 s


def test_without_a_probe_crossing_goal_and_race_are_estimated_as_full(tmp_path):
    spec = _spec(tmp_path, "race")
    est = estimate_study(spec, _noise(16), 16, [None, None], {16: 0.01, 128: 0.04})
    assert est.s_min is None and est.trained_steps == est.full_steps
    assert all(b.predicted_steps is None for b in est.per_batch)
    assert any("no probe run reached the goal" in n for n in est.notes)
    text = "\n".join(est.lines())
    assert "protocol race" in text and "4 trials" in text
