"""A pack's evaluation batch folded at once (``metrics.update_pack``) adds, to the bit, what
each trial's own ``MetricAccumulator.update`` adds; and a chunk's index buffer
(``chunk_buffers.buffer_steps``) takes one of a few sizes, never more than the chunk needs
beyond a small floor."""

import math

import numpy as np

from batchscale.training import chunk_buffers
from batchscale.training.metrics import MetricAccumulator, update_pack


def _fold_each(task, logits, targets, weights):
    out = [MetricAccumulator(task) for _ in logits[0]]
    for batch_logits, batch_targets, batch_weights in zip(logits, targets, weights):
        for acc, one, target, weight in zip(out, batch_logits, batch_targets, batch_weights):
            acc.update(one, target, weight)
    return [acc.result() for acc in out]


def _fold_pack(task, logits, targets, weights):
    out = [MetricAccumulator(task) for _ in logits[0]]
    for batch_logits, batch_targets, batch_weights in zip(logits, targets, weights):
        update_pack(out, batch_logits, batch_targets, batch_weights)
    return [acc.result() for acc in out]


def _same(one, other):
    assert one.keys() == other.keys()
    for name in one:
        assert (math.isnan(one[name]) and math.isnan(other[name])) or one[name] == other[name], name


def test_a_pack_folded_at_once_equals_each_trial_alone_to_the_bit():
    rng = np.random.default_rng(3)
    trials, classes = 5, 10
    logits, targets = [], []
    for n in (128, 128, 37):  # ragged last batch
        z = (rng.standard_normal((trials, n, classes)) * 4).astype(np.float32)
        if n == 128 and not logits:
            z[2, 5, 3] = np.nan  # trial 2 diverges in its first batch
        y = [rng.integers(0, classes, n) for _ in range(trials)]
        logits.append(z)
        targets.append(y)
    weights = [[None] * trials for _ in logits]
    alone = _fold_each("classification", logits, targets, weights)
    packed = _fold_pack("classification", logits, targets, weights)
    assert len(alone) == len(packed) == trials and math.isnan(alone[2]["cross_entropy_error"])
    for one, other in zip(alone, packed):
        _same(one, other)
    assert 0 < alone[0]["classification_error"] < 1


def test_weights_and_other_tasks_fold_trial_by_trial():
    rng = np.random.default_rng(4)
    z = rng.standard_normal((3, 20, 4)).astype(np.float32)
    y = [rng.integers(0, 4, 20) for _ in range(3)]
    w = [rng.integers(0, 2, 20).astype(float) for _ in range(3)]
    _same(_fold_each("classification", [z], [y], [w])[1],
          _fold_pack("classification", [z], [y], [w])[1])
    p = rng.standard_normal((3, 20, 2)).astype(np.float32)
    t = [rng.standard_normal((20, 2)).astype(np.float32) for _ in range(3)]
    _same(_fold_each("regression", [p], [t], [[None] * 3])[2],
          _fold_pack("regression", [p], [t], [None])[2])


def test_index_buffers_take_few_sizes_sized_to_the_chunk():
    # batch 4,000, one trial: 16 KiB a step; the floor is 16 steps (256 KiB), the cap 512
    sizes = {chunk_buffers.buffer_steps(n, 1, 4000) for n in range(1, 513)}
    assert sizes == {16, 32, 64, 128, 256, 512}
    assert [chunk_buffers.buffer_steps(n, 1, 4000) for n in (1, 3, 16, 17, 33, 400)] == [
        16, 16, 16, 32, 64, 512]
    # batch 8: a whole 512-step buffer is 16 KiB, under the floor: one size, as before
    assert {chunk_buffers.buffer_steps(n, 1, 8) for n in range(1, 513)} == {512}
    buffer = chunk_buffers.index_buffer(3, 2, 4000)
    assert buffer.shape == (8, 2, 4000) and buffer.dtype == np.int32 and not buffer.any()
    assert chunk_buffers.index_buffer(600, 1, 4000).shape == (600, 1, 4000)  # cut by run_chunk

