"""Workload defaults: what a study of (data set, model) uses when its spec leaves it out.

A study spec may name only ``workload: {dataset, model}`` and its batch sizes; the
goal, optimizer, schedule, search space, fixed metaparameters, step budgets and trial
count then come from here. Goals are the paper's Figure 1 goals. Search spaces follow
the paper where it publishes them (ResNet-50 on ImageNet: Anchors, the released
study.json) and are otherwise our judgement, in the paper's shape: learning rate on a
log scale, momentum on a reverse-log scale, linear decay over a fraction of the budget.

Step budgets depend on the batch size: ``max_steps(B) = clamp(ceil(epochs * N / B),
min_steps, max_steps)`` with N the training examples, so small batches get the many
steps they need and large batches are not given thousands of wasted epochs.
``accelerators`` names the placement presets a workload is meant for (``cpu`` for the
toy-size ones); they are advice shown by ``batchscale workloads``.

``pack_capacity`` is how many trials of the workload's model one accelerator trains
together (one pack, vmapped in one jitted step): many for the MNIST-family models, whose
steps leave an accelerator mostly idle; one for ImageNet, Open Images and the language
models, whose single trial fills a device (and is spread data-parallel over several).
The placement preset may cap it (``batchscale.pipelines.placement.pack_size_for``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from batchscale.core.goals import Goal
from batchscale.core.names import ADAM_FAMILY, is_model_function
from batchscale.core.presets import A100, CPU_POOL, H100, L4, V5E_2X2, V5E_2X4
from batchscale.workloads.optimizer_spaces import optimizer_space

_LR_MOMENTUM = {
    "learning_rate": {"scale": "log", "min": 1e-3, "max": 1.0},
    "momentum": {"scale": "reverse_log", "min": 0.8, "max": 0.995},
}
_LINEAR_DECAY = {
    "end_learning_rate_factor": {"scale": "log", "min": 1e-3, "max": 0.1},
    "decay_fraction": {"scale": "linear", "min": 0.5, "max": 1.0},
}
_OFFLINE_SPACE = {  # the quickstart's: small offline data sets, a few trials
    "learning_rate": {"scale": "log", "min": 0.003, "max": 0.3},
    "momentum": {"scale": "reverse_log", "min": 0.8, "max": 0.97},
}
_LM_SPACE = {
    "learning_rate": {"scale": "log", "min": 1e-3, "max": 1.0},
    "momentum": {"scale": "reverse_log", "min": 0.8, "max": 0.9999},
}


@dataclass(frozen=True)
class WorkloadDefaults:
    dataset: str
    model: str
    goal: dict
    search_space: dict
    epochs: float
    min_steps: int
    max_steps: int
    optimizer: str = "nesterov_momentum"
    schedule: str = "constant"
    fixed: dict = field(default_factory=dict)
    trials: int = 100
    batch_sizes: tuple[int, ...] = ()
    accelerators: tuple[str, ...] = (CPU_POOL.name,)
    note: str = ""
    paper_dataset: str = ""  # the data set's name in the paper's database, where it differs
    pack_capacity: int = 1  # trials of this model one accelerator trains together

    @property
    def key(self) -> str:
        return f"{self.dataset}/{self.model}"

    def budget(self, batch_size: int, train_examples: int) -> int:
        steps = math.ceil(self.epochs * train_examples / batch_size)
        return int(min(self.max_steps, max(self.min_steps, steps)))


def _pow2(lo: int, hi: int) -> tuple[int, ...]:
    return tuple(2 ** k for k in range(lo, hi + 1))


_GPU = (L4.name, A100.name, H100.name)
_BIG = (A100.name, H100.name, V5E_2X2.name, V5E_2X4.name)
_CLASSIFY = "classification_error"

WORKLOADS = [
    WorkloadDefaults(
        "mnist_5k", "fc_128_128", {"metric": _CLASSIFY, "value": 0.08},
        _OFFLINE_SPACE,
        epochs=20, min_steps=800, max_steps=5000, trials=6, batch_sizes=_pow2(3, 9),
        pack_capacity=64, note="the quickstart: offline MNIST subset, seconds per trial on a CPU"),
    WorkloadDefaults(
        "mnist_5k", "resnet_8", {"metric": _CLASSIFY, "value": 0.1},
        _OFFLINE_SPACE,
        epochs=10, min_steps=300, max_steps=3000, trials=4, batch_sizes=_pow2(4, 8),
        pack_capacity=16, note="toy-size ResNet-8 on offline MNIST: a convolutional study on one CPU"),
    WorkloadDefaults(
        "digits", "fc_128_128", {"metric": _CLASSIFY, "value": 0.1},
        _OFFLINE_SPACE,
        epochs=20, min_steps=200, max_steps=3000, trials=4, batch_sizes=_pow2(2, 7),
        pack_capacity=64, note="the fastest real-data study (8x8 digits); used by the tests"),
    WorkloadDefaults(
        "mnist", "simple_cnn_base", {"metric": _CLASSIFY, "value": 0.01},
        {**_LR_MOMENTUM, "label_smoothing": {"scale": "discrete", "values": [0.0, 0.01, 0.1]}},
        epochs=40, min_steps=500, max_steps=200_000, batch_sizes=_pow2(1, 14),
        accelerators=(CPU_POOL.name, L4.name), pack_capacity=32),
    WorkloadDefaults(
        "fashion_mnist", "simple_cnn_base", {"metric": _CLASSIFY, "value": 0.1},
        {**_LR_MOMENTUM, "label_smoothing": {"scale": "discrete", "values": [0.0, 0.01, 0.1]}},
        epochs=40, min_steps=500, max_steps=200_000, batch_sizes=_pow2(1, 15),
        accelerators=(CPU_POOL.name, L4.name), pack_capacity=32),
    WorkloadDefaults(
        "fashion_mnist", "fc_128_128", {"metric": _CLASSIFY, "value": 0.14},
        _OFFLINE_SPACE,
        epochs=10, min_steps=500, max_steps=10_000, trials=6, batch_sizes=_pow2(6, 12),
        pack_capacity=64,
        note="real Fashion-MNIST (Debian's IDX files, no download) on a CPU in minutes"),
    WorkloadDefaults(
        "cifar_10", "resnet_8", {"metric": _CLASSIFY, "value": 0.3},
        {**_LR_MOMENTUM, **_LINEAR_DECAY}, schedule="linear",
        epochs=100, min_steps=1000, max_steps=300_000, batch_sizes=_pow2(1, 14),
        accelerators=_GPU, pack_capacity=16),
    WorkloadDefaults(
        "imagenet", "resnet_50", {"metric": _CLASSIFY, "value": 0.25},
        {"learning_rate": {"scale": "log", "min": 1e-4, "max": 10.0},
         "momentum": {"scale": "reverse_log", "min": 0.9, "max": 0.9999},
         "end_learning_rate_factor": {"scale": "log", "min": 1e-4, "max": 0.1},
         "decay_fraction": {"scale": "linear", "min": 0.5, "max": 1.0},
         "label_smoothing": {"scale": "discrete", "values": [0.0, 0.01, 0.1]}},
        schedule="linear", epochs=90, min_steps=5000, max_steps=600_000,
        batch_sizes=_pow2(6, 16), accelerators=_BIG,
        note="search space of the paper's released study at batch 256 (decay over 50-100% of "
             "the budget, as 300k-600k of 600k steps there)"),
    WorkloadDefaults(
        "imagenet", "vgg_11", {"metric": _CLASSIFY, "value": 0.35},
        {"learning_rate": {"scale": "log", "min": 1e-4, "max": 1.0},
         "momentum": {"scale": "reverse_log", "min": 0.9, "max": 0.9999},
         **_LINEAR_DECAY},
        schedule="linear", epochs=90, min_steps=5000, max_steps=600_000,
        batch_sizes=_pow2(6, 14), accelerators=_BIG),
    WorkloadDefaults(
        "open_images", "resnet_50", {"metric": "average_precision", "value": 0.31,
                                     "direction": "maximize"},
        {"learning_rate": {"scale": "log", "min": 1e-4, "max": 10.0},
         "momentum": {"scale": "reverse_log", "min": 0.9, "max": 0.9999},
         **_LINEAR_DECAY},
        schedule="linear", epochs=30, min_steps=5000, max_steps=600_000,
        batch_sizes=_pow2(8, 16), accelerators=_BIG),
    WorkloadDefaults(
        "lm1b", "transformer_base", {"metric": "cross_entropy_error", "value": 3.9},
        _LM_SPACE, epochs=4, min_steps=2000, max_steps=500_000, batch_sizes=_pow2(4, 16),
        accelerators=_BIG),
    WorkloadDefaults(
        "lm1b", "lstm", {"metric": "cross_entropy_error", "value": 3.9},
        _LM_SPACE, epochs=4, min_steps=2000, max_steps=500_000, trials=50,
        batch_sizes=_pow2(4, 14), accelerators=_BIG),
    WorkloadDefaults(
        "c4", "transformer_base", {"metric": "cross_entropy_error", "value": 3.9},
        _LM_SPACE, epochs=1, min_steps=2000, max_steps=500_000, trials=50,
        batch_sizes=_pow2(4, 16), accelerators=_BIG,
        note="C4 (English) stands in for the paper's Common Crawl, which is not public",
        paper_dataset="common_crawl"),
]
_BY_KEY = {w.key: w for w in WORKLOADS}


def workload_defaults(dataset: str, model: str) -> WorkloadDefaults | None:
    """The defaults of (dataset, model); the model family's base size also matches its
    variants (simple_cnn_wide, transformer_shallow ...) for everything but the note."""
    if f"{dataset}/{model}" in _BY_KEY:
        return _BY_KEY[f"{dataset}/{model}"]
    for prefix, base in (("simple_cnn_", "simple_cnn_base"), ("transformer_", "transformer_base"),
                         ("fc_", "fc_128_128")):
        if model.startswith(prefix) and f"{dataset}/{base}" in _BY_KEY:
            return _BY_KEY[f"{dataset}/{base}"]
    return None


# ---- a user's own workload ------------------------------------------------------------
# A study of the user's model function or data files has no entry above: its defaults
# follow from the optimizer and the training split's size (docs/your-workload.md). No goal:
# a goal's value cannot be guessed, so such a spec names its goals.
USER_OPTIMIZER = "nesterov_momentum"  # the paper's, where the spec names none
USER_TRIALS = 6  # trials per batch size: the quickstart's, enough for a first scaling curve
USER_EPOCHS = 20
USER_MIN_STEPS = 200
USER_MAX_STEPS = 20_000
# Trials of a user's model one accelerator trains together (and, on a CPU, one pack task
# trains one after another, paying imports and data loading once): a guess, as their size
# is unknown; a spec whose model fills an accelerator sets ``pack_size: 1``.
USER_PACK_CAPACITY = 8
USER_SMALLEST_BATCH = 8
USER_LARGEST_SHARE = 8  # the largest default batch size: at most 1/8 of the training split
_USER_SPACES = {  # the paper's shape; the Adam family's from optimizer_spaces
    "paper": {"learning_rate": {"scale": "log", "min": 1e-3, "max": 0.3},
              "momentum": {"scale": "reverse_log", "min": 0.8, "max": 0.97}},
    "sgd": {"learning_rate": {"scale": "log", "min": 1e-3, "max": 1.0}},
}


def user_batch_sizes(train_examples: int) -> tuple[int, ...]:
    """Powers of two from ``USER_SMALLEST_BATCH`` up to the largest one at most
    1/``USER_LARGEST_SHARE`` of the training examples (one smaller size for tiny data)."""
    top = max(1, int(train_examples) // USER_LARGEST_SHARE)
    high = top.bit_length() - 1  # the largest power of two <= top
    low = min(USER_SMALLEST_BATCH.bit_length() - 1, high)
    return _pow2(low, high)


def user_workload_defaults(dataset: str, model: str, optimizer: str,
                           train_examples: int) -> WorkloadDefaults:
    """The defaults of a user's own workload (their model function or data files):
    ``USER_TRIALS`` trials per batch size, ``user_batch_sizes``, budgets of
    ``USER_EPOCHS`` epochs clamped to [``USER_MIN_STEPS``, ``USER_MAX_STEPS``], a learning
    rate (and, for momentum, momentum; for the Adam family its own learning-rate range and
    1 - beta_1, ``optimizer_spaces``) search space, a constant schedule, and no goal."""
    if optimizer in ADAM_FAMILY:  # its learning rate and 1 - beta_1, as a registry workload's
        space = optimizer_space(_USER_SPACES["paper"], USER_OPTIMIZER, optimizer, USER_TRIALS)
    else:
        space = _USER_SPACES["sgd" if optimizer == "sgd" else "paper"]
    return WorkloadDefaults(
        dataset, model, {}, space, epochs=USER_EPOCHS, min_steps=USER_MIN_STEPS,
        max_steps=USER_MAX_STEPS, optimizer=optimizer or USER_OPTIMIZER, trials=USER_TRIALS,
        batch_sizes=user_batch_sizes(train_examples),
        note="your own workload: defaults from the optimizer and the data's size")


# Trials per accelerator of a model family, for a (data set, model) without defaults (a
# custom spec): the families' sizes, not the data set's, decide (the rule of thumb behind
# the table above). Anything else (ResNet-50, VGG, transformers, LSTM): one.
_FAMILY_PACK_CAPACITY = (("fc_", 64), ("simple_cnn_", 32), ("resnet_8", 16))


def pack_capacity(dataset: str, model: str) -> int:
    """How many trials of ``model`` on ``dataset`` one accelerator trains together: the
    workload's ``pack_capacity``, else the model family's rule of thumb (a user's model
    function: ``USER_PACK_CAPACITY``), else 1."""
    defaults = workload_defaults(dataset, model)
    if defaults is not None:
        return defaults.pack_capacity
    if is_model_function(model):
        return USER_PACK_CAPACITY
    return next((n for prefix, n in _FAMILY_PACK_CAPACITY if model.startswith(prefix)), 1)


def default_goal(dataset: str, model: str) -> Goal | None:
    """The registry's goal for (dataset, model), also under the paper's database names
    (``common_crawl`` for our ``c4``): the paper's Figure 1 goals for its workloads, which
    is what the analysis uses for the paper's released data when no goal is given."""
    defaults = workload_defaults(dataset, model) or next(
        (w for w in WORKLOADS if w.paper_dataset == dataset and w.model == model), None)
    return Goal(**defaults.goal) if defaults else None


def paper_workloads() -> list[str]:
    """``dataset/model`` names, as the paper's database spells them, that have a default goal."""
    return [f"{w.paper_dataset or w.dataset}/{w.model}" for w in WORKLOADS]
