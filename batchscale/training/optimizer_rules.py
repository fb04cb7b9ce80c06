"""Every optimizer's update rule, once: a pure function of one variable, its gradient, its
state slots, the learning rate, the trial's metaparameters and the step.

Both training engines call ``apply_rule``: the fit engine's Keras optimizer
(``optimizer.RuleOptimizer``, Python-number metaparameters, Keras' iteration count) and the
pack engine's vmapped step (``vmapped_step.PackStep``, every trial's metaparameters traced
on the trial axis). The rules use ``keras.ops`` only, so they run on Keras variables and
traced JAX arrays alike.

The paper's three (``sgd``, ``momentum``, ``nesterov_momentum``) are TensorFlow's
MomentumOptimizer rules, ``paper_update`` (Shallue et al. 2019, Section 2.2); their one
slot is the velocity. The Adam family follows Keras 3's own optimizers, which the tests
compare against step by step (tests/integration/test_adam_family.py):

- ``adam``, ``adamw`` (Kingma & Ba 2015; Loshchilov & Hutter 2019): slots m, v;
  ``theta -= eta_t m / (sqrt(v) + epsilon)`` with ``eta_t = eta sqrt(1 - beta_2^t) /
  (1 - beta_1^t)``: epsilon is Kingma & Ba's "epsilon hat" (Section 2), as in Keras and
  TensorFlow, not the epsilon of their Algorithm 1 (PyTorch's).
- ``lamb`` (You et al. 2020): slots m, v; the bias-corrected Adam step ``r = m_hat /
  (sqrt(v_hat) + epsilon)`` scaled by the trust ratio ``||theta|| / ||r||`` (1 where either
  norm is 0), per variable, as Keras' ``Lamb``.
- ``lion`` (Chen et al. 2023): slot m; ``theta -= eta sign(beta_1 m + (1 - beta_1) g)``,
  then ``m <- beta_2 m + (1 - beta_2) g``.

Two penalties, independent of each other, both only on the variables ``is_penalised``
picks (weight matrices and kernels: rank >= 2; never biases, normalisation scales or
offsets):

- ``l2_penalty`` (the trainer's, any optimizer): coupled L2, ``g <- g + lambda theta``
  before the rule, the gradient of ``(lambda / 2) ||theta||^2`` added to the loss;
- ``weight_decay`` (the optimizers that read it: adamw, lamb, lion): decoupled,
  ``theta <- theta - eta wd theta`` before the rule (scaled by the scheduled learning rate,
  outside the moments), exactly as Keras' ``weight_decay``. For LAMB this is Keras'
  form: the decay is applied outside the trust ratio, where You et al. put ``wd theta``
  inside the update the trust ratio scales.

``step`` is the number of updates the variable has had before this one (Keras'
``iterations``; the pack's global step), so the bias corrections use ``t = step + 1``.
"""

from __future__ import annotations

from keras import ops

from batchscale.core.names import OPTIMIZER_DEFAULTS, OPTIMIZER_PARAMETERS, OPTIMIZERS

# Each optimizer's state slots per variable, by name (a pack's checkpoint holds them as
# ``<slot>/<i>``; the momentum optimizers' ``velocity/<i>`` predates the Adam family).
SLOTS: dict[str, tuple[str, ...]] = {
    "sgd": (),
    "momentum": ("velocity",),
    "nesterov_momentum": ("velocity",),
    "adam": ("m", "v"),
    "adamw": ("m", "v"),
    "lamb": ("m", "v"),
    "lion": ("m",),
}
assert set(SLOTS) == set(OPTIMIZERS)


def is_penalised(variable) -> bool:
    """Whether the L2 penalty and decoupled weight decay apply: weight matrices and kernels
    (rank >= 2), not biases, normalisation scales or offsets (rank 1) nor scalars."""
    return len(variable.shape) >= 2


def reads_weight_decay(optimizer: str) -> bool:
    """Whether ``optimizer`` applies decoupled weight decay (adamw, lamb, lion)."""
    return "weight_decay" in OPTIMIZER_PARAMETERS[optimizer]


def optimizer_settings(optimizer: str, parameters: dict) -> dict[str, float]:
    """The metaparameters ``optimizer`` reads (besides the learning rate), from a trial's
    parameters, each missing one at its default (``OPTIMIZER_DEFAULTS``)."""
    defaults = OPTIMIZER_DEFAULTS.get(optimizer, {})
    return {name: float(parameters[name] if name in parameters else defaults.get(name, 0.0))
            for name in OPTIMIZER_PARAMETERS[optimizer]}


def paper_update(variable, gradient, velocity, learning_rate, momentum, nesterov: bool,
                 l2_penalty=None):
    """One variable's update by the paper's rules: ``(new value, new velocity)``.

    momentum:  v <- m v + g;  theta <- theta - eta v
    nesterov:  v <- m v + g;  theta <- theta - eta g - eta m v
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


def complement(settings, name: str, dtype):
    """``1 - settings[name]`` (1 - beta) in ``dtype``, computed before the cast: from the
    number itself (Python floats: exact to float64, as Keras computes ``1 - self.beta_1``)
    or from ``one_minus_<name>``, which a pack stacks from float64 (``vmapped_step.stack_hyper``).
    Subtracting a float32 beta from 1 would lose up to 6e-4 of 1 - 0.9999 (float32 holds
    0.9999 to 6e-8), the quantity a reverse-log search varies."""
    key = f"one_minus_{name}"
    if key in settings:
        return ops.cast(settings[key], dtype)
    return ops.cast(1.0 - settings[name], dtype)


def apply_rule(optimizer: str, variable, gradient, slots: tuple, learning_rate, settings,
               step, l2_penalty=None, decay: bool = False):
    """One variable's update by ``optimizer``'s rule: ``(new value, new slots)``.

    ``slots``: the variable's state in ``SLOTS[optimizer]`` order (a momentum optimizer
    with no velocity, ``()``, steps as plain SGD); ``settings``: the optimizer's
    metaparameters by name (numbers, or traced scalars in a pack); ``step``: updates
    before this one; ``l2_penalty``: the coupled penalty for this variable or None;
    ``decay``: whether this variable takes the decoupled ``settings["weight_decay"]``.
    """
    if optimizer in ("sgd", "momentum", "nesterov_momentum"):
        velocity = slots[0] if slots else None
        value, velocity = paper_update(variable, gradient, velocity, learning_rate,
                                       settings.get("momentum", 0.0),
                                       optimizer == "nesterov_momentum", l2_penalty)
        return value, (() if velocity is None else (velocity,))
    dtype = variable.dtype
    lr = ops.cast(learning_rate, dtype)
    grad = ops.cast(gradient, dtype)
    if l2_penalty is not None:
        grad = ops.add(grad, ops.multiply(ops.cast(l2_penalty, dtype), variable))
    if decay:  # Keras' order: theta - theta * wd * eta, before the rule reads theta
        wd = ops.cast(settings["weight_decay"], dtype)
        variable = ops.subtract(variable, ops.multiply(ops.multiply(variable, wd), lr))
    beta_1 = ops.cast(settings["beta_1"], dtype)
    beta_2 = ops.cast(settings["beta_2"], dtype)
    rest_1, rest_2 = complement(settings, "beta_1", dtype), complement(settings, "beta_2", dtype)
    if optimizer == "lion":
        (m,) = slots
        direction = ops.sign(ops.add(ops.multiply(m, beta_1), ops.multiply(grad, rest_1)))
        value = ops.subtract(variable, ops.multiply(lr, direction))
        return value, (ops.add(ops.multiply(m, beta_2), ops.multiply(grad, rest_2)),)
    m, v = slots
    t = ops.cast(ops.add(step, 1), dtype)
    beta_1_power, beta_2_power = ops.power(beta_1, t), ops.power(beta_2, t)
    epsilon = ops.cast(settings["epsilon"], dtype)
    m = ops.add(m, ops.multiply(ops.subtract(grad, m), rest_1))
    v = ops.add(v, ops.multiply(ops.subtract(ops.square(grad), v), rest_2))
    if optimizer == "lamb":
        update = ops.divide(ops.divide(m, 1.0 - beta_1_power),
                            ops.add(ops.sqrt(ops.divide(v, 1.0 - beta_2_power)), epsilon))
        w_norm = ops.sqrt(ops.sum(ops.square(variable)))
        r_norm = ops.sqrt(ops.sum(ops.square(update)))
        ratio = ops.where(ops.greater(w_norm, 0),
                          ops.where(ops.greater(r_norm, 0), ops.divide(w_norm, r_norm), 1.0), 1.0)
        return ops.subtract(variable, ops.multiply(ops.multiply(ratio, lr), update)), (m, v)
    alpha = ops.divide(ops.multiply(lr, ops.sqrt(1.0 - beta_2_power)), 1.0 - beta_1_power)
    value = ops.subtract(variable, ops.divide(ops.multiply(m, alpha), ops.add(ops.sqrt(v), epsilon)))
    return value, (m, v)
