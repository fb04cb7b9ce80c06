"""Learning-rate schedules of the paper (Shallue et al. 2019, Section 3 and Appendix C).

Every schedule is parameterised by scalar metaparameters, so the quasi-random search can
search them (the keys of ``parameters``):

- ``learning_rate`` (eta_0): the initial learning rate, > 0 (every schedule);
- ``end_learning_rate_factor`` (alpha): the decay factor, > 0; the rate ends at alpha * eta_0;
- ``decay_steps`` (T): integer >= 1, the step at which the rate reaches alpha * eta_0;
- ``power`` (lambda): > 0, for the (inverse) exponential polynomial decays;
- ``decay_events`` (k): integer >= 1, the number of drops of ``piecewise_linear``;
- ``warmup_steps`` (W): integer >= 0, optional on every schedule (default 0, no warm-up).

With no warm-up the rate at step t is eta(t) = d(t) * eta_0 for t <= T and alpha * eta_0 for
t > T, with Appendix C's decay functions of the progress p = t / T:

=================================  =================================================
constant                           d = 1
linear                             d = 1 - (1 - alpha) p
cosine                             d = alpha + (1 - alpha) / 2 * (1 + cos(pi p))
exponential_polynomial             d = alpha + (1 - alpha) (1 - p)^lambda
inverse_exponential_polynomial     d = alpha / (alpha + (1 - alpha) p^lambda)
exponential                        d = alpha^p
piecewise_linear                   d = alpha^(n / k), n = min(k, floor(k t / T))
=================================  =================================================

``piecewise_linear`` is the paper's piecewise-linear family restricted to the members it
reports trying: k equally spaced decay events, each multiplying the rate by alpha^(1/k), the
last at T (k = 1, 3 and 5 in the paper), after an optional linear warm-up. That expresses
He et al. (2016a)'s piecewise-constant schedule (W = 0) and Goyal et al. (2017)'s linear
warm-up followed by piecewise-constant decay (W > 0). Each drop is a vertical segment of
the paper's sequence of pairs (the pairs (t_j - 1, eta) and (t_j, eta alpha^(1/k))).

Warm-up (W > 0): the first W updates ramp linearly up to eta_0, the i-th (i = 1..W) using
eta_0 * i / W (so eta(t) = eta_0 (t + 1) / W for t < W, never 0); the decay then runs from
step W to step T with p = (t - W) / (T - W), so T stays the step at which the rate reaches
alpha * eta_0, and W < T is required. W = 0 gives the formulas above exactly.

Step convention: the update applied after ``step`` updates uses ``learning_rate_at(step)``
(the first update uses step 0). Keras evaluates a schedule at the optimizer's
``iterations`` before incrementing it, which is the same convention.

The pure-Python ``learning_rate_at`` is the reference definition; ``make_keras_schedule``
builds the equivalent Keras schedule (keras.ops only, so any backend). Keras is imported
only inside functions, so this module can be used without Keras installed.
"""

from __future__ import annotations

import functools
import math

from batchscale.core.names import (
    ALL_SCHEDULE_PARAMETERS,
    SCHEDULE_OPTIONAL_PARAMETERS,
    SCHEDULE_PARAMETERS,
    SCHEDULES,
)
from batchscale.core.spec import INTEGER_PARAMETERS


def schedule_parameters(schedule: str, parameters: dict) -> dict:
    """The schedule's metaparameters from ``parameters``, checked and in canonical types.

    Keys that no schedule reads (momentum, label_smoothing, ...) are ignored, so a trial's
    whole parameter dict may be passed; a schedule parameter this schedule does not use,
    or a missing or out-of-range one, raises ValueError.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}; got {schedule!r}")
    needed = ("learning_rate", *SCHEDULE_PARAMETERS[schedule])
    usable = set(needed) | set(SCHEDULE_OPTIONAL_PARAMETERS[schedule])
    missing = [name for name in needed if name not in parameters]
    if missing:
        raise ValueError(f"schedule {schedule} needs {', '.join(missing)}")
    unused = sorted(set(parameters) & set(ALL_SCHEDULE_PARAMETERS) - usable)
    if unused:
        raise ValueError(f"schedule {schedule} does not use {', '.join(unused)}")
    out = {}
    for name in usable & set(parameters):
        value = parameters[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number; got {value!r}")
        if name in INTEGER_PARAMETERS:
            if not float(value).is_integer():
                raise ValueError(f"{name} must be an integer; got {value!r}")
            value = int(value)
        else:
            value = float(value)
        out[name] = value
    out.setdefault("warmup_steps", 0)
    positive = ("learning_rate", "end_learning_rate_factor", "power", "decay_steps", "decay_events")
    for name in positive:
        if name in out and out[name] <= 0:
            raise ValueError(f"{name} must be > 0; got {out[name]}")
    if out["warmup_steps"] < 0:
        raise ValueError(f"warmup_steps must be >= 0; got {out['warmup_steps']}")
    if "decay_steps" in out and out["warmup_steps"] >= out["decay_steps"]:
        raise ValueError(f"warmup_steps ({out['warmup_steps']}) must be < decay_steps "
                         f"({out['decay_steps']})")
    return out


def _decay(schedule: str, p: float, q: dict, steps_in: int = 0) -> float:
    """d at progress p in [0, 1]; ``steps_in`` = t - W (an int) for piecewise_linear."""
    alpha = q.get("end_learning_rate_factor", 1.0)
    if schedule == "constant":
        return 1.0
    if schedule == "linear":
        return 1.0 - (1.0 - alpha) * p
    if schedule == "cosine":
        return alpha + (1.0 - alpha) / 2.0 * (1.0 + math.cos(math.pi * p))
    if schedule == "exponential_polynomial":
        return alpha + (1.0 - alpha) * (1.0 - p) ** q["power"]
    if schedule == "inverse_exponential_polynomial":
        return alpha / (alpha + (1.0 - alpha) * p ** q["power"])
    if schedule == "exponential":
        return alpha**p
    k = q["decay_events"]  # piecewise_linear; integer arithmetic puts drops exactly at t_j
    span = q["decay_steps"] - q["warmup_steps"]
    events = min(k, (k * min(max(steps_in, 0), span)) // span)
    return alpha ** (events / k)


def learning_rate_at(step: int, schedule: str, parameters: dict) -> float:
    """Learning rate for the update applied after ``step`` updates (the first uses step 0).

    The reference definition (see the module docstring); ``parameters`` holds
    learning_rate and the schedule's metaparameters (``SCHEDULE_PARAMETERS``).
    """
    q = schedule_parameters(schedule, parameters)
    eta0, warmup = q["learning_rate"], q["warmup_steps"]
    if step < 0:
        raise ValueError(f"step must be >= 0; got {step}")
    if step < warmup:
        return eta0 * (step + 1) / warmup
    if schedule == "constant":
        return eta0
    span = q["decay_steps"] - warmup
    p = min(max((step - warmup) / span, 0.0), 1.0)
    return eta0 * _decay(schedule, p, q, step - warmup)


def rate_at(schedule: str, step, q: dict):
    """The rate of ``schedule`` at ``step`` with keras.ops, so it runs inside a jitted step.

    ``q`` holds the schedule's metaparameters as Python numbers (one trial's
    ``PaperSchedule``) or as traced per-trial values (a vmapped pack, where every trial has
    its own learning rate, decay and warm-up); the formula is the same either way, and
    for Python numbers it is the one ``learning_rate_at`` defines.
    """
    import keras

    ops = keras.ops
    eta0 = q["learning_rate"]
    warmup = ops.cast(q.get("warmup_steps", 0), "float32")
    t = ops.cast(step, "float32")
    if schedule == "constant":
        rate = ops.multiply(ops.ones_like(t), eta0)
    else:
        alpha = q["end_learning_rate_factor"]
        span = ops.subtract(ops.cast(q["decay_steps"], "float32"), warmup)
        p = ops.clip(ops.divide(ops.subtract(t, warmup), span), 0.0, 1.0)
        if schedule == "linear":
            d = ops.subtract(1.0, ops.multiply(ops.subtract(1.0, alpha), p))
        elif schedule == "cosine":
            cos = ops.cos(ops.multiply(math.pi, p))
            d = ops.add(alpha, ops.multiply(ops.divide(ops.subtract(1.0, alpha), 2.0),
                                            ops.add(1.0, cos)))
        elif schedule == "exponential_polynomial":
            d = ops.add(alpha, ops.multiply(ops.subtract(1.0, alpha),
                                            ops.power(ops.subtract(1.0, p), q["power"])))
        elif schedule == "inverse_exponential_polynomial":
            d = ops.divide(alpha, ops.add(alpha, ops.multiply(ops.subtract(1.0, alpha),
                                                              ops.power(p, q["power"]))))
        elif schedule == "exponential":
            d = ops.exp(ops.multiply(ops.log(alpha), p))
        else:  # piecewise_linear: integer arithmetic puts the drops exactly at t_j
            k = ops.cast(q["decay_events"], "int32")
            span_steps = ops.cast(span, "int32")
            steps_in = ops.clip(ops.subtract(ops.cast(step, "int32"), ops.cast(warmup, "int32")),
                                0, span_steps)
            events = ops.floor_divide(ops.multiply(steps_in, k), span_steps)
            d = ops.exp(ops.multiply(ops.divide(ops.log(alpha), ops.cast(k, "float32")),
                                     ops.cast(events, "float32")))
        rate = ops.multiply(eta0, d)
    ramp = ops.multiply(ops.divide(eta0, ops.maximum(warmup, 1.0)), ops.add(t, 1.0))
    return ops.where(ops.less(t, warmup), ramp, rate)


@functools.cache
def _paper_schedule_class():
    """Define (once) the Keras schedule class; deferred so importing this module needs no Keras."""
    import keras

    @keras.saving.register_keras_serializable(package="batchscale")
    class PaperSchedule(keras.optimizers.schedules.LearningRateSchedule):
        """One of the paper's schedules (``rate_at``) as a Keras learning-rate schedule."""

        def __init__(self, schedule, parameters):
            self.schedule = str(schedule)
            self.parameters = schedule_parameters(self.schedule, dict(parameters))

        def __call__(self, step):
            return rate_at(self.schedule, step, self.parameters)

        def get_config(self):
            return {"schedule": self.schedule, "parameters": dict(self.parameters)}

    return PaperSchedule


def make_keras_schedule(schedule: str, parameters: dict):
    """Keras learning rate for an optimizer: a plain float for constant without warm-up,
    else a (serialisable) ``PaperSchedule`` object.

    ``parameters`` as for ``learning_rate_at`` (a trial's whole parameter dict will do).
    """
    q = schedule_parameters(schedule, parameters)
    if schedule == "constant" and q["warmup_steps"] == 0:
        return q["learning_rate"]
    return _paper_schedule_class()(schedule, q)
