"""Which training examples each step sees: a fresh random permutation every epoch.

Data order is a fact of the input pipeline (array and streaming pipelines both draw
their batches from it), so it lives with the workloads, below the trainer.
"""

from __future__ import annotations

import numpy as np


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

    def state(self) -> tuple[dict, np.ndarray]:
        """Where the order stands, for a checkpoint: the generator's state, position and
        epoch count (JSON-able), and the current epoch's permutation (an array)."""
        return ({"rng": self.rng.bit_generator.state, "position": self.position,
                 "epochs_started": self.epochs_started}, self.order)

    def restore(self, state: dict, order: np.ndarray) -> None:
        """Continue exactly where ``state()`` was taken: the next ``take`` returns what the
        uninterrupted order would have returned."""
        self.rng.bit_generator.state = state["rng"]
        self.position, self.epochs_started = int(state["position"]), int(state["epochs_started"])
        self.order = np.asarray(order, dtype=np.int64)
