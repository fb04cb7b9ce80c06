"""The paper's optimizers: TensorFlow MomentumOptimizer update rules as a Keras 3 Optimizer.

Keras' SGD folds the learning rate into the velocity (v = m v - eta g), which differs from the
paper's rules (v = m v + g, step scaled by the *current* eta) as soon as eta changes, e.g. under
linear decay. See Shallue et al. 2019, Section 2.2 and footnote 6.

Optional L2 weight penalty (``l2_penalty``, lambda): the optimizer adds lambda * w to the
gradient of every weight matrix or kernel before the update, which is exactly the gradient of
(lambda / 2) * ||w||^2 added to the loss (as a TF model adds an L2 regulariser to its total
loss and MomentumOptimizer then sees the sum), while the reported cross-entropy metrics stay
those of the pure loss. Weight matrices and kernels are the variables of rank >= 2 (Dense and
convolution kernels, LSTM kernels, embedding tables); biases and normalisation scales and
offsets, all of rank 1, are not penalised. Unlike Keras' ``weight_decay`` (decoupled, scaled by
the learning rate, outside the momentum), the penalty enters the velocity like any gradient.
"""

from __future__ import annotations

import keras
from keras import ops

from batchscale.core.names import OPTIMIZERS

__all__ = ["OPTIMIZERS", "PaperMomentum", "is_penalised", "make_optimizer", "paper_update"]


@keras.saving.register_keras_serializable(package="batchscale")
class PaperMomentum(keras.optimizers.Optimizer):
    """SGD, heavy-ball momentum or Nesterov momentum with TensorFlow's MomentumOptimizer rules.

    momentum:  v <- m v + g;  theta <- theta - eta v
    nesterov:  v <- m v + g;  theta <- theta - eta g - eta m v
    momentum == 0 is plain SGD (no slot variables are created).
    With l2_penalty lambda > 0, g is g + lambda w for variables of rank >= 2 (see module doc).
    """

    def __init__(
        self,
        learning_rate,
        momentum=0.0,
        nesterov=False,
        l2_penalty=0.0,
        name="paper_momentum",
        **kwargs,
    ):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        momentum = float(momentum)
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1); got {momentum}")
        self.momentum = momentum
        self.nesterov = bool(nesterov)
        l2_penalty = float(l2_penalty)
        if not l2_penalty >= 0.0:
            raise ValueError(f"l2_penalty must be >= 0; got {l2_penalty}")
        self.l2_penalty = l2_penalty

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._momentums = []
        if self.momentum != 0.0:
            self._momentums = [
                self.add_variable_from_reference(var, "momentum") for var in var_list
            ]

    def update_step(self, gradient, variable, learning_rate):
        penalty = self.l2_penalty if self.l2_penalty and is_penalised(variable) else None
        velocity = self._momentums[self._get_variable_index(variable)] if self.momentum else None
        new_value, new_velocity = paper_update(variable, gradient, velocity, learning_rate,
                                               self.momentum, self.nesterov, penalty)
        if velocity is not None:
            self.assign(velocity, new_velocity)
        self.assign(variable, new_value)

    def get_config(self):
        config = super().get_config()
        config.update({"momentum": self.momentum, "nesterov": self.nesterov,
                       "l2_penalty": self.l2_penalty})
        return config


def paper_update(variable, gradient, velocity, learning_rate, momentum, nesterov: bool,
                 l2_penalty=None):
    """One variable's update by the paper's rules: ``(new value, new velocity)``.

    The one definition of the update, used by ``PaperMomentum`` (Python-number momentum)
    and by a vmapped pack (every trial's learning rate, momentum and penalty traced).
    ``velocity`` None means plain SGD (no slot); ``l2_penalty`` None means no penalty on
    this variable (the caller decides with ``is_penalised``).
    """
    dtype = variable.dtype
    lr = ops.cast(learning_rate, dtype)
    grad = ops.cast(gradient, dtype)
    if l2_penalty is not None:
        # d/dw (lambda / 2) ||w||^2 = lambda w, added before the momentum update.
        grad = ops.add(grad, ops.multiply(ops.cast(l2_penalty, dtype), variable))
    if velocity is None:
        return ops.subtract(variable, ops.multiply(lr, grad)), None
    m = ops.cast(momentum, dtype)
    new_velocity = ops.add(ops.multiply(m, velocity), grad)
    step = ops.add(grad, ops.multiply(m, new_velocity)) if nesterov else new_velocity
    return ops.subtract(variable, ops.multiply(lr, step)), new_velocity


def is_penalised(variable) -> bool:
    """Whether the L2 penalty applies: weight matrices and kernels (rank >= 2), not biases,
    normalisation scales or offsets (rank 1) nor scalars."""
    return len(variable.shape) >= 2


def make_optimizer(optimizer: str, learning_rate, momentum: float, l2_penalty: float = 0.0) -> PaperMomentum:
    """Optimizer by the paper's name; `learning_rate` is a float or a Keras schedule.

    "sgd" ignores `momentum`. `l2_penalty` adds l2_penalty * w to the gradient of each weight
    matrix/kernel (the gradient of (l2_penalty / 2) ||w||^2); 0 turns it off.
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}; got {optimizer!r}")
    if optimizer == "sgd":
        return PaperMomentum(learning_rate, momentum=0.0, l2_penalty=l2_penalty, name="sgd")
    nesterov = optimizer == "nesterov_momentum"
    return PaperMomentum(learning_rate, momentum=momentum, nesterov=nesterov, l2_penalty=l2_penalty,
                         name=optimizer)
