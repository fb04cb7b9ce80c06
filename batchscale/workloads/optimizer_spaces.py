"""A registry workload's default search space for another optimizer than its own.

Every workload's defaults (``workloads.defaults``) search the paper's Nesterov momentum:
learning rate on a log scale and momentum on a reverse-log scale. Run with another
optimizer (``--optimizer adamw``), a workload keeps the rest of its default space
(label smoothing, the decay of a schedule) and its fixed values, and searches that
optimizer's metaparameters instead, in the scales that suit them:

- learning rate: log, over two decades around the usual value of each optimizer: Adam
  and AdamW 1e-4 to 1e-2 (Kingma & Ba 2015's default 1e-3 in the middle); LAMB 1e-3 to
  1e-1 (its trust ratio makes the rate a step relative to each layer's norm; You et al.
  2020 train at 1e-3 to 1e-2 and more at large batches); Lion 1e-5 to 1e-3 (Chen et al.
  2023: a rate 3-10x smaller than AdamW's, since its sign update is larger);
- beta_1 and beta_2 on ``reverse_log`` (1 - beta on a log scale, dense near 1), epsilon
  and weight decay on ``log``: the scales in which Choi et al. 2019 ("On Empirical
  Comparisons of Optimizers for Deep Learning") and Nado et al. 2021 ("A Large Batch
  Optimizer Reality Check") tune 1 - beta_1, 1 - beta_2 and epsilon. The ranges are our
  judgement, each holding the optimizer's default (``core.names.OPTIMIZER_DEFAULTS``).

How many of them a workload searches follows its trial budget. A small study (fewer than
``FULL_SPACE_TRIALS`` trials per batch size: the quickstart-sized mnist_5k and digits
workloads, 4-6 trials) searches the learning rate and 1 - beta_1 only, the rest at their
defaults: two dimensions, like the momentum space it replaces (so an Adam and a Nesterov
study of one workload spend equal budgets on equal-sized spaces), and with 4-6 trials a
third or fourth dimension would leave each almost unsampled; the learning rate matters
most (Choi et al. 2019), and beta_1 plays momentum's role, which the paper found to
matter per batch size. A larger study searches every metaparameter its optimizer reads.

``--optimizer sgd`` keeps the workload's space without momentum (plain SGD reads only
the learning rate); ``momentum`` and ``nesterov_momentum`` keep it whole.
"""

from __future__ import annotations

from batchscale.core.names import ALL_OPTIMIZER_PARAMETERS, OPTIMIZER_PARAMETERS

FULL_SPACE_TRIALS = 20  # trials per batch size from which every metaparameter is searched
LEARNING_RATES = {
    "adam": (1e-4, 1e-2),
    "adamw": (1e-4, 1e-2),
    "lamb": (1e-3, 1e-1),
    "lion": (1e-5, 1e-3),
}
RANGES = {  # each holds the optimizer's default
    "beta_1": {"scale": "reverse_log", "min": 0.8, "max": 0.99},
    "beta_2": {"scale": "reverse_log", "min": 0.95, "max": 0.9999},
    "epsilon": {"scale": "log", "min": 1e-10, "max": 1e-4},
    "weight_decay": {"scale": "log", "min": 1e-4, "max": 0.1},
}
LION_WEIGHT_DECAY = {"scale": "log", "min": 1e-3, "max": 1.0}  # 3-10x AdamW's (Chen et al.)
SMALL_SPACE = ("beta_1",)  # besides the learning rate, below FULL_SPACE_TRIALS


def optimizer_space(space: dict, own: str, optimizer: str, trials: int) -> dict:
    """The default ``space`` (written for the workload's ``own`` optimizer, a study of
    ``trials`` per batch size) for ``optimizer``: unchanged for its own optimizer or one
    reading the same metaparameters; otherwise without the metaparameters ``optimizer``
    does not read, and for the Adam family with its learning-rate range and searched
    metaparameters (module doc)."""
    if optimizer == own or set(OPTIMIZER_PARAMETERS[optimizer]) == set(OPTIMIZER_PARAMETERS[own]):
        return space
    out = {name: cfg for name, cfg in space.items()
           if name not in ALL_OPTIMIZER_PARAMETERS or name in OPTIMIZER_PARAMETERS[optimizer]}
    if optimizer not in LEARNING_RATES:  # sgd, or a momentum optimizer from another's space
        return out
    low, high = LEARNING_RATES[optimizer]
    out["learning_rate"] = {"scale": "log", "min": low, "max": high}
    searched = OPTIMIZER_PARAMETERS[optimizer] if trials >= FULL_SPACE_TRIALS else SMALL_SPACE
    for name in searched:
        if name in OPTIMIZER_PARAMETERS[optimizer]:
            out[name] = dict(LION_WEIGHT_DECAY if (optimizer, name) == ("lion", "weight_decay")
                             else RANGES[name])
    return out


def optimizer_fixed(fixed: dict, optimizer: str) -> dict:
    """A workload's fixed values without the optimizer metaparameters ``optimizer`` does
    not read."""
    return {name: value for name, value in fixed.items()
            if name not in ALL_OPTIMIZER_PARAMETERS or name in OPTIMIZER_PARAMETERS[optimizer]}


def dropped_parameters(space: dict, optimizer: str) -> list[str]:
    """The parameters of ``space`` that ``optimizer`` does not read (what a switch to it
    drops), in the space's order."""
    return [name for name in space
            if name in ALL_OPTIMIZER_PARAMETERS and name not in OPTIMIZER_PARAMETERS[optimizer]]
