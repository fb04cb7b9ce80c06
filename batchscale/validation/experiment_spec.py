"""Validation of a raw experiment (YAML, the KFP parameter, the store) into an ExperimentSpec.

An experiment is written as::

    experiment: figure4_local          # its name: its folder in the store
    store: ./batchscale-store
    description: ...                    # optional, shown on the comparison's page
    base: {workload: ..., batch_sizes: ...}   # a study spec (no name, no store), or a
                                        # shipped study's name (``quickstart``)
    axis: {optimizer: [sgd, momentum, nesterov_momentum]}
    # or {model: [...]}, {data_size: [500, 1000, 2000, 4000]}, {classes: [2, 5, 10]},
    #    {fixed: {label_smoothing: [0.0, 0.1]}}, {goal: ["classification_error<0.1", ...]}
    overrides: {sgd: {search_space: ...}}   # optional: fields of one study's spec
    normalize_at: 8                     # optional: the overlay's reference batch size
    robustness_k: 3                     # optional: the k-th best trial's curve
    parallelism: 2                      # optional: pack tasks at once over all studies

Each study is derived from the base *resolved* (every workload default filled in, so a
study differs from the base in the axis's field and nothing else) and goes through
``parse_spec``, the one door to a StudySpec: a value the workload cannot take is refused
in one line naming the axis, the value and why. ``core.experiment`` says what each axis
varies.
"""

from __future__ import annotations

import copy
import re

from batchscale.core.experiment import (
    AXES,
    CLASSES_OPTION,
    COMPARISON_FOLDER,
    DEFAULT_ROBUSTNESS_K,
    TRAIN_SIZE_OPTION,
    Axis,
    ExperimentSpec,
    ExperimentStudy,
)
from batchscale.core.names import OPTIMIZER_PARAMETERS
from batchscale.core.spec import (
    MAX_PARALLELISM,
    RESERVED_NAMES,
    STUDY_NAME,
    SpecError,
    StudySpec,
    as_integer_in,
)
from batchscale.core.spec import fail_field as _fail
from batchscale.validation.study_spec import parse_spec, with_train_size
from batchscale.workloads.optimizer_spaces import optimizer_fixed, optimizer_space

_KEYS = ("experiment", "store", "description", "base", "axis", "overrides", "normalize_at",
         "robustness_k", "parallelism")
_REQUIRED = ("experiment", "store", "base", "axis")
_NAME_RULE = ("use letters, digits, '.', '_' or '-' (starting with a letter or digit, at most 100, "
              f"not {', '.join(RESERVED_NAMES)})")
_AXIS_FORMS = ("{optimizer: [...]}, {model: [...]}, {data_size: [N, ...]}, {classes: [K, ...]}, "
               "{fixed: {PARAMETER: [...]}} or {goal: [GOAL, ...]}")
MAX_STUDIES = 20  # studies in one experiment: far past any figure of the paper
_PLACEHOLDER = "experiment-base"  # the base's name while it is parsed alone


def is_experiment(raw) -> bool:
    """Whether a raw spec is an experiment (it names one) rather than a study."""
    return isinstance(raw, dict) and "experiment" in raw


def parse_experiment(raw: dict, store_root: str = "") -> ExperimentSpec:
    """The one door from a raw experiment to an ExperimentSpec; ``store_root``, when given,
    overrides its store (the Kubeflow UI's run parameter). The first problem raises a
    one-line SpecError naming the field."""
    if not isinstance(raw, dict):
        _fail("experiment", "must be a mapping of experiment fields")
    unknown = sorted(map(str, set(raw) - set(_KEYS)))
    if unknown:
        _fail(unknown[0], f"unknown experiment field; allowed: {', '.join(_KEYS)}")
    for key in _REQUIRED:
        if raw.get(key) is None or (isinstance(raw[key], (str, list, dict)) and not raw[key]):
            _fail(key, "is required in an experiment")
    raw = copy.deepcopy(raw)
    if store_root:
        raw["store"] = store_root
    name = raw["experiment"]
    if not isinstance(name, str) or not STUDY_NAME.match(name) or name in RESERVED_NAMES:
        _fail("experiment", f"{name!r} is not allowed as an experiment's name; {_NAME_RULE}")
    description = raw.get("description", "")
    if not isinstance(description, str):
        _fail("description", f"must be text, got {type(description).__name__}")
    base = _base_spec(raw["base"], name, raw["store"])
    axis = _parse_axis(raw["axis"])
    folder = f"{base.store.rstrip('/')}/{name}"
    studies = _derive_studies(base, axis, raw.get("overrides") or {}, folder)
    normalize_at = _parse_normalize_at(raw.get("normalize_at"), studies)
    k = as_integer_in("robustness_k", raw.get("robustness_k", DEFAULT_ROBUSTNESS_K), 1, 1000)
    parallelism = as_integer_in("parallelism", raw.get("parallelism", max(
        s.spec.parallelism for s in studies)), 1, MAX_PARALLELISM)
    return ExperimentSpec(name, base.store, axis, studies, raw, normalize_at, k, description,
                          parallelism)


def _base_spec(raw, name: str, store) -> StudySpec:
    """The base study, parsed alone (its errors name ``base.FIELD``): a mapping, or a
    shipped study's name. Its own name and store give way to the experiment's."""
    if isinstance(raw, str):
        from batchscale.validation.spec_files import default_spec_dict, shipped_studies

        if raw not in shipped_studies():
            _fail("base", f"{raw!r} is not a shipped study; allowed: a study spec mapping or one "
                  f"of {', '.join(shipped_studies())}")
        raw = default_spec_dict(raw)
    if not isinstance(raw, dict):
        _fail("base", f"must be a study spec mapping (or a shipped study's name), got {raw!r}")
    base = {**raw, "name": _PLACEHOLDER, "store": store}
    try:
        return parse_spec(base)
    except SpecError as err:
        raise SpecError(f"base.{err}") from None


def _parse_axis(raw) -> Axis:
    if not isinstance(raw, dict) or len(raw) != 1:
        _fail("axis", f"must be a mapping of one kind to its values, got {raw!r}; allowed: {_AXIS_FORMS}")
    (kind, values), = raw.items()
    if kind not in AXES:
        _fail("axis", f"unknown kind {kind!r}; allowed: {', '.join(AXES)} ({_AXIS_FORMS})")
    parameter = ""
    if kind == "fixed":
        if not isinstance(values, dict) or len(values) != 1:
            _fail("axis.fixed", f"must map one metaparameter to its values, e.g. "
                  f"{{label_smoothing: [0.0, 0.1]}}, got {values!r}")
        (parameter, values), = values.items()
    where = f"axis.{kind}" + (f".{parameter}" if parameter else "")
    if not isinstance(values, list) or len(values) < 2:
        _fail(where, f"must be a list of at least two values to compare, got {values!r}; allowed: "
              f"2 to {MAX_STUDIES} values")
    if len(values) > MAX_STUDIES:
        _fail(where, f"{len(values)} values; allowed: at most {MAX_STUDIES}")
    if kind in ("data_size", "classes"):
        # each study's parse_spec checks a value against its data set (its classes, its
        # training split); these are only the bounds of a sensible value
        lowest, highest = (2, 100_000) if kind == "classes" else (1, 10**9)
        values = [as_integer_in(where, v, lowest, highest) for v in values]
    elif kind in ("optimizer", "model", "goal"):
        bad = [v for v in values if not isinstance(v, str) or not v]
        if bad:
            _fail(where, f"{bad[0]!r} is not a name; allowed: a list of {kind} names")
    if len({str(v) for v in values}) != len(values):
        _fail(where, "lists a value twice; allowed: each value once")
    return Axis(kind, tuple(values), str(parameter))


def _label(axis: Axis, value) -> str:
    """A study's name for an axis value: the optimizer or model itself, ``train_1000``,
    ``classes_5``, ``label_smoothing_0.1``; anything outside the name rule becomes ``_``."""
    text = {"data_size": f"train_{value}", "classes": f"classes_{value}",
            "fixed": f"{axis.parameter}_{value:g}" if isinstance(value, (int, float))
            and not isinstance(value, bool) else f"{axis.parameter}_{value}"}.get(axis.kind, str(value))
    text = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_.-")[:100]
    return text or "study"


def _derive_studies(base: StudySpec, axis: Axis, overrides, folder: str) -> tuple[ExperimentStudy, ...]:
    resolved = base.to_dict()
    if axis.kind == "goal":
        label = "goals"
        studies = [(label, None, {**resolved, "goals": list(axis.values)})]
    else:
        studies = [(_label(axis, v), v, _with_value(resolved, base, axis, v)) for v in axis.values]
    labels = [label for label, _, _ in studies]
    if COMPARISON_FOLDER in labels:
        _fail(f"axis.{axis.kind}", f"a value gives the study name {COMPARISON_FOLDER!r}, the folder "
              "of the experiment's comparison; give another value")
    if len(set(labels)) != len(labels):
        _fail(f"axis.{axis.kind}", f"values give the same study name twice ({', '.join(labels)}); "
              "give values that differ in letters, digits, '.', '_' or '-'")
    if not isinstance(overrides, dict):
        _fail("overrides", f"must map a study's name to fields of its spec, got {overrides!r}")
    for key in overrides:
        if key not in labels:
            _fail(f"overrides.{key}", f"names no study of this experiment; its studies: {', '.join(labels)}")
    out = []
    for label, value, raw in studies:
        raw = _merged(raw, overrides.get(label) or {}, label)
        raw.update(name=label, store=folder)
        try:
            spec = parse_spec(raw)
        except SpecError as err:
            what = "the goals" if value is None else f"{axis.label} {value!r}"
            raise SpecError(f"axis: {what} (study {label}): {err}") from None
        _check_axis_kept(axis, value, spec, label)
        out.append(ExperimentStudy(label, value, spec))
    return tuple(out)


def _check_axis_kept(axis: Axis, value, spec: StudySpec, label: str) -> None:
    """A study's overrides may change anything but the axis's own field: a study labelled
    ``sgd`` that trains adam would compare something else than it says."""
    got = {"optimizer": spec.workload.optimizer, "model": spec.workload.model,
           "data_size": spec.workload.options.get(TRAIN_SIZE_OPTION),
           "classes": spec.workload.options.get(CLASSES_OPTION),
           "fixed": spec.fixed.get(axis.parameter)}.get(axis.kind, value)
    if value is not None and got != value:
        _fail(f"overrides.{label}", f"changes the axis's own field ({axis.label}: {got}, not "
              f"{value}); allowed: overrides of the other fields")


def _with_value(resolved: dict, base: StudySpec, axis: Axis, value) -> dict:
    """The resolved base with the axis's field set to ``value``."""
    raw = copy.deepcopy(resolved)
    workload = raw["workload"]
    if axis.kind == "optimizer":
        workload["optimizer"] = value
        if value not in OPTIMIZER_PARAMETERS:  # parse_spec names what is allowed
            return raw
        raw["search_space"] = optimizer_space(raw["search_space"], base.workload.optimizer, value,
                                              base.trials_per_batch_size)
        raw["fixed"] = optimizer_fixed(raw.get("fixed") or {}, value)
    elif axis.kind == "model":
        workload["model"] = value
    elif axis.kind == "data_size":  # batch sizes and the training subset past it dropped
        raw = with_train_size(raw, value)
    elif axis.kind == "classes":
        workload["options"] = {**workload.get("options", {}), CLASSES_OPTION: value}
    elif axis.kind == "fixed":
        raw["fixed"] = {**(raw.get("fixed") or {}), axis.parameter: value}
        raw["search_space"] = {k: v for k, v in raw["search_space"].items() if k != axis.parameter}
    return raw


def _merged(raw: dict, override: dict, label: str) -> dict:
    """``raw`` with one study's overrides: top-level fields replaced, ``workload`` merged
    key by key (so ``{workload: {optimizer: sgd}}`` keeps the data set and model)."""
    if not isinstance(override, dict):
        _fail(f"overrides.{label}", f"must be a mapping of study fields, got {override!r}")
    for key in ("name", "store"):
        if key in override:
            _fail(f"overrides.{label}.{key}", "is the experiment's to set; leave it out")
    out = dict(raw)
    for key, value in override.items():
        if key == "workload" and isinstance(value, dict):
            out["workload"] = {**raw["workload"], **value}
        else:
            out[key] = value
    return out


def _parse_normalize_at(raw, studies) -> int | None:
    """The overlay's reference batch size: given, it must be one every study measures;
    default: the smallest batch size they all measure (None when they share none)."""
    shared = set.intersection(*(set(s.spec.batch_sizes) for s in studies))
    if raw is None:
        return min(shared) if shared else None
    size = as_integer_in("normalize_at", raw, 1, 10**9)
    if size not in shared:
        _fail("normalize_at", f"batch size {size} is not measured by every study; allowed: "
              f"{', '.join(map(str, sorted(shared))) or 'none (the studies share no batch size)'}")
    return size
