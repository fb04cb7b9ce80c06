"""The experiment spec: several studies that differ in one thing, compared.

A study answers "how do steps to result fall with batch size for this workload"; the
paper's findings are comparisons of such curves (§4.2-4.6). An experiment is a *base*
study and one *axis*, the thing varied, with the values to compare:

- ``optimizer``: the workload's optimizer (Figure 4: sgd, momentum, nesterov_momentum);
- ``model``: the model, e.g. width and depth variants (Figure 3: fc_128 ... fc_512_512);
- ``data_size``: the training examples, nested random subsets of one data set with the
  same validation set (Figure 6a; the workload option ``train_size``);
- ``classes``: a class subset, the first k classes (Figure 6b; option ``classes``);
- ``fixed``: one fixed metaparameter (Figure 7: label smoothing), taken out of the search;
- ``goal``: a ladder of goals (Figure 2). The trials are the same whatever the goal, so a
  goal axis is *one* study with every goal of the ladder, compared goal by goal.

Each value is one study, a valid study in its own folder of the experiment's folder
(``<store>/<experiment>/<study>``): ``batchscale report`` reads it alone, and the
experiment's folder is the store root of its studies, so data sets they share are
prepared once (``<store>/<experiment>/datasets``). ``batchscale.validation.parse_experiment``
is the one door in; it derives every study from the base through ``parse_spec``.
No TensorFlow, Keras or kfp import here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from batchscale.core.spec import StudySpec

AXES = ("optimizer", "model", "data_size", "classes", "fixed", "goal")
# What each axis varies, in words (the console, the comparison's pages, the docs).
AXIS_WORDS = {
    "optimizer": "the optimizer",
    "model": "the model",
    "data_size": "the number of training examples (nested random subsets, one validation set)",
    "classes": "the classes (the first k classes of the data set)",
    "fixed": "a fixed metaparameter",
    "goal": "the goal",
}
# The workload options the data axes set (``batchscale.workloads.subsets`` applies them).
TRAIN_SIZE_OPTION = "train_size"
CLASSES_OPTION = "classes"
COMPARISON_FOLDER = "comparison"  # <experiment>/comparison/: the comparison's pages, no study's
DEFAULT_ROBUSTNESS_K = 3  # the k-th best trial's curve is drawn beside the best one


@dataclass(frozen=True)
class Axis:
    """The one thing an experiment varies: ``kind`` (one of ``AXES``), the ``values`` to
    compare, in the order given, and for ``fixed`` the metaparameter's name."""

    kind: str
    values: tuple
    parameter: str = ""

    @property
    def label(self) -> str:
        """``optimizer``, ``data_size``, ``fixed label_smoothing`` ..."""
        return f"{self.kind} {self.parameter}" if self.parameter else self.kind

    def to_dict(self) -> dict:
        """The spec's form: ``{optimizer: [...]}``, ``{fixed: {label_smoothing: [...]}}``."""
        values = list(self.values)
        return {self.kind: {self.parameter: values} if self.parameter else values}


@dataclass(frozen=True)
class ExperimentStudy:
    """One study of an experiment: its ``label`` (its name, and its curve's name in the
    comparison), the axis ``value`` it stands for (None for a goal ladder's one study)
    and its validated spec."""

    label: str
    value: object
    spec: StudySpec


@dataclass(frozen=True)
class ExperimentSpec:
    """A validated experiment. ``raw`` is the experiment as given (base, axis, options),
    the form that crosses KFP: each task re-derives the studies from it, as a study's
    tasks re-derive its trials from the study spec. ``store``: the store root given;
    ``folder``: the experiment's folder there, the store root of its studies.
    ``normalize_at``: the batch size the overlay is normalised at (the paper's
    Figures 3-6; the smallest batch size every study measured when not given).
    ``robustness_k``: the k-th best trial whose curve is drawn beside the best one."""

    name: str
    store: str
    axis: Axis
    studies: tuple[ExperimentStudy, ...]
    raw: dict
    normalize_at: int | None = None
    robustness_k: int = DEFAULT_ROBUSTNESS_K
    description: str = ""
    parallelism: int = 2

    @property
    def folder(self) -> str:
        return f"{self.store.rstrip('/')}/{self.name}"

    @property
    def specs(self) -> tuple[StudySpec, ...]:
        return tuple(s.spec for s in self.studies)

    def study(self, label: str) -> StudySpec:
        """The spec of the study named ``label`` (KeyError naming the labels otherwise)."""
        for study in self.studies:
            if study.label == label:
                return study.spec
        raise KeyError(f"experiment {self.name} has no study {label!r}; its studies: "
                       f"{', '.join(s.label for s in self.studies)}")

    def locations(self) -> list[str]:
        """Each study's folder, in the axis's order (what ``report`` and ``compare`` read)."""
        return [f"{self.folder}/{s.label}" for s in self.studies]

    @property
    def max_rounds(self) -> int:
        """The most search rounds any of its studies may run (the pipeline's rounds)."""
        return max(s.max_rounds for s in self.specs)

    @property
    def trials(self) -> int:
        """Trials of round 1 over every study."""
        return sum(len(s.spec.batch_sizes) * s.spec.trials_per_batch_size for s in self.studies)

    def to_dict(self) -> dict:
        """The plain JSON form (KFP parameter, ``experiment.json`` in the store)."""
        return json.loads(json.dumps(self.raw))
