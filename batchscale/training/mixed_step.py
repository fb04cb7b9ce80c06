"""Mixed-batch groups: trials of several batch sizes in one vmapped step, each exact.

A group of a pack may hold trials of several small batch sizes (2, 4 and 8, say). Every
trial's batch indices are padded to the group's largest batch size (``pad_rows``: the
padding rows repeat the trial's own rows), so one compiled step of shape (trials, padded batch)
trains them all, and ``MixedStep`` takes each trial's loss as the mean over its own
first ``b`` rows only (``task_losses.masked_loss``; ``b`` is a traced per-trial value,
``hyper["batch_size"]``). The padded rows get exactly zero gradient, so each trial's
gradient and update are those of its own batch, equal to training it alone up to float32
rounding (a sum over 8 rows of which 6 are 0 may be added in another order than a sum
over 2). Padding with the trial's own examples keeps divergence its own too: a padded row
whose activations overflow copies a real row that overflows as well (with example 0 as
padding, a NaN of that one example reached the gradient through the masked rows' backward
pass, 0 x inf, and made INFEASIBLE a trial that alone trained on). On an accelerator a
step at batch sizes 2-8 costs about the same whatever the batch (latency-bound), so a
mixed group trains in max(steps) steps what separate groups train in their sum.

This is exact only for a model whose rows do not see each other in training: no batch
normalisation (batch statistics mix the rows, padding included), and random layers
(dropout) whose draws for the first ``b`` rows of a padded batch equal those of the
unpadded batch (true of Keras' dropout under JAX's partitionable threefry, the default
since JAX 0.5: each element's bits are a hash of its index). ``exact_under_padding``
checks this on the model itself, by running it, so a user's model is checked as the
registry's are (``packs.mixable`` asks it).
"""

from __future__ import annotations

import numpy as np

from batchscale.training.task_losses import masked_loss
from batchscale.training.vmapped_step import PackStep

SMALL_BATCH = 16  # batch sizes up to this are "small": latency-bound steps worth mixing


class MixedStep(PackStep):
    """``PackStep`` whose loss is each trial's mean over its own batch's rows: the trial
    axis's ``hyper["batch_size"]`` (float32) counts them; the rest is padding."""

    def _loss(self, outputs, y, hyper):
        return masked_loss(self.task, outputs, y, hyper["label_smoothing"], self.num_classes,
                           hyper["batch_size"])


def pad_rows(indices: np.ndarray, padded: int | None) -> np.ndarray:
    """A trial's batch indices (steps, b) padded to (steps, ``padded``) with its own rows
    repeated, each step's from that step's batch (masked out of its loss); unchanged if
    ``padded`` is None or b already."""
    if padded is None or indices.shape[1] == padded:
        return indices
    b = indices.shape[1]
    return np.concatenate([indices, indices[:, np.arange(padded - b) % b]], axis=1)


def padded_batch(runs: list) -> int | None:
    """The batch every trial of a group (``pack_loop.TrialRun``s) is padded to: the
    largest batch size of its members (those a checkpoint names included) when they mix
    several, or as a resumed mixed group's checkpoint recorded it; None for a group of
    one batch size (``PackStep``, no padding)."""
    sizes = {run.trial.batch_size for run in runs}
    recorded = [run.padded for run in runs if run.padded is not None]
    for run in runs:
        sizes.update(size for size in run.member_sizes or [] if size is not None)
    if len(sizes) < 2 and not recorded:
        return None
    return max([*sizes, *recorded])


def member_sizes(runs: list) -> list[int | None]:
    """The batch size at each position of a group (``runs``: a ``TrialRun`` or None for a
    filler slot, whose batch size a resumed member's checkpoint names, if any)."""
    named = next((r.member_sizes for r in runs if r is not None and r.member_sizes), None) or []
    return [r.trial.batch_size if r is not None else (named[p] if p < len(named) else None)
            for p, r in enumerate(runs)]


def batch_counts(runs: list):
    """Each slot's own batch size as the float32 trial-axis array ``MixedStep`` reads."""
    import jax.numpy as jnp

    return jnp.asarray(np.array([run.trial.batch_size for run in runs], np.float32))


def exact_under_padding(model, x: np.ndarray, rows: int = 2) -> bool:
    """Whether ``model``'s training forward pass on the first ``rows`` examples of ``x``
    gives the same outputs and the same new non-trainable state (a dropout seed, batch
    normalisation's moving statistics) when more examples follow them in the batch:
    what a padded batch needs for each trial's update to be its own batch's. Batch
    normalisation fails it (batch statistics), dropout passes it where its draws are
    indexed per element. Run eagerly once, on real examples (``x``, at least 2 * rows)."""
    trainable = [v.value for v in model.trainable_variables]
    fixed = [v.value for v in model.non_trainable_variables]
    alone, state_alone = model.stateless_call(trainable, fixed, x[:rows], training=True)
    padded, state_padded = model.stateless_call(trainable, fixed, x[:2 * rows], training=True)
    same = np.allclose(np.asarray(alone, np.float32), np.asarray(padded, np.float32)[:rows],
                       rtol=1e-4, atol=1e-5)
    return bool(same) and all(np.array_equal(np.asarray(a), np.asarray(b))
                              for a, b in zip(state_alone, state_padded))
