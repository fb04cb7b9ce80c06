"""Each task's training loss as a pure function of a model's outputs, for the steps that
trace it themselves (the pack engine's vmapped step, the noise probe's gradients), and
the targets it takes. The fit engine trains with ``keras_setup.make_loss``, Keras' loss
objects of the same formulas.

- classification: softmax cross entropy of logits (B, C) against one-hot rows, with
  label smoothing ``s`` (targets ``y (1 - s) + s / C``), averaged over the batch;
- regression: the mean squared error of predictions (B, k) against targets (B, k),
  averaged over every value (Keras' ``MeanSquaredError``); label smoothing does not apply.

Only tasks whose data the pack engine holds as arrays (``VMAPPED_TASKS``) are here.
"""

from __future__ import annotations

import numpy as np

VMAPPED_TASKS = ("classification", "regression")  # tasks the vmapped pack step trains


def loss_targets(task: str, labels: np.ndarray, num_outputs: int) -> np.ndarray:
    """A split's targets as the loss takes them: one-hot float32 rows (N, classes) for
    classification; float32 (N, k) for regression (a flat (N,) becomes (N, 1), never
    broadcast against (N, 1) predictions)."""
    if task == "classification":
        return np.eye(num_outputs, dtype=np.float32)[labels]
    if task == "regression":
        labels = np.asarray(labels, dtype=np.float32)
        return labels.reshape(len(labels), -1)
    raise ValueError(f"the vmapped step trains {', '.join(VMAPPED_TASKS)}, not {task!r}")


def stateless_loss(task: str, outputs, targets, smoothing, num_outputs: int):
    """The batch's mean training loss (traceable: ``smoothing`` may be a traced value)."""
    from keras import ops

    if task == "classification":
        losses = _cross_entropies(outputs, targets, smoothing, num_outputs)
        return ops.divide(ops.sum(losses), float(losses.shape[0]))
    if task == "regression":
        return ops.mean(ops.square(ops.subtract(ops.cast(outputs, "float32"), targets)))
    raise ValueError(f"the vmapped step trains {', '.join(VMAPPED_TASKS)}, not {task!r}")


def masked_loss(task: str, outputs, targets, smoothing, num_outputs: int, count):
    """``stateless_loss`` of the batch's first ``count`` examples (traceable, ``count`` a
    traced float): the rows after them are padding (a mixed-batch pack pads every trial's
    batch to its largest, ``mixed_step``). Their losses are left out with ``where``, never
    multiplied by 0 (a padded row whose loss overflows would make 0 * inf = nan), so their
    gradient is exactly 0 and the mean is over ``count`` examples, as the trial's own."""
    from keras import ops

    real = ops.less(ops.arange(outputs.shape[0], dtype="float32"), count)
    if task == "classification":
        losses = _cross_entropies(outputs, targets, smoothing, num_outputs)
        return ops.divide(ops.sum(ops.where(real, losses, 0.0)), count)
    if task == "regression":
        squares = ops.square(ops.subtract(ops.cast(outputs, "float32"), targets))
        kept = ops.where(ops.expand_dims(real, 1), squares, 0.0)
        return ops.divide(ops.sum(kept), ops.multiply(count, float(squares.shape[1])))
    raise ValueError(f"the vmapped step trains {', '.join(VMAPPED_TASKS)}, not {task!r}")


def _cross_entropies(outputs, targets, smoothing, num_outputs: int):
    """Each example's softmax cross entropy against its label-smoothed one-hot target."""
    from keras import ops

    target = ops.add(ops.multiply(targets, ops.subtract(1.0, smoothing)),
                     ops.divide(smoothing, float(num_outputs)))
    return ops.categorical_crossentropy(target, outputs, from_logits=True)
