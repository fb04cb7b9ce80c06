"""The study spec: one typed, validated description of a batch-size scaling study.

A study spec travels everywhere: YAML file or CLI flags -> ``StudySpec`` -> plain dict
across KFP -> ``StudySpec`` again inside each component. ``StudySpec.from_dict`` is the
only door in, and it refuses a bad spec with a ``SpecError`` whose one-line message names
the field and what is allowed, before anything touches the store. No TensorFlow, Keras
or kfp import here.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import asdict, dataclass, field
from importlib import resources

from components.train_trial.schedules import OPTIMIZERS, SCHEDULES
from components.workloads import check_model_name, get_dataset

SCALES = ("linear", "log", "reverse_log", "discrete")
DIRECTIONS = ("minimize", "maximize")
BACKENDS = ("jax", "tensorflow")
STUDY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
RESERVED_NAMES = ("datasets",)
# Metaparameters the trainer understands, with the values each may take.
PARAMETER_BOUNDS = {
    "learning_rate": (0.0, math.inf, "a number > 0"),
    "momentum": (0.0, 1.0, "a number in [0, 1)"),
    "label_smoothing": (0.0, 1.0, "a number in [0, 1)"),
    "end_learning_rate_factor": (0.0, 1.0, "a number in (0, 1]"),
    "decay_steps": (0.0, math.inf, "an integer >= 1"),
}


class SpecError(ValueError):
    """A study spec that cannot run; the message is one line naming field and remedy."""


def _fail(field_name: str, problem: str) -> None:
    raise SpecError(f"{field_name}: {problem}")


@dataclass(frozen=True)
class Parameter:
    """One searched metaparameter and how a point in [0, 1) maps onto it."""

    name: str
    scale: str
    min: float | None = None
    max: float | None = None
    values: tuple | None = None
    integer: bool = False

    def from_unit(self, u: float):
        if self.scale == "discrete":
            return self.values[min(int(u * len(self.values)), len(self.values) - 1)]
        lo, hi = self.min, self.max
        if self.scale == "linear":
            value = lo + u * (hi - lo)
        elif self.scale == "log":
            value = math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
        else:  # reverse_log: 1 - value on a log scale, dense near max (momentum)
            value = 1 - math.exp(math.log(1 - hi) + u * (math.log(1 - lo) - math.log(1 - hi)))
        return int(round(value)) if self.integer else value

    def paper_config(self) -> dict:
        """This parameter in the paper's study.json ``parameter_configs`` form."""
        if self.scale == "discrete":
            return {"type": "DISCRETE", "feasible_points": list(self.values), "scale": ""}
        return {
            "type": "INTEGER" if self.integer else "DOUBLE",
            "min_value": self.min,
            "max_value": self.max,
            "scale": {"linear": "LINEAR_SCALE", "log": "LOG_SCALE"}.get(
                self.scale, "REVERSE_LOG_SCALE"
            ),
        }


@dataclass(frozen=True)
class Goal:
    """A target a trial reaches at the first evaluation that strictly beats ``value``."""

    metric: str
    value: float
    direction: str = "minimize"

    @property
    def label(self) -> str:
        return f"{self.metric}{'<' if self.direction == 'minimize' else '>'}{self.value:g}"


@dataclass(frozen=True)
class Workload:
    dataset: str
    model: str
    optimizer: str


@dataclass(frozen=True)
class Evaluation:
    """When and how trials are evaluated.

    ``resolution``: evaluation steps form a geometric grid, each at most this fraction
    after the previous, so steps to result is known to within that relative error at
    any batch size. ``train_examples``: the training metrics are measured on a fixed
    subset of this many training examples (0 = the whole training split).
    ``divergence_factor``: a trial is INFEASIBLE once its training cross entropy is
    non-finite or exceeds this multiple of its value at step 0.
    """

    resolution: float = 0.05
    train_examples: int = 1000
    divergence_factor: float = 10.0


@dataclass(frozen=True)
class StudySpec:
    name: str
    store: str
    workload: Workload
    batch_sizes: tuple[int, ...]
    trials_per_batch_size: int
    search_space: tuple[Parameter, ...]
    goals: tuple[Goal, ...]
    max_steps: dict[int, int]
    fixed: dict = field(default_factory=dict)
    schedule: str = "constant"
    evaluation: Evaluation = Evaluation()
    seed: int = 0
    backend: str = "jax"
    parallelism: int = 2

    # ---- conversion -------------------------------------------------------------
    def to_dict(self) -> dict:
        """Plain JSON-able dict (the form that crosses KFP and lands in the store)."""
        d = asdict(self)
        d["search_space"] = {p.pop("name"): _compact(p) for p in d["search_space"]}
        d["max_steps"] = {str(b): s for b, s in self.max_steps.items()}
        return json.loads(json.dumps(d))  # tuples -> lists: plain JSON types only

    @classmethod
    def from_dict(cls, raw: dict) -> StudySpec:
        return _parse(raw)

    def fingerprint(self) -> str:
        """Hash of what defines the trials' meaning; a study may grow but not change it.

        Batch sizes, trial count, parallelism and store location may differ between
        runs of one study (to extend it); anything else would mix incompatible trials.
        """
        d = self.to_dict()
        for key in ("batch_sizes", "trials_per_batch_size", "parallelism", "store"):
            d.pop(key)
        d["max_steps"] = {}  # budgets may differ per batch size across extensions
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def _compact(p: dict) -> dict:
    """Drop unset fields so a parameter reads as it would be written in YAML."""
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in p.items() if v not in (None, False)}


@dataclass(frozen=True)
class TrialSpec:
    """One point of the search at one batch size; ``trial_id`` is stable (1-based)."""

    study: str
    batch_size: int
    trial_id: int
    parameters: dict

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict) -> TrialSpec:
        return cls(raw["study"], int(raw["batch_size"]), int(raw["trial_id"]), dict(raw["parameters"]))


# ---- loading ----------------------------------------------------------------------
def default_spec_dict() -> dict:
    """The embedded default study (quickstart.yaml shipped inside the package)."""
    import yaml

    text = resources.files("components.studies").joinpath("quickstart.yaml").read_text()
    return yaml.safe_load(text)


def load_spec_dict(path: str | None) -> dict:
    """A spec dict from a YAML file, or the embedded default when ``path`` is None."""
    if path is None:
        return default_spec_dict()
    import yaml

    try:
        with open(path) as fh:
            raw = yaml.safe_load(fh)
    except FileNotFoundError:
        raise SpecError(f"spec file: {path} does not exist") from None
    except yaml.YAMLError as err:
        raise SpecError(f"spec file: {path} is not valid YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(raw, dict):
        _fail("spec file", f"{path} must hold a mapping of study fields")
    return raw


# ---- validation -------------------------------------------------------------------
_TOP_KEYS = {
    "name", "store", "workload", "batch_sizes", "trials_per_batch_size", "search_space",
    "goals", "max_steps", "fixed", "schedule", "evaluation", "seed", "backend", "parallelism",
}
_REQUIRED = ("name", "store", "workload", "batch_sizes", "search_space", "goals", "max_steps")


def _number(field_name, value, integer=False):
    """``value`` as an int or float, or a SpecError naming the field.

    Integral floats count as integers: KFP passes dict parameters as protobuf Structs,
    which turn every int (batch sizes, seeds) into a float.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        _fail(field_name, f"{value!r} is not {'an integer' if integer else 'a finite number'}")
    if integer:
        if not float(value).is_integer():
            _fail(field_name, f"{value!r} is not an integer")
        return int(value)
    return value


def _parse(raw: dict) -> StudySpec:
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

    workload = _parse_workload(raw["workload"])
    dataset = get_dataset(workload.dataset)
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
    return StudySpec(name, store, workload, batch_sizes, trials, space, goals, max_steps, fixed,
                     schedule, evaluation, seed, backend, parallelism)


def _parse_workload(raw) -> Workload:
    if not isinstance(raw, dict) or set(raw) != {"dataset", "model", "optimizer"}:
        _fail("workload", "must have exactly the keys dataset, model, optimizer")
    for key, check in (("dataset", get_dataset), ("model", check_model_name)):
        try:
            check(str(raw[key]))
        except ValueError as err:
            _fail(f"workload.{key}", str(err))
    if raw["optimizer"] not in OPTIMIZERS:
        _fail("workload.optimizer",
              f"unknown optimizer {raw['optimizer']!r}; allowed: {', '.join(OPTIMIZERS)}")
    return Workload(str(raw["dataset"]), str(raw["model"]), str(raw["optimizer"]))


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
                                integer=bool(cfg.get("integer", name == "decay_steps"))))
    return tuple(params)


def _check_value(where, name, value):
    lo, hi, allowed = PARAMETER_BOUNDS[name]
    bad = (
        value < lo or value > hi
        or (name in ("momentum", "label_smoothing") and value >= 1)
        or (name in ("learning_rate", "end_learning_rate_factor") and value <= 0)
        or (name == "decay_steps" and value < 1)
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
    if schedule == "linear":
        needed |= {"end_learning_rate_factor", "decay_steps"}
    elif given & {"end_learning_rate_factor", "decay_steps"}:
        _fail("schedule", "end_learning_rate_factor/decay_steps need schedule: linear")
    missing = sorted(needed - given)
    if missing:
        _fail("search_space", f"{missing[0]} is needed by {optimizer}/{schedule}; "
              "search it or set it under fixed")


def _parse_goals(raw, dataset) -> tuple[Goal, ...]:
    if not isinstance(raw, list) or not raw:
        _fail("goals", "must be a non-empty list of {metric, value, direction}")
    goals = []
    for i, g in enumerate(raw):
        where = f"goals[{i}]"
        if not isinstance(g, dict) or not {"metric", "value"} <= set(g) <= {"metric", "value", "direction"}:
            _fail(where, "must have metric and value (and optionally direction)")
        if g["metric"] not in dataset.metrics:
            _fail(f"{where}.metric", f"{g['metric']!r} is not produced by {dataset.name}; "
                  f"allowed: {', '.join(dataset.metrics)}")
        direction = g.get("direction", "minimize")
        if direction not in DIRECTIONS:
            _fail(f"{where}.direction", f"{direction!r}; allowed: {', '.join(DIRECTIONS)}")
        goals.append(Goal(g["metric"], float(_number(f"{where}.value", g["value"])), direction))
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


def resolve_spec(study_spec: dict, store_root: str = "") -> StudySpec:
    """The StudySpec a pipeline task works on: ``store_root``, when given, overrides the
    spec's store (the Kubeflow UI run parameter that points a study at a bucket)."""
    raw = dict(study_spec)
    if store_root:
        raw["store"] = store_root
    return StudySpec.from_dict(raw)
