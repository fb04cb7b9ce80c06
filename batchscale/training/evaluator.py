"""Measuring a model during a trial: one measurements.csv row per evaluation.

Each evaluation streams the validation split (and a fixed subset of the training split)
through the model in fixed-size batches and folds the logits into the task's metric
accumulators, so evaluating ImageNet or LM1B never holds all logits at once. Batches are
padded to a multiple of the replica count, so a data-parallel model gets a batch
every replica can share (a jitted model compiles one shape per distinct batch size).

A vmapped pack evaluates through ``PackEvaluation``: the same batches, resident on the
device from the first evaluation on, one compiled call and one fetch of logits per split,
the same rows as ``evaluate_pack`` to the bit.
"""

from __future__ import annotations

import time
import weakref

import numpy as np

from batchscale.training.metrics import MetricAccumulator, update_pack

SPLIT_PREFIX = {"train": "train", "validation": "val"}
LOGITS_BUDGET = 2 ** 26  # floats of logits per evaluation batch (256 MiB)


def eval_batch_size(pipeline, replicas: int = 1) -> int:
    """Evaluation batch: large for images, small enough for a language model's logits
    (batch x length x vocabulary) to stay within ``LOGITS_BUDGET``."""
    if pipeline.task == "language_model":
        size = max(1, min(256, LOGITS_BUDGET // (512 * max(1, pipeline.num_outputs))))
    else:
        size = 1024 if pipeline.in_memory else 256
    return max(replicas, size - size % replicas)


class Evaluator:
    """Computes the row of one evaluation: ``{"step", "train/<metric>", "val/<metric>", ...}``.

    Training metrics use ``train_examples`` fixed training examples (all when 0): a
    seeded random subset for in-memory data, the first ones in storage order for
    streamed data (which is already shuffled at preparation).
    """

    def __init__(self, model, pipeline, train_examples: int, seed: int, replicas: int = 1):
        self.model, self.pipeline = model, pipeline
        self.batch_size = eval_batch_size(pipeline, replicas)
        self.replicas = replicas
        self.train_examples = train_examples
        self.subset = None
        if pipeline.in_memory:
            n = pipeline.num_train_examples
            if train_examples and train_examples < n:
                rng = np.random.default_rng(seed)
                self.subset = np.sort(rng.choice(n, train_examples, replace=False))

    def __call__(self, step: int, started: float) -> dict:
        def predict(x, shared):
            return self._predict(x if shared else self.pipeline.arrays("train")[0][x[0]])

        return evaluate_pack([self], predict, step, started)[0]

    def shared(self, split: str) -> bool:
        """Whether this split's batches are the same for every trial of a pack (the
        training subset is drawn per trial seed; everything else is)."""
        return not (split == "train" and self.subset is not None)

    def _batches(self, split: str):
        """``(x, labels[, weights])`` batches; for the seeded training subset, x holds the
        examples' indices in the training split (gathered where the model runs)."""
        if split == "train" and self.subset is not None:
            y = self.pipeline.arrays("train")[1]
            for start in range(0, len(self.subset), self.batch_size):
                chunk = self.subset[start:start + self.batch_size]
                yield chunk, y[chunk]
            return
        limit = (self.train_examples or None) if split == "train" else None
        yield from self.pipeline.eval_batches(split, self.batch_size, limit)

    def _predict(self, x: np.ndarray) -> np.ndarray:
        n = len(x)
        pad = -n % self.replicas
        if pad:  # every replica gets a share; the padding's logits are dropped
            x = np.concatenate([x, np.zeros((pad, *x.shape[1:]), x.dtype)])
        return np.asarray(self.model.predict_on_batch(x), dtype=np.float32)[None, :n]


def evaluate_pack(evaluators: list[Evaluator], predict, step: int, started: float) -> list[dict]:
    """The rows of a pack's trials (one ``Evaluator`` each, same data set and batch size).

    ``predict(x, shared)`` returns logits stacked on a leading trial axis: with
    ``shared`` every trial sees the same inputs ``x`` (the validation split), else ``x``
    holds each trial's own training-example indices stacked (trials, n): its seeded
    training subset, gathered from the training split where the model runs, so no copy of
    the examples is made per evaluation. Each trial's logits are folded into its own
    metrics.
    """
    task = evaluators[0].pipeline.task
    rows = [{"step": step} for _ in evaluators]
    for split, prefix in SPLIT_PREFIX.items():
        accumulators = [MetricAccumulator(task) for _ in evaluators]
        shared = all(e.shared(split) for e in evaluators)
        streams = [evaluators[0]._batches(split)] if shared else [e._batches(split) for e in evaluators]
        for batches in zip(*streams):
            x = batches[0][0] if shared else np.stack([b[0] for b in batches])
            logits = predict(x, shared)
            for i, (accumulator, one) in enumerate(zip(accumulators, logits)):
                batch = batches[0 if shared else i]
                accumulator.update(one, batch[1], batch[2] if len(batch) > 2 else None)
        _fold(rows, prefix, accumulators)
    return _stamped(rows, started)


# pipeline -> {(split, batch size): device arrays of its shared batches}: one copy per data
# set however many groups of a pack (one trial each on a CPU racing) evaluate on it
_SHARED_INPUTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class PackEvaluation:
    """``evaluate_pack`` for a vmapped pack (``vmapped_step.PackStep``), on the device.

    Each split's batches are what ``evaluate_pack`` feeds ``predict`` (the same sizes, so
    the same logits), moved to the device once, when the pack is first evaluated: a shared
    split's inputs (one copy per data set and batch size, ``_SHARED_INPUTS``), each trial's
    training-subset indices. An evaluation then makes one compiled call
    (``PackStep.predict_batches``) and one fetch per split (per ``LOGITS_BUDGET`` of
    logits), no transfer to the device, and folds each batch into every trial's metrics in
    one pass over the pack (``metrics.update_pack``). The metrics stay the host's float64
    sums over the fetched logits: a float32 cross entropy on the device differs in the 8th
    digit (measured 2026-11-26: 1e-9 to 2e-8 relative, summed in float64 on the host; to
    1.4e-7 summed in float32), so the rows would change; and counting the errors on the
    device (the logits are fetched anyway) made XLA:CPU compile 0.3-2.1 s longer per pack.
    """

    def __init__(self, evaluators: list[Evaluator], step_fn, x_all):
        import jax.numpy as jnp

        self.evaluators, self.step_fn, self.x_all = evaluators, step_fn, x_all
        self.splits = []
        pipeline = evaluators[0].pipeline
        outputs = max(1, int(getattr(pipeline, "num_outputs", 1) or 1))
        for split, prefix in SPLIT_PREFIX.items():
            shared = all(e.shared(split) for e in evaluators)
            streams = ([evaluators[0]._batches(split)] if shared
                       else [e._batches(split) for e in evaluators])
            batches = list(zip(*streams))
            if shared:
                inputs = self._shared_inputs(pipeline, split, [b[0][0] for b in batches])
            else:
                inputs = [jnp.asarray(np.stack([t[0] for t in b]).astype(np.int32)) for b in batches]
            targets = [[b[0 if shared else i][1] for i in range(len(evaluators))] for b in batches]
            weights = [[b[0 if shared else i][2] if len(b[0]) > 2 else None
                        for i in range(len(evaluators))] for b in batches]
            sizes = [len(evaluators) * len(b[0][1]) * outputs for b in batches]
            self.splits.append((prefix, shared, inputs, targets, weights,
                                _calls(sizes, LOGITS_BUDGET)))

    @staticmethod
    def _shared_inputs(pipeline, split: str, batches: list) -> list:
        import jax.numpy as jnp

        cache = _SHARED_INPUTS.setdefault(pipeline, {})
        key = (split, tuple(len(x) for x in batches))
        if key not in cache:
            cache[key] = [jnp.asarray(x) for x in batches]
        return cache[key]

    def __call__(self, state, step: int, started: float) -> list[dict]:
        """The rows of the pack's trials at ``step`` (``evaluate_pack``'s, bit for bit)."""
        task = self.evaluators[0].pipeline.task
        rows = [{"step": step} for _ in self.evaluators]
        for prefix, shared, inputs, targets, weights, calls in self.splits:
            accumulators = [MetricAccumulator(task) for _ in self.evaluators]
            for first, last in calls:
                logits = self.step_fn.predict_batches(state, inputs[first:last],
                                                      (shared,) * (last - first), self.x_all)
                for j, batch in enumerate(range(first, last)):
                    update_pack(accumulators, logits[j], targets[batch], weights[batch])
            _fold(rows, prefix, accumulators)
        return _stamped(rows, started)


def _fold(rows: list[dict], prefix: str, accumulators: list) -> None:
    """Each trial's metrics of one split into its row, named ``<prefix>/<metric>``."""
    for row, accumulator in zip(rows, accumulators):
        for name, value in accumulator.result().items():
            row[f"{prefix}/{name}"] = value


def _stamped(rows: list[dict], started: float) -> list[dict]:
    """The rows with their wall time since ``started`` (the trial's start)."""
    for row in rows:
        row["wall_time"] = time.time() - started
    return rows


def _calls(sizes: list[int], budget: int) -> list[tuple[int, int]]:
    """Consecutive batches grouped into calls of at most ``budget`` logits each (a batch
    over the budget alone): ``(first, last)`` ranges."""
    calls, first, total = [], 0, 0
    for i, size in enumerate(sizes):
        if i > first and total + size > budget:
            calls.append((first, i))
            first, total = i, 0
        total += size
    if sizes:
        calls.append((first, len(sizes)))
    return calls
