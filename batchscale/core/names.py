"""The names every layer agrees on: tasks and their metrics, optimizers, schedules and
their parameters, trial statuses, splits. Plain constants, no imports of the project.

Each name is defined here once; the layers above look their facts up here (the trainer's
schedules in ``batchscale.training.schedules``, the data sets' tasks in
``batchscale.workloads``, the analysis' statuses in ``batchscale.analysis``).
"""

from __future__ import annotations

# ---- tasks and metrics -------------------------------------------------------------
TASKS = ("classification", "multilabel", "language_model")
# What a trial of each task measures on each split; measurements.csv holds one column
# ``<split>/<metric>`` per metric (language models: per-token cross entropy).
TASK_METRICS = {
    "classification": ("classification_error", "cross_entropy_error"),
    "multilabel": ("average_precision", "cross_entropy_error"),
    "language_model": ("cross_entropy_error",),
}
# The metrics a goal may name, and the direction in which each one improves.
METRIC_DIRECTIONS = {
    "classification_error": "minimize",
    "cross_entropy_error": "minimize",
    "average_precision": "maximize",
}
# The values each metric can take, (lowest, highest), as batchscale.training.metrics
# computes them: error rates and average precision are fractions, cross entropy is a
# non-negative loss. A goal must lie inside (batchscale.core.goals.check_goal): a goal
# every value beats would be reached at step 0 by every trial.
METRIC_RANGES = {
    "classification_error": (0.0, 1.0),
    "cross_entropy_error": (0.0, float("inf")),
    "average_precision": (0.0, 1.0),
}

# ---- splits ------------------------------------------------------------------------
DATA_SPLITS = ("train", "validation", "test")  # what a prepared data set holds
METRIC_SPLITS = ("val", "train")  # the prefixes of measurement columns, validation first

# ---- optimizers and schedules (paper Section 2.2 and Appendix C) ---------------------
OPTIMIZERS = ("sgd", "momentum", "nesterov_momentum")
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


def effective_learning_rate(learning_rate, momentum=0.0):
    """η/(1−γ), the paper's effective learning rate (Section 2.2).

    Missing momentum (None or NaN) is plain SGD (γ = 0); γ >= 1 gives NaN. Takes numbers
    (returns a float) or equal-length arrays / pandas Series (returns a float array)."""
    import numpy as np

    lr = np.asarray(learning_rate, dtype=float)
    gamma = np.nan_to_num(np.asarray(np.nan if momentum is None else momentum, dtype=float), nan=0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(gamma < 1.0, lr / (1.0 - gamma), np.nan)
    return float(out) if out.ndim == 0 else out
