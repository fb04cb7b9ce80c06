"""Validation of a raw study spec dict into a StudySpec (see batchscale.core.spec).

Every refusal is a SpecError whose message is one line: the field, the problem and what
is allowed. Checks that need workload facts (split sizes, metrics) use the registries'
metadata only, so nothing heavy is imported. The metaparameters (search_space, fixed)
are checked in ``parameters``, the workload and its defaults in ``workload_spec``.
"""

from __future__ import annotations

from dataclasses import fields

from batchscale.core import protocols
from batchscale.core.experiment import TRAIN_SIZE_OPTION
from batchscale.core.goals import GOAL_SYNTAX, check_goal, parse_goal
from batchscale.core.names import SCHEDULES, is_model_function
from batchscale.core.spec import (
    BACKENDS,
    DIRECTIONS,
    MAX_PACK_SIZE,
    MAX_PARALLELISM,
    MAX_PRICE,
    MAX_ROUNDS,
    MAX_SEED,
    MAX_STEPS,
    MAX_TRIALS_PER_BATCH_SIZE,
    RESERVED_NAMES,
    STUDY_NAME,
    Evaluation,
    Goal,
    StudySpec,
    as_integer_in,
)
from batchscale.core.spec import as_number as _number
from batchscale.core.spec import fail_field as _fail
from batchscale.store.storage_api import check_root
from batchscale.validation.new_batch_sizes import parse_new_batch_sizes
from batchscale.validation.parameters import check_parameters, parse_fixed, parse_space
from batchscale.validation.workload_spec import DEFAULTABLE, check_subsets, parse_workload, with_defaults
from batchscale.workloads.dataset_registry import dataset_for
from batchscale.workloads.subsets import train_examples

_TOP_KEYS = {f.name for f in fields(StudySpec)}
_REQUIRED = ("name", "store", "workload")
_NAME_RULE = ("use letters, digits, '.', '_' or '-' (starting with a letter or digit, at most 100, "
              f"not {', '.join(RESERVED_NAMES)})")
_EVALUATION_KEYS = ("resolution", "train_examples", "divergence_factor")


def parse_spec(raw: dict) -> StudySpec:
    """The one door from a raw dict (YAML, CLI flags, a KFP parameter) to a StudySpec:
    every field checked, the workload's defaults filled in where the spec leaves a field
    out; the first problem raises a one-line SpecError."""
    if not isinstance(raw, dict):
        _fail("spec", "must be a mapping of study fields")
    unknown = sorted(map(str, set(raw) - _TOP_KEYS))
    if unknown:
        _fail(unknown[0], f"unknown field; allowed: {', '.join(sorted(_TOP_KEYS))}")
    for key in _REQUIRED:
        if raw.get(key) is None or (isinstance(raw[key], (str, list, dict)) and not raw[key]):
            _fail(key, "is required")
    name = _parse_name(raw["name"])
    store = _parse_store(raw["store"])
    seed = as_integer_in("seed", raw.get("seed", 0), 0, MAX_SEED)
    workload = parse_workload(raw["workload"], seed)
    dataset = dataset_for(workload)
    if workload.data is not None:  # the user's files: their facts are known only now
        check_subsets(workload.options, dataset)
    train = train_examples(dataset, workload.options)  # train_size, or the training split
    _refuse_nulls(raw)
    raw = with_defaults(raw, workload, dataset)
    batch_sizes = _parse_batch_sizes(raw["batch_sizes"], dataset, train)
    trials = as_integer_in("trials_per_batch_size", raw.get("trials_per_batch_size", 1), 1,
                           MAX_TRIALS_PER_BATCH_SIZE)
    schedule = raw.get("schedule", "constant")
    if schedule not in SCHEDULES:
        _fail("schedule", f"unknown schedule {schedule!r}; allowed: {', '.join(SCHEDULES)}")
    own_model = is_model_function(workload.model)  # its function takes parameters of its own
    space = parse_space(raw["search_space"], own_model)
    fixed = parse_fixed(raw.get("fixed"), own_model)
    check_parameters(workload.optimizer, schedule, space, fixed)
    goals = _parse_goals(raw["goals"], dataset)
    max_steps = _parse_max_steps(raw["max_steps"], batch_sizes)
    evaluation = _parse_evaluation(raw.get("evaluation"), train)
    backend = raw.get("backend", "jax")
    if backend not in BACKENDS:
        _fail("backend", f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")
    parallelism = as_integer_in("parallelism", raw.get("parallelism", 2), 1, MAX_PARALLELISM)
    pack_size = as_integer_in("pack_size", raw.get("pack_size", 0), 0, MAX_PACK_SIZE)
    checkpoint_seconds = _number("checkpoint_seconds", raw.get("checkpoint_seconds", 120.0))
    if checkpoint_seconds <= 0:
        _fail("checkpoint_seconds", f"{checkpoint_seconds} must be a number > 0 (seconds between "
              "checkpoints of an unfinished trial)")
    protocol = protocols.find(raw.get("protocol", protocols.DEFAULT.name))
    if protocol is None:
        _fail("protocol", f"unknown protocol {raw.get('protocol')!r}; allowed: {protocols.allowed_text()}")
    max_rounds = as_integer_in("max_rounds", raw.get("max_rounds", 3), 1, MAX_ROUNDS)
    cap = as_integer_in("max_trials_per_batch_size", raw.get("max_trials_per_batch_size", 0), 0,
                        MAX_TRIALS_PER_BATCH_SIZE)
    if 0 < cap < trials:
        _fail("max_trials_per_batch_size", f"{cap} is below trials_per_batch_size ({trials}); "
              "allowed: 0 (automatic) or an integer >= trials_per_batch_size")
    price = _number("price_per_device_hour", raw.get("price_per_device_hour", 0.0))
    if not 0 <= price <= MAX_PRICE:
        _fail("price_per_device_hour", f"{price} is not allowed; allowed: 0 (the price table's "
              f"list price for the preset) or a price in USD per device-hour up to {MAX_PRICE:,.0f}")
    new_batch_sizes = parse_new_batch_sizes(raw.get("new_batch_sizes"), trials)
    return StudySpec(name, store, workload, batch_sizes, trials, space, goals, max_steps, fixed,
                     schedule, evaluation, seed, backend, parallelism, pack_size,
                     float(checkpoint_seconds), protocol, max_rounds, cap, float(price),
                     new_batch_sizes)


def _parse_name(raw) -> str:
    """The study name, a string: a number is refused rather than turned into text, since
    YAML reads ``012`` as 10 and ``1_000`` as 1000 (quoting says what is meant)."""
    if not isinstance(raw, str):
        quote = ("; quote it in YAML so it stays text (YAML reads 012 as 10)"
                 if isinstance(raw, (int, float)) and not isinstance(raw, bool) else "")
        _fail("name", f"{raw!r} is not a string ({type(raw).__name__}){quote}; {_NAME_RULE}")
    if not STUDY_NAME.match(raw) or raw in RESERVED_NAMES:
        _fail("name", f"{raw!r} is not allowed; {_NAME_RULE}")
    return raw


def _parse_store(raw) -> str:
    """The store root: a local folder or gs://bucket[/prefix] (``check_root``, the store
    layer's one rule, so a spec accepts exactly the roots a store opens)."""
    try:
        check_root(raw)
    except ValueError as err:
        _fail("store", str(err))
    return raw


def _refuse_nulls(raw: dict) -> None:
    """A field the workload can default, given as null (``goals:`` with nothing after it),
    is refused: leaving a field out means the workload's default, writing it empty does
    not silently mean the same."""
    for key in DEFAULTABLE:
        if key in raw and raw[key] is None:
            _fail(key, "is null (written without a value); give a value, or leave the field "
                  "out to use the workload's default")


def _parse_batch_sizes(raw, dataset, limit: int) -> tuple[int, ...]:
    """Distinct batch sizes, each from 1 to the ``limit`` training examples (the training
    split, or the workload's ``train_size``), in increasing order."""
    if not isinstance(raw, (list, tuple)) or not raw:
        one = (f"; write [{raw}] for one batch size" if isinstance(raw, (int, float))
               and not isinstance(raw, bool) else "")
        _fail("batch_sizes", f"must be a non-empty list of positive integers, got {raw!r}{one}")
    sizes = [_number("batch_sizes", b, integer=True) for b in raw]
    subset = "" if limit == dataset.split_sizes["train"] else " (workload.options.train_size)"
    for b in sizes:
        if b < 1:
            _fail("batch_sizes", f"{b} is not positive; batch sizes must be >= 1")
        if b > limit:
            _fail("batch_sizes", f"{b} exceeds the {limit} training examples of {dataset.name}"
                  f"{subset}; allowed: 1..{limit}")
    if len(set(sizes)) != len(sizes):
        _fail("batch_sizes", "lists a batch size twice")
    return tuple(sorted(sizes))


def _parse_goals(raw, dataset) -> tuple[Goal, ...]:
    """Each goal as ``{metric, value[, direction]}`` or in the one goal syntax
    (``METRIC<VALUE``, ``METRIC>VALUE``, optional ``val/``); checked by the one goal rule
    against the metrics the data set's task produces. A study's goals stop its trials on
    the validation metric, so ``train/`` is refused."""
    if not isinstance(raw, list) or not raw:
        _fail("goals", f"must be a non-empty list, got {raw!r}; each goal a mapping {{metric, value"
              f"[, direction]}} or a string {GOAL_SYNTAX}; leave the field out for the workload's default")
    goals: list[Goal] = []
    for i, g in enumerate(raw):
        goal = _parse_goal(g, dataset, f"goals[{i}]")
        if goal in goals:
            _fail(f"goals[{i}]", f"{goal.label} repeats goals[{goals.index(goal)}]; give each goal once")
        goals.append(goal)
    return tuple(goals)


def _parse_goal(g, dataset, where: str) -> Goal:
    """One goal, a string in the goal syntax or a mapping {metric, value[, direction]}."""
    if isinstance(g, str):
        goal, split = parse_goal(g, dataset.metrics, where)
        if split == "train":
            _fail(where, f"{g!r}: a study's goals are judged on the validation split; drop 'train/'")
        return goal
    if not isinstance(g, dict) or not {"metric", "value"} <= set(g) <= {"metric", "value", "direction"}:
        _fail(where, f"must have metric and value (and optionally direction), or read {GOAL_SYNTAX}")
    direction = g.get("direction", "minimize")
    if direction not in DIRECTIONS:
        _fail(f"{where}.direction", f"{direction!r}; allowed: {', '.join(DIRECTIONS)}")
    goal = Goal(str(g["metric"]), float(_number(f"{where}.value", g["value"])), direction)
    return check_goal(goal, dataset.metrics, where)




def _parse_max_steps(raw, batch_sizes) -> dict[int, int]:
    """One step budget for every batch size, or a map batch size -> budget covering each."""
    if isinstance(raw, dict):
        steps = read_max_steps_map(raw)
        missing = [b for b in batch_sizes if b not in steps]
        if missing:
            _fail("max_steps", f"has no budget for batch size {missing[0]}; give one per batch size "
                  "or a single integer")
        return {b: steps[b] for b in batch_sizes}
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        _fail("max_steps", f"{raw!r} is neither an integer nor a map; allowed: one step budget "
              f"(an integer >= 1) or a map batch size -> steps")
    return dict.fromkeys(batch_sizes, as_integer_in("max_steps", raw, 1, MAX_STEPS))


def with_batch_sizes(raw: dict, batch_sizes: list[int]) -> dict:
    """A raw spec with its batch sizes replaced (``--batch-sizes``): where its ``max_steps``
    is a map, a batch size the map gives no budget takes the largest budget it gives (a
    budget too long costs steps, one too short loses the result), and the map keeps only
    the batch sizes studied. One integer for all stays as it is. Not parsed yet."""
    new = {**raw, "batch_sizes": list(batch_sizes)}
    if isinstance(raw.get("max_steps"), dict):
        known = read_max_steps_map(raw["max_steps"])
        if known:
            new["max_steps"] = {b: known.get(b, max(known.values())) for b in batch_sizes}
    return new


def with_train_size(raw: dict, size: int) -> dict:
    """A raw spec trained on ``size`` examples (``workload.options.train_size``; a data
    experiment's study, derived from a base that trains on the whole split): batch sizes
    over ``size`` are left out (and their ``max_steps`` entries), and an
    ``evaluation.train_examples`` over ``size`` becomes ``size``. When every batch size is
    over ``size`` they stay, so ``parse_spec`` names the first. Not parsed yet."""
    workload = dict(raw.get("workload") or {})
    workload["options"] = {**(workload.get("options") or {}), TRAIN_SIZE_OPTION: size}
    new = {**raw, "workload": workload}
    sizes = raw.get("batch_sizes")
    if isinstance(sizes, (list, tuple)):
        kept = [b for b in sizes if isinstance(b, (int, float)) and b <= size]
        if kept and len(kept) < len(sizes):
            new = with_batch_sizes(new, kept)
    evaluation = raw.get("evaluation")
    if isinstance(evaluation, dict) and isinstance(evaluation.get("train_examples"), (int, float)):
        new["evaluation"] = {**evaluation, "train_examples": min(evaluation["train_examples"], size)}
    return new


def read_max_steps_map(raw: dict) -> dict[int, int]:
    """``max_steps`` as a map, batch size -> step budget, each checked. Keys may be ints,
    integral floats or digit strings (JSON and a protobuf Struct make every key a string)."""
    steps: dict[int, int] = {}
    for key, value in raw.items():
        size = _batch_size_key(key)
        if size in steps:
            _fail("max_steps", f"gives batch size {size} twice; give each batch size one budget")
        steps[size] = as_integer_in(f"max_steps.{size}", value, 1, MAX_STEPS)
    return steps


def _batch_size_key(key) -> int:
    """A key of the max_steps map as the batch size it names."""
    if isinstance(key, str) and key.strip().isdigit():
        return int(key)
    if isinstance(key, (int, float)) and not isinstance(key, bool) and float(key).is_integer():
        return int(key)
    _fail("max_steps", f"key {key!r} is not a batch size; keys are batch sizes (positive "
          "integers) and values their step budgets, or give one integer for all")


def _parse_evaluation(raw, train: int) -> Evaluation:
    """When trials are evaluated: the grid's resolution, the training subset (of the
    ``train`` examples trained on), divergence."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        _fail("evaluation", f"must be a mapping, got {raw!r}; allowed keys: {', '.join(_EVALUATION_KEYS)}")
    extra = sorted(map(str, set(raw) - set(_EVALUATION_KEYS)))
    if extra:
        _fail(f"evaluation.{extra[0]}", f"unknown key; allowed: {', '.join(_EVALUATION_KEYS)}")
    if "train_examples" not in raw:  # the default subset, or the whole of a smaller split
        raw = {**raw, "train_examples": min(Evaluation.train_examples, train)}
    ev = Evaluation(**raw)
    resolution = _number("evaluation.resolution", ev.resolution)
    if not 0 < resolution <= 0.5:
        _fail("evaluation.resolution", f"{resolution} must be in (0, 0.5]")
    n = _number("evaluation.train_examples", ev.train_examples, integer=True)
    if not 0 <= n <= train:
        _fail("evaluation.train_examples", f"{n}; allowed: 0..{train} (the training examples)")
    factor = _number("evaluation.divergence_factor", ev.divergence_factor)
    if factor <= 1:
        _fail("evaluation.divergence_factor", f"{factor} must be > 1")
    return Evaluation(float(resolution), n, float(factor))
