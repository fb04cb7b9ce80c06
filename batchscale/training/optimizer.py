"""The fit engine's optimizers: every rule of ``optimizer_rules`` as a Keras 3 Optimizer.

The paper's three are TensorFlow's MomentumOptimizer rules. Keras' SGD folds the learning
rate into the velocity (v = m v - eta g), which differs from the paper's rules (v = m v + g,
step scaled by the *current* eta) as soon as eta changes, e.g. under linear decay. See
Shallue et al. 2019, Section 2.2 and footnote 6. The Adam family (adam, adamw, lamb, lion)
follows Keras' own optimizers of those names (``optimizer_rules`` says how), with its
metaparameters per trial and its decoupled ``weight_decay`` on weight matrices and kernels
only.

Optional L2 weight penalty (``l2_penalty``, lambda), for every optimizer: the optimizer
adds lambda * w to the gradient of every weight matrix or kernel before the update, which
is exactly the gradient of (lambda / 2) * ||w||^2 added to the loss (as a TF model adds an
L2 regulariser to its total loss and MomentumOptimizer then sees the sum), while the
reported cross-entropy metrics stay those of the pure loss. Weight matrices and kernels are
the variables of rank >= 2 (Dense and convolution kernels, LSTM kernels, embedding tables);
biases and normalisation scales and offsets, all of rank 1, are not penalised. Unlike
``weight_decay`` (decoupled, scaled by the learning rate, outside the moments), the penalty
enters the velocity or moments like any gradient.
"""

from __future__ import annotations

import keras

from batchscale.core.names import OPTIMIZER_PARAMETERS, OPTIMIZERS
from batchscale.training.optimizer_rules import (
    SLOTS,
    apply_rule,
    is_penalised,
    optimizer_settings,
    paper_update,
    reads_weight_decay,
)

__all__ = ["OPTIMIZERS", "PaperMomentum", "RuleOptimizer", "is_penalised", "make_optimizer",
           "paper_update"]


@keras.saving.register_keras_serializable(package="batchscale")
class RuleOptimizer(keras.optimizers.Optimizer):
    """The optimizer ``rule`` (a name of ``OPTIMIZERS``) with its ``settings`` (the
    metaparameters it reads besides the learning rate) and the trainer's ``l2_penalty``.
    Its slots are ``optimizer_rules.SLOTS[rule]``, created per trainable variable in that
    order; a momentum optimizer with momentum 0 has none (plain SGD)."""

    def __init__(self, learning_rate, rule="sgd", settings=None, l2_penalty=0.0, name=None,
                 **kwargs):
        super().__init__(learning_rate=learning_rate, name=name or rule, **kwargs)
        if rule not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}; got {rule!r}")
        self.rule = rule
        self.settings = optimizer_settings(rule, settings or {})
        for key in ("momentum", "beta_1", "beta_2"):
            if key in self.settings and not 0.0 <= self.settings[key] < 1.0:
                raise ValueError(f"{key} must be in [0, 1); got {self.settings[key]}")
        for key in ("epsilon", "weight_decay"):
            if key in self.settings and not self.settings[key] >= 0.0:
                raise ValueError(f"{key} must be >= 0; got {self.settings[key]}")
        l2_penalty = float(l2_penalty)
        if not l2_penalty >= 0.0:
            raise ValueError(f"l2_penalty must be >= 0; got {l2_penalty}")
        self.l2_penalty = l2_penalty

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        names = () if self.settings.get("momentum") == 0.0 else SLOTS[self.rule]
        self._slots = [[self.add_variable_from_reference(var, _KERAS_SLOT_NAMES.get(name, name))
                        for var in var_list] for name in names]

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        penalty = self.l2_penalty if self.l2_penalty and is_penalised(variable) else None
        slots = tuple(slot[index] for slot in self._slots)
        new_value, new_slots = apply_rule(
            self.rule, variable, gradient, slots, learning_rate, self.settings, self.iterations,
            penalty, decay=reads_weight_decay(self.rule) and is_penalised(variable))
        for slot, value in zip(slots, new_slots):
            self.assign(slot, value)
        self.assign(variable, new_value)

    def get_config(self):
        config = super().get_config()
        config.update({"rule": self.rule, "settings": dict(self.settings),
                       "l2_penalty": self.l2_penalty})
        return config


# The Keras variable names of the slots (the paper's velocity was created as "momentum").
_KERAS_SLOT_NAMES = {"velocity": "momentum"}


@keras.saving.register_keras_serializable(package="batchscale")
class PaperMomentum(RuleOptimizer):
    """SGD, heavy-ball momentum or Nesterov momentum with TensorFlow's MomentumOptimizer rules.

    momentum:  v <- m v + g;  theta <- theta - eta v
    nesterov:  v <- m v + g;  theta <- theta - eta g - eta m v
    momentum == 0 is plain SGD (no slot variables are created).
    With l2_penalty lambda > 0, g is g + lambda w for variables of rank >= 2 (see module doc).
    """

    def __init__(self, learning_rate, momentum=0.0, nesterov=False, l2_penalty=0.0,
                 name="paper_momentum", **kwargs):
        momentum = float(momentum)
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1); got {momentum}")
        kwargs.pop("rule", None), kwargs.pop("settings", None)
        super().__init__(learning_rate, "nesterov_momentum" if nesterov else "momentum",
                         {"momentum": momentum}, l2_penalty, name=name, **kwargs)
        self.momentum = momentum
        self.nesterov = bool(nesterov)

    def get_config(self):
        config = super().get_config()
        for key in ("rule", "settings"):
            config.pop(key)
        config.update({"momentum": self.momentum, "nesterov": self.nesterov})
        return config


def make_optimizer(optimizer: str, learning_rate, momentum: float = 0.0, l2_penalty: float = 0.0,
                   **settings) -> RuleOptimizer:
    """Optimizer by name; ``learning_rate`` is a float or a Keras schedule.

    ``momentum`` is the paper's optimizers' (``sgd`` ignores it); ``settings`` are the
    Adam family's (beta_1, beta_2, epsilon, weight_decay: those the optimizer reads, each
    missing one at ``OPTIMIZER_DEFAULTS``; one it does not read is a ValueError).
    ``l2_penalty`` adds l2_penalty * w to the gradient of each weight matrix/kernel (the
    gradient of (l2_penalty / 2) ||w||^2); 0 turns it off.
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}; got {optimizer!r}")
    unread = sorted(set(settings) - set(OPTIMIZER_PARAMETERS[optimizer]))
    if unread:
        raise ValueError(f"optimizer {optimizer} does not read {', '.join(unread)}")
    if optimizer == "sgd":
        return PaperMomentum(learning_rate, momentum=0.0, l2_penalty=l2_penalty, name="sgd")
    if optimizer in ("momentum", "nesterov_momentum"):
        return PaperMomentum(learning_rate, momentum=momentum,
                             nesterov=optimizer == "nesterov_momentum", l2_penalty=l2_penalty,
                             name=optimizer)
    return RuleOptimizer(learning_rate, optimizer, settings, l2_penalty, name=optimizer)
