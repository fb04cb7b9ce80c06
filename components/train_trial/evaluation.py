"""When a trial is evaluated, and which examples each step trains on (NumPy only)."""

from __future__ import annotations

import math

import numpy as np

# The metrics live in components.train_trial.metrics; re-exported for existing imports.
from components.train_trial.metrics import classification_metrics, log_softmax  # noqa: F401


def evaluation_steps(max_steps: int, resolution: float) -> list[int]:
    """Steps 0, 1, 2, ... on a geometric grid, each at most ``resolution`` past the last.

    The first step that beats a goal lies in (previous evaluation, this evaluation], so
    steps to result is known to within ``resolution`` relative error at every batch
    size, from a batch size that needs 40 steps to one that needs 40,000. The budget
    ``max_steps`` is always evaluated.
    """
    steps = [0]
    while steps[-1] < max_steps:
        steps.append(min(max_steps, max(steps[-1] + 1, math.floor(steps[-1] * (1 + resolution)))))
    return steps


class EpochPermutations:
    """Batches of example indices: a fresh random permutation every epoch.

    ``take(steps)`` returns the indices of the next ``steps`` batches; batches may span
    the boundary between two epochs, so every step sees exactly ``batch_size`` examples.
    """

    def __init__(self, num_examples: int, batch_size: int, seed: int):
        self.num_examples, self.batch_size = num_examples, batch_size
        self.rng = np.random.default_rng(seed)
        self.order = self.rng.permutation(num_examples)
        self.position = 0
        self.epochs_started = 1

    def take(self, steps: int) -> np.ndarray:
        needed, parts = steps * self.batch_size, []
        while needed:
            if self.position == self.num_examples:
                self.order = self.rng.permutation(self.num_examples)
                self.position = 0
                self.epochs_started += 1
            chunk = self.order[self.position:self.position + needed]
            parts.append(chunk)
            self.position += len(chunk)
            needed -= len(chunk)
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
