"""The metaparameter part of a study spec: ``search_space`` and ``fixed``, checked against
the values each parameter may take (``PARAMETER_BOUNDS``) and against what the optimizer
and schedule read. Split from ``study_spec`` to keep each module small; same one-line
refusals (``<field>: <problem>; <what is allowed>``).
"""

from __future__ import annotations

from batchscale.core.names import (
    ALL_OPTIMIZER_PARAMETERS,
    OPTIMIZER_DEFAULTS,
    OPTIMIZER_PARAMETERS,
    OPTIMIZERS,
    SCHEDULE_OPTIONAL_PARAMETERS,
    SCHEDULE_PARAMETERS,
    SCHEDULES,
)
from batchscale.core.spec import (
    INTEGER_PARAMETERS,
    MAX_STEPS,
    PARAMETER_BOUNDS,
    SCALES,
    Parameter,
)
from batchscale.core.spec import as_number as _number
from batchscale.core.spec import fail_field as _fail
from batchscale.workloads.models.user_model import DATA_KEYS

_RANGE_KEYS = ("scale", "min", "max", "integer")
_DISCRETE_KEYS = ("scale", "values")


def parse_space(raw, model_parameters: bool = False) -> tuple[Parameter, ...]:
    """``search_space``: each parameter as ``{scale, min, max[, integer]}`` or
    ``{scale: discrete, values}``, in canonical (name) order. ``model_parameters``: the
    model is the user's function, which takes any other name as its own parameter
    (``_check_name``)."""
    if not isinstance(raw, dict):
        _fail("search_space", "must map parameter names to {scale, min, max} or {scale: discrete, values}")
    params = [_parse_parameter(name, cfg, model_parameters) for name, cfg in raw.items()]
    # Canonical order: the i-th parameter takes the i-th Halton dimension, and a dict that
    # crossed KFP (a protobuf Struct) does not keep its key order.
    return tuple(sorted(params, key=lambda p: p.name))


def _check_name(where: str, name, model_parameters: bool) -> None:
    """A trainer setting (``PARAMETER_BOUNDS``), or, for a user's model function, a name of
    its own (an identifier other than the keys the trainer adds: ``user_model.DATA_KEYS``)."""
    if name in PARAMETER_BOUNDS:
        return
    if not model_parameters:
        _fail(where, f"unknown parameter; allowed: {', '.join(PARAMETER_BOUNDS)} (other names are "
              "parameters of your own model function, workload.model: module:function)")
    if not isinstance(name, str) or not name.isidentifier() or name in DATA_KEYS:
        _fail(where, f"{name!r} cannot name a model parameter; allowed: an identifier other than "
              f"{', '.join(DATA_KEYS)} (which the trainer passes)")


def _parse_parameter(name, cfg, model_parameters: bool = False) -> Parameter:
    """One searched parameter, its keys, scale and range checked."""
    where = f"search_space.{name}"
    _check_name(where, name, model_parameters)
    if not isinstance(cfg, dict) or cfg.get("scale") not in SCALES:
        _fail(f"{where}.scale", f"must be one of {', '.join(SCALES)}")
    allowed = _DISCRETE_KEYS if cfg["scale"] == "discrete" else _RANGE_KEYS
    extra = sorted(map(str, set(cfg) - set(allowed)))
    if extra:
        _fail(f"{where}.{extra[0]}", f"unknown key for scale {cfg['scale']}; allowed: {', '.join(allowed)}")
    if cfg["scale"] == "discrete":
        values = cfg.get("values")
        if not isinstance(values, list) or not values:
            _fail(f"{where}.values", "a discrete parameter needs a non-empty list of values")
        for v in values:
            _check_value(where, name, _number(f"{where}.values", v))
        return Parameter(name, "discrete", values=tuple(_model_value(name, v) for v in values))
    integer = cfg.get("integer", False)
    if not isinstance(integer, bool):
        _fail(f"{where}.integer", f"{integer!r} is not a boolean; allowed: true or false")
    lo = _number(f"{where}.min", cfg.get("min"))
    hi = _number(f"{where}.max", cfg.get("max"))
    if not lo < hi:
        _fail(where, f"range [{lo}, {hi}] is empty or inverted; need min < max")
    if cfg["scale"] == "log" and lo <= 0:
        _fail(f"{where}.min", f"{lo} must be > 0 on a log scale")
    if cfg["scale"] == "reverse_log" and hi >= 1:
        _fail(f"{where}.max", f"{hi} must be < 1 on a reverse_log scale (1 - x on a log scale)")
    for v in (lo, hi):
        _check_value(where, name, v)
    if integer and name not in INTEGER_PARAMETERS:
        for v in {round(lo), round(hi)}:  # what a trial gets at the ends of the range
            _check_value(f"{where}.integer", name, v)
    return Parameter(name, cfg["scale"], float(lo), float(hi),
                     integer=name in INTEGER_PARAMETERS or integer)


def _check_value(where, name, value):
    """``value`` within PARAMETER_BOUNDS[name]; the open ends are named here, and the
    integer (step-count) parameters stop at MAX_STEPS, like a step budget. A model
    parameter's value is any finite number (its function judges it)."""
    if name not in PARAMETER_BOUNDS:
        return
    lo, hi, allowed = PARAMETER_BOUNDS[name]
    bad = (
        value < lo or value > hi
        or (name in ("momentum", "label_smoothing", "beta_1", "beta_2") and value >= 1)
        or (name in ("learning_rate", "end_learning_rate_factor", "power", "decay_fraction",
                     "epsilon") and value <= 0)
        or (name in INTEGER_PARAMETERS and not float(value).is_integer())
    )
    if bad:
        _fail(where, f"{value} is out of range; {name} must be {allowed}")
    if name in INTEGER_PARAMETERS and value > MAX_STEPS:
        _fail(where, f"{value:g} is too large; {name} must be at most {MAX_STEPS:,}")


def parse_fixed(raw, model_parameters: bool = False) -> dict:
    """``fixed``: parameter name -> one value (a number); null or absent is none.
    ``model_parameters`` as for ``parse_space``."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        _fail("fixed", f"must map parameter names to values, got {raw!r}; write {{}} for none")
    for name, value in raw.items():
        _check_name(f"fixed.{name}", name, model_parameters)
        _check_value(f"fixed.{name}", name, _number(f"fixed.{name}", value))
    return {name: _model_value(name, value) for name, value in raw.items()}


def _model_value(name, value):
    """A model parameter's integral value as an int: a spec that crossed KFP (a protobuf
    Struct) holds 128.0 where the YAML said 128, and the two must read as one study (and
    give the user's function the same value). Trainer settings keep the type they have."""
    if name in PARAMETER_BOUNDS or isinstance(value, bool) or not isinstance(value, float):
        return value
    return int(value) if value.is_integer() else value


def optimizer_takes(optimizer: str) -> str:
    """What ``optimizer`` reads besides the learning rate, in words: ``"momentum"``;
    ``"beta_1, beta_2, epsilon (optional; defaults 0.9, 0.999, 1e-08)"``."""
    names = OPTIMIZER_PARAMETERS[optimizer]
    defaults = OPTIMIZER_DEFAULTS.get(optimizer, {})
    if not names:
        return "only learning_rate"
    optional = [n for n in names if n in defaults]
    text = ", ".join(names)
    if optional:
        values = ", ".join(f"{defaults[n]:g}" for n in optional)
        text += f" ({'all ' if len(optional) == len(names) else ''}optional; defaults {values})"
    return text


def check_optimizer_parameters(optimizer, given, where) -> set[str]:
    """The optimizer's metaparameters among ``given`` (names searched or fixed): one it
    does not read refused in one line naming the optimizer and what it takes; returns
    those it needs (the paper's momentum; the Adam family's have defaults)."""
    unread = sorted(n for n in given if n in ALL_OPTIMIZER_PARAMETERS
                    and n not in OPTIMIZER_PARAMETERS[optimizer])
    if unread:
        name = unread[0]
        users = [o for o in OPTIMIZERS if name in OPTIMIZER_PARAMETERS[o]]
        _fail(where(name), f"optimizer {optimizer} has no {name}; it takes "
              f"{optimizer_takes(optimizer)}; drop it or use optimizer {' or '.join(users)}")
    defaults = OPTIMIZER_DEFAULTS.get(optimizer, {})
    return {n for n in OPTIMIZER_PARAMETERS[optimizer] if n not in defaults}


def check_parameters(optimizer, schedule, space, fixed):
    """The parameters given are those the optimizer and schedule read: none missing,
    none ignored, no parameter both searched and fixed, a warm-up shorter than the decay."""
    given = {p.name for p in space} | set(fixed)
    both = {p.name for p in space} & set(fixed)
    if both:
        _fail(f"fixed.{sorted(both)[0]}", "is also in search_space; keep it in one of the two")

    def where(name):
        return f"fixed.{name}" if name in fixed else f"search_space.{name}"

    needed = {"learning_rate"} | check_optimizer_parameters(optimizer, given, where)

    # decay_fraction (T as a fraction of the budget) stands in for decay_steps.
    given_as_steps = {"decay_steps" if n == "decay_fraction" else n for n in given}
    if {"decay_steps", "decay_fraction"} <= given:
        _fail(where("decay_fraction"), "give decay_steps or decay_fraction, not both")
    needed |= set(SCHEDULE_PARAMETERS[schedule])
    usable = needed | set(SCHEDULE_OPTIONAL_PARAMETERS[schedule])
    # Parameters read only by the learning-rate schedule (learning_rate is needed by all).
    schedule_only = {n for s in SCHEDULES
                     for n in (*SCHEDULE_PARAMETERS[s], *SCHEDULE_OPTIONAL_PARAMETERS[s])}
    unused = sorted(n for n in given if n in schedule_only | {"decay_fraction"}
                    and ("decay_steps" if n == "decay_fraction" else n) not in usable)
    if unused:
        takes = ", ".join([*SCHEDULE_PARAMETERS[schedule],
                           *(f"{n} (optional)" for n in SCHEDULE_OPTIONAL_PARAMETERS[schedule])])
        as_steps = "decay_steps" if unused[0] == "decay_fraction" else unused[0]
        users = [s for s in SCHEDULES if as_steps in SCHEDULE_PARAMETERS[s]]
        _fail(where(unused[0]), f"schedule {schedule} does not use {unused[0]} (it takes {takes}); "
              f"drop it or use schedule: {' or '.join(users)}")
    missing = sorted(needed - given_as_steps)
    if missing:
        _fail("search_space", f"{missing[0]} is needed by {optimizer}/{schedule}; "
              "search it or set it under fixed")

    def reach(name):
        """The smallest and largest value a trial can give ``name``."""
        if name in fixed:
            return fixed[name], fixed[name]
        p = next(p for p in space if p.name == name)
        return (min(p.values), max(p.values)) if p.scale == "discrete" else (p.min, p.max)

    # (With decay_fraction, T depends on the budget: the trial itself refuses W >= T.)
    if "warmup_steps" in given and "decay_steps" in given:
        longest_warmup, shortest_decay = reach("warmup_steps")[1], reach("decay_steps")[0]
        if longest_warmup >= shortest_decay:
            _fail(where("warmup_steps"), f"reaches {longest_warmup:g} steps but must stay < decay_steps "
                  f"(as low as {shortest_decay:g}): the warm-up ends before the decay does")
