"""The names every layer agrees on: tasks and their metrics, optimizers, schedules and
their parameters, trial statuses, splits. Plain constants, no imports of the project.

Each name is defined here once; the layers above look their facts up here (the trainer's
schedules in ``batchscale.training.schedules``, the data sets' tasks in
``batchscale.workloads``, the analysis' statuses in ``batchscale.analysis``).
"""

from __future__ import annotations

# ---- tasks and metrics -------------------------------------------------------------
TASKS = ("classification", "multilabel", "regression", "language_model")
# What a trial of each task measures on each split; measurements.csv holds one column
# ``<split>/<metric>`` per metric (language models: per-token cross entropy).
TASK_METRICS = {
    "classification": ("classification_error", "cross_entropy_error"),
    "multilabel": ("average_precision", "cross_entropy_error"),
    "regression": ("mean_squared_error", "mean_absolute_error"),
    "language_model": ("cross_entropy_error",),
}
# The training-loss metric of each task: what a trial's divergence is judged on (its
# ``train/`` column must stay finite and below ``divergence_factor`` x its step-0 value),
# and the default goal's metric where the task has no better one.
TASK_LOSS_METRIC = {
    "classification": "cross_entropy_error",
    "multilabel": "cross_entropy_error",
    "regression": "mean_squared_error",
    "language_model": "cross_entropy_error",
}
# The metric a default goal names, per task (a user's own data brings no goal value).
TASK_GOAL_METRIC = {
    "classification": "classification_error",
    "multilabel": "average_precision",
    "regression": "mean_squared_error",
    "language_model": "cross_entropy_error",
}
# The metrics a goal may name, and the direction in which each one improves.
METRIC_DIRECTIONS = {
    "classification_error": "minimize",
    "cross_entropy_error": "minimize",
    "average_precision": "maximize",
    "mean_squared_error": "minimize",
    "mean_absolute_error": "minimize",
}
# The values each metric can take, (lowest, highest), as batchscale.training.metrics
# computes them: error rates and average precision are fractions, cross entropy is a
# non-negative loss. A goal must lie inside (batchscale.core.goals.check_goal): a goal
# every value beats would be reached at step 0 by every trial.
METRIC_RANGES = {
    "classification_error": (0.0, 1.0),
    "cross_entropy_error": (0.0, float("inf")),
    "average_precision": (0.0, 1.0),
    "mean_squared_error": (0.0, float("inf")),
    "mean_absolute_error": (0.0, float("inf")),
}

# ---- splits ------------------------------------------------------------------------
DATA_SPLITS = ("train", "validation", "test")  # what a prepared data set holds
METRIC_SPLITS = ("val", "train")  # the prefixes of measurement columns, validation first

# ---- user workloads -------------------------------------------------------------------
# ``workload.dataset`` as files: ``{path, format[, label, validation_fraction]}``.
DATA_FORMATS = ("npz", "parquet", "csv", "images")
# ``workload.model`` as the user's code: a function returning an uncompiled Keras model.
MODEL_FUNCTION_SYNTAX = "'module:function' or 'path/to/file.py:function'"


def is_model_function(model: str) -> bool:
    """Whether a model name refers to user code (``module:function``, ``file.py:function``)
    rather than a registry model (``fc_128_128``); registry names never hold a colon."""
    return isinstance(model, str) and ":" in model


def model_folder(model: str) -> str:
    """A model's folder name in a study (``<dataset>/<model>/<optimizer>``): a registry
    model's name; a user's function as ``<module or file stem>.<function>`` in letters,
    digits, ``.``, ``_`` and ``-`` (``pkg.nets:build`` -> ``pkg.nets.build``,
    ``models/cnn.py:build`` -> ``cnn.build``)."""
    import re

    if not is_model_function(model):
        return model
    where, _, function = model.rpartition(":")
    stem = where.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    stem = stem[:-3] if stem.endswith(".py") else stem
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{stem}.{function}").strip(".") or "model"


# ---- optimizers and schedules (paper Section 2.2 and Appendix C) ---------------------
# The paper's three (TensorFlow MomentumOptimizer rules) and the Adam family.
PAPER_OPTIMIZERS = ("sgd", "momentum", "nesterov_momentum")
ADAM_FAMILY = ("adam", "adamw", "lamb", "lion")
OPTIMIZERS = (*PAPER_OPTIMIZERS, *ADAM_FAMILY)
# The metaparameters each optimizer reads besides learning_rate (and the trainer's
# label_smoothing and l2_penalty). The paper's momentum is required; the Adam family's
# take the defaults below when a spec neither searches nor fixes them.
OPTIMIZER_PARAMETERS: dict[str, tuple[str, ...]] = {
    "sgd": (),
    "momentum": ("momentum",),
    "nesterov_momentum": ("momentum",),
    "adam": ("beta_1", "beta_2", "epsilon"),
    "adamw": ("beta_1", "beta_2", "epsilon", "weight_decay"),
    "lamb": ("beta_1", "beta_2", "epsilon", "weight_decay"),
    "lion": ("beta_1", "beta_2", "weight_decay"),
}
# Defaults of the Adam family's metaparameters, with their sources: Adam's and AdamW's
# betas and epsilon are Kingma & Ba 2015's (Keras' epsilon is 1e-7; we keep the paper's
# 1e-8, which the update adds to sqrt(v) as Keras and TensorFlow do: their "epsilon hat");
# AdamW's decoupled weight decay 0.01 is PyTorch's torch.optim.AdamW default (Keras' is
# 0.004; Loshchilov & Hutter 2019 tune it); LAMB's are You et al. 2020's (epsilon 1e-6,
# weight decay 0.01, BERT's); Lion's betas are Chen et al. 2023's (0.9, 0.99), its weight
# decay 0.1 our choice after their advice of 3-10x AdamW's (0.01) for a 3-10x smaller
# learning rate, so that the decay per step, eta * wd, stays alike.
OPTIMIZER_DEFAULTS: dict[str, dict[str, float]] = {
    "adam": {"beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-8},
    "adamw": {"beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-8, "weight_decay": 0.01},
    "lamb": {"beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-6, "weight_decay": 0.01},
    "lion": {"beta_1": 0.9, "beta_2": 0.99, "weight_decay": 0.1},
}
# Every metaparameter some optimizer reads (the trainer stacks them per trial in a pack).
ALL_OPTIMIZER_PARAMETERS = ("momentum", "beta_1", "beta_2", "epsilon", "weight_decay")
# How each optimizer's "effective learning rate" is defined (the analysis' x axis for the
# learning-rate figures): the paper's eta/(1-gamma) for momentum (Section 2.2: the step a
# constant gradient settles to), eta itself for plain SGD and the Adam family (whose first
# moment is an average, (1 - beta_1) sum beta_1^k g, not a sum: it does not scale the step).
EFFECTIVE_LEARNING_RATE = {
    "sgd": "η",
    "momentum": "η/(1−γ)",
    "nesterov_momentum": "η/(1−γ)",
    "adam": "η",
    "adamw": "η",
    "lamb": "η",
    "lion": "η",
}
# The metaparameter that averages past gradients, the second axis of the analysis'
# learning-rate figures, with its symbol: the paper's momentum gamma; the Adam family's
# beta_1 (Lion's beta_1 mixes the gradient into its sign update, its beta_2 averages);
# plain SGD has none. A paper database's other optimizer names read as momentum.
MOMENTUM_PARAMETERS = {
    "sgd": None,
    "momentum": ("momentum", "γ"),
    "nesterov_momentum": ("momentum", "γ"),
    "adam": ("beta_1", "β₁"),
    "adamw": ("beta_1", "β₁"),
    "lamb": ("beta_1", "β₁"),
    "lion": ("beta_1", "β₁"),
}
SCHEDULES = (
    "constant",
    "linear",
    "cosine",
    "exponential_polynomial",
    "inverse_exponential_polynomial",
    "exponential",
    "piecewise_linear",
)
_DECAY = ("end_learning_rate_factor", "decay_steps")
# The metaparameters each schedule needs, besides learning_rate.
SCHEDULE_PARAMETERS: dict[str, tuple[str, ...]] = {
    "constant": (),
    "linear": _DECAY,
    "cosine": _DECAY,
    "exponential_polynomial": (*_DECAY, "power"),
    "inverse_exponential_polynomial": (*_DECAY, "power"),
    "exponential": _DECAY,
    "piecewise_linear": (*_DECAY, "decay_events"),
}
# Metaparameters each schedule may take but does not need (default: no warm-up).
SCHEDULE_OPTIONAL_PARAMETERS: dict[str, tuple[str, ...]] = dict.fromkeys(SCHEDULES, ("warmup_steps",))
# Every metaparameter some schedule reads (learning_rate included).
ALL_SCHEDULE_PARAMETERS = ("learning_rate", *_DECAY, "power", "decay_events", "warmup_steps")

# ---- trials --------------------------------------------------------------------------
STATUSES = ("COMPLETE", "INCOMPLETE", "INFEASIBLE")  # the paper's database's trial statuses
DONE_STATUSES = ("COMPLETE", "INFEASIBLE")  # a re-run never trains these again
# Stopping protocols (the spec's ``protocol``) are records: batchscale.core.protocols.

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
BACKENDS = ("jax", "tensorflow")


def momentum_parameter(optimizer: str | None) -> tuple[str, str] | None:
    """(name, symbol) of ``optimizer``'s ``MOMENTUM_PARAMETERS``; momentum for a name
    outside ``OPTIMIZERS`` (the paper's database spells some its own way)."""
    return MOMENTUM_PARAMETERS.get(optimizer, MOMENTUM_PARAMETERS["momentum"])


def effective_learning_rate(learning_rate, momentum=0.0, optimizer: str | None = None):
    """The effective learning rate of ``optimizer`` (``EFFECTIVE_LEARNING_RATE``): η/(1−γ),
    the paper's (Section 2.2), for the momentum optimizers, any optimizer not named
    (None) and names outside ``OPTIMIZERS``; η for plain SGD and the Adam family.

    Missing momentum (None or NaN) is plain SGD (γ = 0); γ >= 1 gives NaN. Takes numbers
    (returns a float) or equal-length arrays / pandas Series (returns a float array)."""
    import numpy as np

    lr = np.asarray(learning_rate, dtype=float)
    if EFFECTIVE_LEARNING_RATE.get(optimizer) == "η":
        momentum = None
    gamma = np.nan_to_num(np.asarray(np.nan if momentum is None else momentum, dtype=float), nan=0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(gamma < 1.0, lr / (1.0 - gamma), np.nan)
    return float(out) if out.ndim == 0 else out
