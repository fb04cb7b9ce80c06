"""Learning-rate schedules from the paper (Shallue et al. 2019, Section 3).

The pure-Python `learning_rate_at` is the reference definition; `make_keras_schedule` builds the
equivalent Keras schedule for the trainer. Keras is imported only inside the function, so this
module (and the names below) can be used without Keras installed.
"""

from __future__ import annotations

import functools

SCHEDULES = ("constant", "linear")
# The paper's optimizer names; kept here so callers need no Keras to validate them.
OPTIMIZERS = ("sgd", "momentum", "nesterov_momentum")


def _check(schedule: str, decay_steps: int) -> None:
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}; got {schedule!r}")
    if schedule == "linear" and decay_steps <= 0:
        raise ValueError(f"decay_steps must be positive for a linear schedule; got {decay_steps}")


def learning_rate_at(
    step: int,
    schedule: str,
    learning_rate: float,
    end_learning_rate_factor: float = 1.0,
    decay_steps: int = 1,
) -> float:
    """Learning rate for the update applied after `step` updates (the first update uses step 0).

    Linear decay goes from `learning_rate` (eta_0) at step 0 to
    `end_learning_rate_factor * learning_rate` (alpha * eta_0) at `decay_steps` (T), then stays.
    """
    _check(schedule, decay_steps)
    if schedule == "constant":
        return float(learning_rate)
    if step <= decay_steps:
        return learning_rate - (1.0 - end_learning_rate_factor) * learning_rate * step / decay_steps
    return end_learning_rate_factor * learning_rate


@functools.cache
def _linear_decay_class():
    """Define (once) the Keras schedule class; deferred so importing this module needs no Keras."""
    import keras

    @keras.saving.register_keras_serializable(package="batchscale")
    class LinearDecay(keras.optimizers.schedules.LearningRateSchedule):
        """The paper's linear decay, evaluated with keras.ops so it runs on any backend."""

        def __init__(self, learning_rate, end_learning_rate_factor, decay_steps):
            self.learning_rate = float(learning_rate)
            self.end_learning_rate_factor = float(end_learning_rate_factor)
            self.decay_steps = int(decay_steps)

        def __call__(self, step):
            ops = keras.ops
            t = ops.cast(step, "float32")
            frac = ops.minimum(ops.divide(t, float(self.decay_steps)), 1.0)
            decay = (1.0 - self.end_learning_rate_factor) * self.learning_rate
            return ops.subtract(self.learning_rate, ops.multiply(decay, frac))

        def get_config(self):
            return {
                "learning_rate": self.learning_rate,
                "end_learning_rate_factor": self.end_learning_rate_factor,
                "decay_steps": self.decay_steps,
            }

    return LinearDecay


def make_keras_schedule(
    schedule: str,
    learning_rate: float,
    end_learning_rate_factor: float = 1.0,
    decay_steps: int = 1,
):
    """Keras learning rate for an optimizer: a plain float for constant, else a schedule object.

    Keras evaluates a schedule at the optimizer's `iterations` before incrementing it, which
    matches `learning_rate_at`'s step convention.
    """
    _check(schedule, decay_steps)
    if schedule == "constant":
        return float(learning_rate)
    return _linear_decay_class()(learning_rate, end_learning_rate_factor, decay_steps)
