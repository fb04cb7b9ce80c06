"""The study spec: one typed, validated description of a batch-size scaling study.

A study spec travels everywhere: YAML file or CLI flags -> ``StudySpec`` -> plain dict
across KFP -> ``StudySpec`` again inside each component. ``batchscale.validation.parse_spec``
is the only door in, and it refuses a bad spec with a ``SpecError`` whose one-line message names
the field and what is allowed, before anything touches the store. No TensorFlow, Keras
or kfp import here.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import asdict, dataclass, field, replace

from batchscale.core.errors import SpecError, fail_field  # noqa: F401  (re-exported)
from batchscale.core.goals import Goal  # noqa: F401  (a StudySpec field's type)
from batchscale.core.names import (  # noqa: F401  (BACKENDS, PRECISIONS: allowed values)
    BACKENDS,
    PRECISIONS,
    is_model_function,
    model_folder,
)
from batchscale.core.new_batch_sizes import NewBatchSizes
from batchscale.core.protocols import DEFAULT as DEFAULT_PROTOCOL
from batchscale.core.protocols import StoppingProtocol

SCALES = ("linear", "log", "reverse_log", "discrete")
DIRECTIONS = ("minimize", "maximize")
STUDY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")  # \Z: no trailing newline
RESERVED_NAMES = ("datasets",)
# Metaparameters the trainer understands, with the values each may take: (lowest,
# highest, allowed), bounds inclusive unless ``allowed`` says otherwise (see
# spec_validation._check_value). Which ones a study needs depends on its optimizer and
# schedule (batchscale.training.schedules.SCHEDULE_PARAMETERS, Appendix C).
PARAMETER_BOUNDS = {
    "learning_rate": (0.0, math.inf, "a number > 0"),  # eta_0
    "momentum": (0.0, 1.0, "a number in [0, 1)"),
    "label_smoothing": (0.0, 1.0, "a number in [0, 1)"),
    "l2_penalty": (0.0, math.inf, "a number >= 0"),  # (l2_penalty / 2) ||W||^2 on weight matrices
    "end_learning_rate_factor": (0.0, 1.0, "a number in (0, 1]"),  # alpha
    "decay_steps": (1.0, math.inf, "an integer >= 1"),  # T
    # T as a fraction of each batch size's budget (the trainer rounds it to decay_steps);
    # an alternative to decay_steps that transfers across batch sizes.
    "decay_fraction": (0.0, math.inf, "a number > 0"),
    "power": (0.0, math.inf, "a number > 0"),  # lambda of the (inverse) exponential polynomial
    "decay_events": (1.0, math.inf, "an integer >= 1"),  # drops of piecewise_linear
    "warmup_steps": (0.0, math.inf, "an integer >= 0"),  # linear warm-up, any schedule
    # The Adam family's (core.names.OPTIMIZER_PARAMETERS; searched on reverse_log / log scales)
    "beta_1": (0.0, 1.0, "a number in [0, 1)"),
    "beta_2": (0.0, 1.0, "a number in [0, 1)"),
    "epsilon": (0.0, math.inf, "a number > 0"),
    "weight_decay": (0.0, math.inf, "a number >= 0"),  # decoupled: w -= eta * wd * w
}
# Parameters that only take integer values (searched as INTEGER, rounded to the nearest).
INTEGER_PARAMETERS = frozenset({"decay_steps", "decay_events", "warmup_steps"})

# Upper bounds on a spec's counts: far past any real study, low enough that a slip (three
# extra zeros) is refused before it schedules a billion trials, and each survives the
# float64 of a protobuf Struct exactly. docs/study-spec.md states them.
MAX_TRIALS_PER_BATCH_SIZE = 10_000
MAX_PACK_SIZE = MAX_TRIALS_PER_BATCH_SIZE  # a pack holds trials of one batch size
MAX_PARALLELISM = 1_000  # pack tasks at once
MAX_STEPS = 1_000_000_000  # a step budget; also caps decay_steps, decay_events, warmup_steps
MAX_SEED = 2**32 - 1  # the search and trial seeds are derived from it; numpy's seed range
MAX_PRICE = 1_000_000.0  # USD per device-hour: far past any device; catches a slip
MAX_ROUNDS = 20  # search rounds of a study (the paper re-searched a batch size once or twice)
# Trials a batch size may reach through top-ups and re-searches, when the spec leaves
# ``max_trials_per_batch_size`` at 0: this multiple of ``trials_per_batch_size``.
DEFAULT_TRIAL_CAP_FACTOR = 4


def as_number(field_name, value, integer=False):
    """``value`` as an int or float, or a SpecError naming the field.

    Integral floats count as integers: KFP passes dict parameters as protobuf Structs,
    which turn every int (batch sizes, seeds) into a float.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        fail_field(field_name, f"{value!r} is not {'an integer' if integer else 'a finite number'}"
                   f"{_yaml_text_hint(value)}")
    if integer:
        if not float(value).is_integer():
            fail_field(field_name, f"{value!r} is not an integer")
        return int(value)
    return value


def _yaml_text_hint(value) -> str:
    """A number YAML read as text (PyYAML, YAML 1.1, takes ``1e-4`` for a string: its
    exponent form needs a dot, ``1.0e-4``): the hint that says so and how to write it."""
    if not isinstance(value, str):
        return ""
    try:
        number = float(value)
    except ValueError:
        return ""
    if not math.isfinite(number):
        return ""
    return (f" (read as text: YAML takes an exponent only with a dot, 1.0e-4 not 1e-4, and a "
            f"quoted number as text; write {number!r})")


def as_integer_in(field_name, value, lowest: int, highest: int) -> int:
    """``value`` as an int in [lowest, highest], or a one-line SpecError naming the field
    and the range (the one check of every bounded count in a spec)."""
    number = as_number(field_name, value, integer=True)
    if not lowest <= number <= highest:
        fail_field(field_name, f"{number} is out of range; allowed: an integer >= {lowest} "
                   f"and <= {highest:,}")
    return number


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
class DataFiles:
    """A user's data set as files (``workload.dataset: {path, format, ...}``).

    ``path``: a local path or gs:// URL (a file; for ``images`` a folder with one subfolder
    per class). ``label``: the label column of parquet/csv (the other columns are the
    features). ``validation_fraction``: where the files hold no validation split, that
    fraction of the training examples is carved off, shuffled by ``seed`` (the study's).
    """

    path: str
    format: str
    label: str = "label"
    validation_fraction: float = 0.1
    seed: int = 0

    @property
    def name(self) -> str:
        """The data set's name in the store (``datasets/<name>/``): the file's stem and a
        hash of everything that shapes the prepared splits, so another file, column, carve
        or seed is another data set, never a stale cache."""
        stem = re.sub(r"[^A-Za-z0-9_-]+", "_", self.path.rstrip("/").rsplit("/", 1)[-1])
        stem = stem.rsplit(".", 1)[0] if self.format != "images" else stem
        key = json.dumps([self.path, self.format, self.label, self.validation_fraction, self.seed])
        return f"file_{stem[:40] or 'data'}_{hashlib.sha256(key.encode()).hexdigest()[:8]}"

    def to_dict(self) -> dict:
        """The spec's form (the seed is the study's, not repeated here)."""
        return {"path": self.path, "format": self.format, "label": self.label,
                "validation_fraction": self.validation_fraction}


@dataclass(frozen=True)
class Workload:
    """What is trained: data set, model and optimizer by name, plus how.

    ``precision``: a Keras dtype policy; mixed precision computes in 16 bits but keeps
    variables and the logits the metrics see in float32, so metrics keep their meaning.
    ``options``: data-set options (e.g. ImageNet's ``image_size``), each an integer
    the data set declares.

    A user's own workload: ``model`` may be a function in their code
    (``core.names.is_model_function``) and ``data`` their files (``dataset`` is then
    ``data.name``, the store's name for them); ``task`` says what is predicted (empty:
    the registry data set's task).
    """

    dataset: str
    model: str
    optimizer: str
    precision: str = "float32"
    options: dict = field(default_factory=dict)
    task: str = ""
    data: DataFiles | None = None

    @property
    def path(self) -> str:
        """The workload's folder in its study, as the paper's database lays it out:
        ``<dataset>/<model>/<optimizer>`` (a user's model function by ``model_folder``)."""
        return f"{self.dataset}/{model_folder(self.model)}/{self.optimizer}"

    @property
    def label(self) -> str:
        """How the console and the pack notes name the workload: ``dataset/model/optimizer``
        for the registry's; a user's data by its file name and format and model by its
        reference (``mnist.npz (npz)/model.py:build/adamw``), not the store's hashed name."""
        if self.data is None and not is_model_function(self.model):
            return f"{self.dataset}/{self.model}/{self.optimizer}"
        data = (f"{self.data.path.rstrip('/').rsplit('/', 1)[-1]} ({self.data.format})"
                if self.data else self.dataset)
        model = self.model
        if is_model_function(model) and "/" in model.rpartition(":")[0]:
            model = model.rsplit("/", 1)[-1]  # a file by its name
        return f"{data}/{model}/{self.optimizer}"

    def to_dict(self) -> dict:
        """The spec's form: files as the ``dataset`` mapping; ``task`` and ``data`` only
        when set (so a registry workload's dict, and its study's fingerprint, are as before)."""
        d = {"dataset": self.data.to_dict() if self.data else self.dataset, "model": self.model,
             "optimizer": self.optimizer, "precision": self.precision, "options": dict(self.options)}
        if self.task:
            d["task"] = self.task
        return d


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
    # Trials per pack task (0: automatic, from the workload and the placement preset; see
    # batchscale.pipelines.placement.pack_size_for) and how often, in seconds, an unfinished
    # trial writes its checkpoint. Neither changes any trial's result.
    pack_size: int = 0
    checkpoint_seconds: float = 120.0
    # The paper's protocol: when trials stop (a ``core.protocols`` record; its name in
    # ``to_dict``), how many
    # search rounds a study may run (round 1 samples the search space; later rounds top up
    # non-divergent trials and re-search batch sizes whose best trial sits at an edge), and
    # how many trials a batch size may reach in all (0: DEFAULT_TRIAL_CAP_FACTOR x trials).
    protocol: StoppingProtocol = DEFAULT_PROTOCOL
    max_rounds: int = 3
    max_trials_per_batch_size: int = 0
    # USD per device-hour for cost to result (``batchscale.core.prices``): 0 uses the
    # price table for the preset the trials ran on. Changes no trial; may change any time.
    price_per_device_hour: float = 0.0
    # How a batch size added to a study with finished batch sizes starts its search: the
    # spec's search space, or the box the metaparameter laws fit (``core.new_batch_sizes``).
    # Changes no recorded round; may change between runs.
    new_batch_sizes: NewBatchSizes = NewBatchSizes()

    @property
    def trial_cap(self) -> int:
        """The most trials one batch size may have, every round included."""
        return self.max_trials_per_batch_size or DEFAULT_TRIAL_CAP_FACTOR * self.trials_per_batch_size

    # ---- conversion -------------------------------------------------------------
    def to_dict(self) -> dict:
        """Plain JSON-able dict (the form that crosses KFP and lands in the store)."""
        d = asdict(replace(self, protocol=None))  # the record by its name, not copied field by field
        d["workload"] = self.workload.to_dict()
        d["search_space"] = {p.pop("name"): _compact(p) for p in d["search_space"]}
        d["max_steps"] = {str(b): s for b, s in self.max_steps.items()}
        d["protocol"] = self.protocol.name
        return json.loads(json.dumps(d))  # tuples -> lists: plain JSON types only

    def fingerprint(self) -> str:
        """Hash of what defines the trials' meaning; a study may grow but not change it.

        Batch sizes, trial count, parallelism and store location may differ between
        runs of one study (to extend it), and so may how trials are packed, how often
        they checkpoint and how a batch size added later starts its search (a recorded
        round keeps what it was planned with); anything else would mix incompatible trials.
        """
        return spec_fingerprint(self.to_dict())


def spec_fingerprint(spec_dict: dict) -> str:
    """``StudySpec.fingerprint`` of a spec in its ``to_dict`` form (as the store keeps it)."""
    d = json.loads(json.dumps(spec_dict))
    for key in ("batch_sizes", "trials_per_batch_size", "parallelism", "store", "pack_size",
                "checkpoint_seconds", "max_rounds", "max_trials_per_batch_size",
                "price_per_device_hour", "new_batch_sizes"):
        d.pop(key, None)
    d["max_steps"] = {}  # budgets may differ per batch size across extensions
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def _compact(p: dict) -> dict:
    """Drop unset fields so a parameter reads as it would be written in YAML."""
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in p.items()
            if v is not None and v is not False}


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


@dataclass(frozen=True)
class PackSpec:
    """Trials that one task trains together: only their ids travel (through KFP's loop
    items); the task re-derives each trial's metaparameters from the study spec
    (``batchscale.search.trials``), so a pack descriptor stays a few bytes.

    A pack holds trials of one batch size (``batch_size``, ``trial_ids``), or of several:
    a *mixed* pack (``more``: the other batch sizes and their trial ids, each batch size
    once, none equal to ``batch_size``), whose trials share one padded vmapped step
    where the study's measurement says that pays (``batchscale.rounds.mixing``). A pack
    of one batch size serialises exactly as before mixed packs existed, so compiled
    pipelines and stores stay compatible."""

    pack_id: str
    batch_size: int
    trial_ids: tuple[int, ...]
    more: tuple[tuple[int, tuple[int, ...]], ...] = ()

    def __post_init__(self):
        sizes = self.batch_sizes
        if len(set(sizes)) != len(sizes):
            raise ValueError(f"pack {self.pack_id}: batch sizes {list(sizes)} repeat; each "
                             "batch size may appear once in a pack")

    @property
    def parts(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """(batch size, trial ids) of each batch size the pack holds, the first first."""
        return ((self.batch_size, self.trial_ids), *self.more)

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        return tuple(b for b, _ in self.parts)

    @property
    def mixed(self) -> bool:
        """True when the pack holds trials of more than one batch size."""
        return bool(self.more)

    @property
    def size(self) -> int:
        """How many trials the pack holds, over its batch sizes."""
        return sum(len(ids) for _, ids in self.parts)

    def to_dict(self) -> dict:
        out = {"pack_id": self.pack_id, "batch_size": self.batch_size,
               "trial_ids": list(self.trial_ids)}
        if self.more:
            out["more"] = [{"batch_size": b, "trial_ids": list(ids)} for b, ids in self.more]
        return out

    @classmethod
    def from_dict(cls, raw: dict) -> PackSpec:
        more = tuple((int(part["batch_size"]), tuple(int(t) for t in part["trial_ids"]))
                     for part in raw.get("more") or ())
        return cls(str(raw["pack_id"]), int(raw["batch_size"]),
                   tuple(int(t) for t in raw["trial_ids"]), more)
