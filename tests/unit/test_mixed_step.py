"""The parts of a mixed-batch pack that make each trial's update its own batch's: the
masked loss (its value and its gradient: none for the padding), the check of a model's
rows (batch normalisation fails, dropout passes), the padding of indices, and how a
resumed mixed group finds its members and its padded batch again."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from batchscale.training.mixed_step import member_sizes, pad_rows, padded_batch
from batchscale.training.pack_groups import pack_groups


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_the_masked_loss_is_the_unpadded_batchs_loss_and_the_padding_gets_no_gradient(task):
    import jax
    import jax.numpy as jnp

    from batchscale.training.task_losses import masked_loss, stateless_loss

    rng = np.random.default_rng(0)
    outputs = jnp.asarray(rng.normal(size=(8, 3)).astype(np.float32))
    targets = (np.eye(3, dtype=np.float32)[rng.integers(0, 3, 8)] if task == "classification"
               else rng.normal(size=(8, 3)).astype(np.float32))
    targets = jnp.asarray(targets)
    smoothing = jnp.float32(0.1)
    own = stateless_loss(task, outputs[:3], targets[:3], smoothing, 3)
    masked = masked_loss(task, outputs, targets, smoothing, 3, jnp.float32(3))
    assert float(masked) == pytest.approx(float(own), rel=1e-6)
    grad = jax.grad(lambda o: masked_loss(task, o, targets, smoothing, 3, jnp.float32(3)))(outputs)
    own_grad = jax.grad(lambda o: stateless_loss(task, o, targets[:3], smoothing, 3))(outputs[:3])
    np.testing.assert_allclose(np.asarray(grad[:3]), np.asarray(own_grad), rtol=1e-6, atol=1e-8)
    assert not np.asarray(grad[3:]).any()  # exactly zero, not merely small


def test_a_model_with_batch_normalisation_is_not_exact_under_padding_and_dropout_is():
    import keras

    from batchscale.training.mixed_step import exact_under_padding
    from batchscale.workloads import build_model

    x = np.random.default_rng(0).random((4, 8, 8, 1)).astype(np.float32)
    assert exact_under_padding(build_model("fc_32", (8, 8, 1), 10), x)  # dropout 0.4
    inputs = keras.Input((8, 8, 1))
    hidden = keras.layers.BatchNormalization()(keras.layers.Flatten()(inputs))
    assert not exact_under_padding(keras.Model(inputs, keras.layers.Dense(10)(hidden)), x)


def test_indices_are_padded_with_the_trials_own_rows_to_the_groups_batch():
    # each step's padding repeats that step's own examples, never another's (example 0
    # as padding once made a trial INFEASIBLE by a NaN of that example alone: 0 x inf in
    # the masked rows' backward pass)
    indices = np.array([[5, 6], [7, 8]], np.int32)
    assert pad_rows(indices, None) is indices and pad_rows(indices, 2) is indices
    assert pad_rows(indices, 5).tolist() == [[5, 6, 5, 6, 5], [7, 8, 7, 8, 7]]
    assert pad_rows(np.array([[3]], np.int32), 4).tolist() == [[3, 3, 3, 3]]


def _run(batch_size, trial_id, step=0, width=None, position=None, members=None, sizes=None,
         padded=None):
    """A ``pack_loop.TrialRun`` as the grouping sees it."""
    return SimpleNamespace(trial=SimpleNamespace(batch_size=batch_size, trial_id=trial_id),
                           step=step, width=width, position=position, members=members,
                           member_sizes=sizes, padded=padded)


def test_a_group_is_padded_to_its_largest_batch_size_or_as_its_checkpoint_says():
    assert padded_batch([_run(4, 1), _run(4, 2)]) is None  # one batch size: no padding
    assert padded_batch([_run(2, 1), _run(8, 1), _run(4, 1)]) == 8
    # a resumed batch-2 trial whose batch-8 member finished: still padded to 8
    assert padded_batch([_run(2, 1, 30, 3, 0, [1, 1, 1], [2, 4, 8], 8)]) == 8
    assert member_sizes([_run(2, 1, 30, 3, 0, [1, 1, 1], [2, 4, 8], 8), None, None]) == [2, 4, 8]


def test_a_mixed_groups_members_go_back_to_their_places_by_batch_size_and_id():
    """Trial 2/1 checkpointed (at step 7) in a mixed group (2/1, 4/1, 8/1) padded to 8;
    trials 4/1 and 8/1 had not: they start again at step 0 at positions 1 and 2 of a
    group as wide and as padded, and trial 2/2 (an id of a member, at another batch
    size) stays fresh."""
    resumed = _run(2, 1, 7, 3, 0, [1, 1, 1], [2, 4, 8], 8)
    runs = [resumed, _run(4, 1), _run(8, 1), _run(2, 2)]
    assert pack_groups(runs, 3) == [([1, 2], [None, 0, 1]), ([3], [0]), ([0], [0, None, None])]
    assert (runs[2].position, runs[2].padded, runs[3].width) == (2, 8, None)
    assert padded_batch(runs[1:3]) == 8


def test_resumed_trials_of_unpadded_groups_of_two_batch_sizes_are_never_put_together():
    """Budget-stopped trials 8/1 and 16/2 of one budget (the same step), each checkpointed
    in an unpadded group 4 wide (positions 0 and 1), resumed in one mixed pack: each goes
    back into an unpadded group of its own batch size, never one group padded to 16."""
    runs = [_run(8, 1, 300, 4, 0, [1, 2, 3, 4]), _run(16, 2, 300, 4, 1, [1, 2, 3, 4])]
    groups = pack_groups(runs, 4)
    assert sorted(members for members, _ in groups) == [[0], [1]]
    assert all(padded_batch([runs[i] for i in members]) is None for members, _ in groups)
