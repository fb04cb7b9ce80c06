"""Validation of a raw study spec dict into a StudySpec (see batchscale.core.spec).

Every refusal is a SpecError whose message is one line: the field, the problem and what
is allowed. Checks that need workload facts (split sizes, metrics) use the registries'
metadata only, so nothing heavy is imported.
"""

from __future__ import annotations

import re
from dataclasses import fields

from batchscale.core.goals import GOAL_SYNTAX, check_goal, parse_goal
from batchscale.core.names import (
    SCHEDULE_OPTIONAL_PARAMETERS,
    SCHEDULE_PARAMETERS,
    SCHEDULES,
)
from batchscale.core.spec import (
    BACKENDS,
    DIRECTIONS,
    INTEGER_PARAMETERS,
    PARAMETER_BOUNDS,
    RESERVED_NAMES,
    SCALES,
    STUDY_NAME,
    Evaluation,
    Goal,
    Parameter,
    StudySpec,
)
from batchscale.core.spec import (
    as_number as _number,
)
from batchscale.core.spec import (
    fail_field as _fail,
)
from batchscale.validation.workload_spec import parse_workload, with_defaults
from batchscale.workloads import get_dataset

_TOP_KEYS = {f.name for f in fields(StudySpec)}
_REQUIRED = ("name", "store", "workload")
def parse_spec(raw: dict) -> StudySpec:
    if not isinstance(raw, dict):
        _fail("spec", "must be a mapping of study fields")
    unknown = set(raw) - _TOP_KEYS
    if unknown:
        _fail(sorted(unknown)[0], f"unknown field; allowed: {', '.join(sorted(_TOP_KEYS))}")
    for key in _REQUIRED:
        if raw.get(key) in (None, "", [], {}):
            _fail(key, "is required")

    name = str(raw["name"])
    if not STUDY_NAME.match(name) or name in RESERVED_NAMES:
        _fail("name", f"{name!r} is not allowed; use letters, digits, '.', '_' or '-' "
              f"(starting with a letter or digit, at most 100, not {', '.join(RESERVED_NAMES)})")
    store = str(raw["store"])
    if store.startswith("gs://") and not re.match(r"^gs://[a-z0-9][a-z0-9._-]{1,221}(/.*)?$", store):
        _fail("store", f"{store!r} is not a valid gs://bucket[/prefix] URL")

    workload = parse_workload(raw["workload"])
    dataset = get_dataset(workload.dataset)
    raw = with_defaults(raw, workload, dataset)
    batch_sizes = _parse_batch_sizes(raw["batch_sizes"], dataset)
    trials = _number("trials_per_batch_size", raw.get("trials_per_batch_size", 1), integer=True)
    if trials < 1:
        _fail("trials_per_batch_size", f"{trials} must be >= 1")
    schedule = raw.get("schedule", "constant")
    if schedule not in SCHEDULES:
        _fail("schedule", f"unknown schedule {schedule!r}; allowed: {', '.join(SCHEDULES)}")
    space = _parse_space(raw["search_space"])
    fixed = _parse_fixed(raw.get("fixed") or {})
    _check_parameters(workload.optimizer, schedule, space, fixed)
    goals = _parse_goals(raw["goals"], dataset)
    max_steps = _parse_max_steps(raw["max_steps"], batch_sizes)
    evaluation = _parse_evaluation(raw.get("evaluation") or {}, dataset)
    seed = _number("seed", raw.get("seed", 0), integer=True)
    backend = raw.get("backend", "jax")
    if backend not in BACKENDS:
        _fail("backend", f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")
    parallelism = _number("parallelism", raw.get("parallelism", 2), integer=True)
    if parallelism < 1:
        _fail("parallelism", f"{parallelism} must be >= 1")
    pack_size = _number("pack_size", raw.get("pack_size", 0), integer=True)
    if pack_size < 0:
        _fail("pack_size", f"{pack_size} must be an integer >= 0 (0: chosen from the workload "
              "and the placement preset)")
    checkpoint_seconds = _number("checkpoint_seconds", raw.get("checkpoint_seconds", 120.0))
    if checkpoint_seconds <= 0:
        _fail("checkpoint_seconds", f"{checkpoint_seconds} must be a number > 0 (seconds between "
              "checkpoints of an unfinished trial)")
    return StudySpec(name, store, workload, batch_sizes, trials, space, goals, max_steps, fixed,
                     schedule, evaluation, seed, backend, parallelism, pack_size,
                     float(checkpoint_seconds))


def _parse_batch_sizes(raw, dataset) -> tuple[int, ...]:
    if not isinstance(raw, (list, tuple)) or not raw:
        _fail("batch_sizes", "must be a non-empty list of positive integers")
    sizes = [_number("batch_sizes", b, integer=True) for b in raw]
    limit = dataset.split_sizes["train"]
    for b in sizes:
        if b < 1:
            _fail("batch_sizes", f"{b} is not positive; batch sizes must be >= 1")
        if b > limit:
            _fail("batch_sizes", f"{b} exceeds the {limit} training examples of {dataset.name}; "
                  f"allowed: 1..{limit}")
    if len(set(sizes)) != len(sizes):
        _fail("batch_sizes", "lists a batch size twice")
    return tuple(sorted(sizes))


def _parse_space(raw) -> tuple[Parameter, ...]:
    if not isinstance(raw, dict):
        _fail("search_space", "must map parameter names to {scale, min, max} or {scale: discrete, values}")
    params = []
    for name, cfg in raw.items():
        where = f"search_space.{name}"
        if name not in PARAMETER_BOUNDS:
            _fail(where, f"unknown parameter; allowed: {', '.join(PARAMETER_BOUNDS)}")
        if not isinstance(cfg, dict) or cfg.get("scale") not in SCALES:
            _fail(f"{where}.scale", f"must be one of {', '.join(SCALES)}")
        if cfg["scale"] == "discrete":
            values = cfg.get("values")
            if not isinstance(values, list) or not values:
                _fail(f"{where}.values", "a discrete parameter needs a non-empty list of values")
            for v in values:
                _check_value(where, name, _number(f"{where}.values", v))
            params.append(Parameter(name, "discrete", values=tuple(values)))
            continue
        extra = set(cfg) - {"scale", "min", "max", "integer"}
        if extra:
            _fail(f"{where}.{sorted(extra)[0]}", "unknown key; allowed: scale, min, max, integer")
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
        params.append(Parameter(name, cfg["scale"], float(lo), float(hi),
                                integer=name in INTEGER_PARAMETERS or bool(cfg.get("integer", False))))
    # Canonical order: the i-th parameter takes the i-th Halton dimension, and a dict that
    # crossed KFP (a protobuf Struct) does not keep its key order.
    return tuple(sorted(params, key=lambda p: p.name))


def _check_value(where, name, value):
    """``value`` within PARAMETER_BOUNDS[name]; the open ends are named here."""
    lo, hi, allowed = PARAMETER_BOUNDS[name]
    bad = (
        value < lo or value > hi
        or (name in ("momentum", "label_smoothing") and value >= 1)
        or (name in ("learning_rate", "end_learning_rate_factor", "power", "decay_fraction")
            and value <= 0)
        or (name in INTEGER_PARAMETERS and not float(value).is_integer())
    )
    if bad:
        _fail(where, f"{value} is out of range; {name} must be {allowed}")


def _parse_fixed(raw) -> dict:
    if not isinstance(raw, dict):
        _fail("fixed", "must map parameter names to values")
    for name, value in raw.items():
        if name not in PARAMETER_BOUNDS:
            _fail(f"fixed.{name}", f"unknown parameter; allowed: {', '.join(PARAMETER_BOUNDS)}")
        _check_value(f"fixed.{name}", name, _number(f"fixed.{name}", value))
    return dict(raw)


def _check_parameters(optimizer, schedule, space, fixed):
    given = {p.name for p in space} | set(fixed)
    both = {p.name for p in space} & set(fixed)
    if both:
        _fail(f"fixed.{sorted(both)[0]}", "is also in search_space; keep it in one of the two")
    needed = {"learning_rate"}
    if optimizer != "sgd":
        needed.add("momentum")
    elif "momentum" in given:
        _fail("search_space.momentum", "optimizer sgd has no momentum; use momentum or "
              "nesterov_momentum, or drop the parameter")

    def where(name):
        return f"fixed.{name}" if name in fixed else f"search_space.{name}"

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


def _parse_goals(raw, dataset) -> tuple[Goal, ...]:
    """Each goal as ``{metric, value[, direction]}`` or in the one goal syntax
    (``METRIC<VALUE``, ``METRIC>VALUE``, optional ``val/``); checked by the one goal rule
    against the metrics the data set's task produces. A study's goals stop its trials on
    the validation metric, so ``train/`` is refused."""
    if not isinstance(raw, list) or not raw:
        _fail("goals", f"must be a non-empty list of {{metric, value, direction}} or {GOAL_SYNTAX} strings")
    goals = []
    for i, g in enumerate(raw):
        where = f"goals[{i}]"
        if isinstance(g, str):
            goal, split = parse_goal(g, dataset.metrics, where)
            if split == "train":
                _fail(where, f"{g!r}: a study's goals are judged on the validation split; drop 'train/'")
            goals.append(goal)
            continue
        if not isinstance(g, dict) or not {"metric", "value"} <= set(g) <= {"metric", "value", "direction"}:
            _fail(where, f"must have metric and value (and optionally direction), or read {GOAL_SYNTAX}")
        direction = g.get("direction", "minimize")
        if direction not in DIRECTIONS:
            _fail(f"{where}.direction", f"{direction!r}; allowed: {', '.join(DIRECTIONS)}")
        goal = Goal(str(g["metric"]), float(_number(f"{where}.value", g["value"])), direction)
        goals.append(check_goal(goal, dataset.metrics, where))
    return tuple(goals)


def _parse_max_steps(raw, batch_sizes) -> dict[int, int]:
    if isinstance(raw, dict):
        steps = {int(b): _number(f"max_steps.{b}", s, integer=True) for b, s in raw.items()}
        missing = [b for b in batch_sizes if b not in steps]
        if missing:
            _fail("max_steps", f"has no budget for batch size {missing[0]}; give one per batch size "
                  "or a single integer")
    else:
        budget = _number("max_steps", raw, integer=True)
        if budget < 1:
            _fail("max_steps", f"{budget} must be >= 1")
        steps = dict.fromkeys(batch_sizes, budget)
    for b in batch_sizes:
        if steps[b] < 1:
            _fail(f"max_steps.{b}", f"{steps[b]} must be >= 1")
    return {b: steps[b] for b in batch_sizes}


def _parse_evaluation(raw, dataset) -> Evaluation:
    if not isinstance(raw, dict) or set(raw) - {"resolution", "train_examples", "divergence_factor"}:
        _fail("evaluation", "allowed keys: resolution, train_examples, divergence_factor")
    ev = Evaluation(**raw)
    resolution = _number("evaluation.resolution", ev.resolution)
    if not 0 < resolution <= 0.5:
        _fail("evaluation.resolution", f"{resolution} must be in (0, 0.5]")
    n = _number("evaluation.train_examples", ev.train_examples, integer=True)
    if not 0 <= n <= dataset.split_sizes["train"]:
        _fail("evaluation.train_examples", f"{n}; allowed: 0..{dataset.split_sizes['train']}")
    factor = _number("evaluation.divergence_factor", ev.divergence_factor)
    if factor <= 1:
        _fail("evaluation.divergence_factor", f"{factor} must be > 1")
    return Evaluation(float(resolution), n, float(factor))
