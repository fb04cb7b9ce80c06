"""Evaluation grid resolution, epoch permutations and the metrics (vs hand-computed)."""

import math

import numpy as np
import pytest

from batchscale.training.evaluation_grid import evaluation_steps
from batchscale.training.metrics import classification_metrics
from batchscale.workloads.data_order import EpochPermutations


@pytest.mark.parametrize("max_steps", [1, 40, 1000, 100_000])
def test_grid_has_at_most_5_percent_relative_resolution(max_steps):
    steps = evaluation_steps(max_steps, 0.05)
    assert steps[0] == 0 and steps[-1] == max_steps
    assert all(b > a for a, b in zip(steps, steps[1:]))
    for a, b in zip(steps[1:], steps[2:]):
        assert (b - a) / a <= 0.05 or b - a == 1
    assert len(steps) < 30 + math.log(max(max_steps, 2)) / math.log(1.05)


def test_a_batch_size_needing_40_steps_is_measured_to_within_5_percent():
    steps = evaluation_steps(10_000, 0.05)
    for true_step in (40, 41, 333, 4321):
        measured = next(s for s in steps if s >= true_step)
        assert (measured - true_step) / true_step <= 0.05


def test_every_epoch_is_a_fresh_permutation():
    batches = EpochPermutations(10, 4, seed=0)
    seen = np.concatenate([batches.take(1) for _ in range(10)])  # 40 indices = 4 epochs
    epochs = seen.reshape(4, 10)
    for epoch in epochs:
        assert sorted(epoch) == list(range(10))
    assert len({tuple(e) for e in epochs}) == 4
    assert batches.take(3).shape == (12,)


def test_metrics_match_hand_computed_values():
    logits = np.array([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    labels = np.array([0, 2])
    m = classification_metrics(logits, labels)
    # CE of row 0: -log(e^2/(e^2+2)); row 1: -log(1/(e+2))
    expected = (-math.log(math.e**2 / (math.e**2 + 2)) + math.log(math.e + 2)) / 2
    assert m["cross_entropy_error"] == pytest.approx(expected)
    assert m["classification_error"] == 0.5
    assert math.isnan(classification_metrics(np.array([[np.nan, 0.0]]), np.array([0]))["cross_entropy_error"])
