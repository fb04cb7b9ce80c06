"""The paper's optimizers: TensorFlow MomentumOptimizer update rules as a Keras 3 Optimizer.

Keras' SGD folds the learning rate into the velocity (v = m v - eta g), which differs from the
paper's rules (v = m v + g, step scaled by the *current* eta) as soon as eta changes, e.g. under
linear decay. See Shallue et al. 2019, Section 2.2 and footnote 6.
"""

from __future__ import annotations

import keras
from keras import ops

from components.train_trial.schedules import OPTIMIZERS

__all__ = ["OPTIMIZERS", "PaperMomentum", "make_optimizer"]


@keras.saving.register_keras_serializable(package="batchscale")
class PaperMomentum(keras.optimizers.Optimizer):
    """SGD, heavy-ball momentum or Nesterov momentum with TensorFlow's MomentumOptimizer rules.

    momentum:  v <- m v + g;  theta <- theta - eta v
    nesterov:  v <- m v + g;  theta <- theta - eta g - eta m v
    momentum == 0 is plain SGD (no slot variables are created).
    """

    def __init__(
        self,
        learning_rate,
        momentum=0.0,
        nesterov=False,
        name="paper_momentum",
        **kwargs,
    ):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        momentum = float(momentum)
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1); got {momentum}")
        self.momentum = momentum
        self.nesterov = bool(nesterov)

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
        lr = ops.cast(learning_rate, variable.dtype)
        grad = ops.cast(gradient, variable.dtype)
        if self.momentum == 0.0:
            self.assign_sub(variable, ops.multiply(lr, grad))
            return
        m = ops.cast(self.momentum, variable.dtype)
        velocity = self._momentums[self._get_variable_index(variable)]
        new_velocity = ops.add(ops.multiply(m, velocity), grad)
        self.assign(velocity, new_velocity)
        if self.nesterov:
            step = ops.add(grad, ops.multiply(m, new_velocity))
        else:
            step = new_velocity
        self.assign_sub(variable, ops.multiply(lr, step))

    def get_config(self):
        config = super().get_config()
        config.update({"momentum": self.momentum, "nesterov": self.nesterov})
        return config


def make_optimizer(optimizer: str, learning_rate, momentum: float) -> PaperMomentum:
    """Optimizer by the paper's name; `learning_rate` is a float or a Keras schedule.

    "sgd" ignores `momentum`.
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}; got {optimizer!r}")
    if optimizer == "sgd":
        return PaperMomentum(learning_rate, momentum=0.0, name="sgd")
    nesterov = optimizer == "nesterov_momentum"
    return PaperMomentum(learning_rate, momentum=momentum, nesterov=nesterov, name=optimizer)
