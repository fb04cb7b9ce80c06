"""The workload part of a study spec: which data set, model and optimizer, and the
defaults a workload brings (``batchscale.workloads.defaults``) for fields a spec leaves
out. Split from ``spec_validation`` to keep each module small; same one-line refusals.
"""

from __future__ import annotations

import os
from dataclasses import replace

from batchscale.core.names import (
    METRIC_DIRECTIONS,
    OPTIMIZERS,
    TASK_GOAL_METRIC,
    TASK_METRICS,
    TASKS,
    is_model_function,
)
from batchscale.core.spec import PRECISIONS, Workload, as_number
from batchscale.core.spec import fail_field as _fail
from batchscale.validation.data_spec import parse_data_files
from batchscale.workloads import check_model_name, get_dataset
from batchscale.workloads.defaults import USER_OPTIMIZER, user_workload_defaults, workload_defaults
from batchscale.workloads.models.user_model import absolute_reference, check_model_reference
from batchscale.workloads.optimizer_spaces import optimizer_fixed, optimizer_space
from batchscale.workloads.subsets import CLASSES_OPTION, SUBSET_OPTIONS, TRAIN_SIZE_OPTION, train_examples

# Fields a workload's defaults can fill in.
DEFAULTABLE = ("batch_sizes", "trials_per_batch_size", "schedule", "search_space", "fixed", "goals",
               "max_steps")


_WORKLOAD_KEYS = ("dataset", "model", "optimizer", "precision", "options", "task")


def parse_workload(raw, seed: int = 0) -> Workload:
    """``workload``: a mapping {dataset, model, optimizer[, task, precision, options]}.

    ``dataset`` is a registry name or the user's files (``{path, format, ...}``,
    ``data_spec``); ``model`` a registry name or the user's function
    (``core.names.is_model_function``; a relative file path is read against the current
    directory, and ``absolute_paths`` makes it absolute for another process). Registry
    names are checked against the registries; the user's code and files are only checked
    for their form here (what they hold is checked by ``training.workload_check`` before
    anything is written). The optimizer defaults to the workload's (a user's own
    workload: the paper's, Nesterov momentum); ``seed`` (the study's) carves a user data
    set's validation split."""
    if not isinstance(raw, dict):
        _fail("workload", f"must be a mapping {{dataset, model, optimizer}} (optionally task, precision, "
              f"options), got {type(raw).__name__} {raw!r}; e.g. {{dataset: mnist_5k, model: fc_128_128}}")
    extra = sorted(map(str, set(raw) - set(_WORKLOAD_KEYS)))
    if extra:
        _fail(f"workload.{extra[0]}", f"unknown key; allowed: {', '.join(_WORKLOAD_KEYS)}")
    for key in ("dataset", "model"):
        if raw.get(key) is None:
            _fail(f"workload.{key}", "is required (`batchscale workloads` lists the workloads; "
                  "docs/your-workload.md shows your own)")
    files = None
    if isinstance(raw["dataset"], dict):
        files = parse_data_files(raw["dataset"], seed)
        task = _parse_task(raw.get("task", "classification"))
        dataset_name = files.name
    else:
        try:
            dataset = get_dataset(str(raw["dataset"]))
        except ValueError as err:
            _fail("workload.dataset", f"{err}; or your own files: {{path, format}}")
        task = _parse_task(raw.get("task", dataset.task))
        if task != dataset.task:
            _fail("workload.task", f"{task!r} does not match data set {dataset.name}, which is "
                  f"{dataset.task.replace('_', ' ')}; leave task out or give {dataset.task!r}")
        dataset_name = dataset.name
    model = str(raw["model"])
    if is_model_function(model):
        try:
            check_model_reference(model)
        except ValueError as err:
            _fail("workload.model", str(err))
    else:
        try:
            check_model_name(model, task)
        except ValueError as err:
            _fail("workload.model", f"{err} (data set {dataset_name} is {task.replace('_', ' ')})")
    defaults = None if files else workload_defaults(dataset_name, model)
    optimizer = raw.get("optimizer")
    if optimizer is None:  # absent or null: the workload's; a user's own, the paper's
        optimizer = (defaults.optimizer if defaults else
                     USER_OPTIMIZER if files or is_model_function(model) else None)
    if optimizer not in OPTIMIZERS:
        _fail("workload.optimizer",
              f"{'is required' if optimizer is None else 'unknown optimizer ' + repr(optimizer)}; "
              f"allowed: {', '.join(OPTIMIZERS)}")
    precision = raw.get("precision", "float32")
    if precision not in PRECISIONS:
        _fail("workload.precision", f"unknown precision {precision!r}; allowed: {', '.join(PRECISIONS)}")
    options = raw.get("options")
    options = {} if options is None else options
    accepted = [*({} if files else dataset.options)]
    if files or dataset.storage == "arrays":  # held in memory: subsets can be taken
        accepted += [TRAIN_SIZE_OPTION] + [CLASSES_OPTION] * (task == "classification")
    if not isinstance(options, dict):
        _fail("workload.options", f"must map option names to integers; {dataset_name} accepts "
              f"{', '.join(accepted) or 'none'}")
    for key, value in options.items():
        if key not in accepted:
            why = _why_not(key, files or dataset, task)
            _fail(f"workload.options.{key}", f"unknown option for {dataset_name}{why}; allowed: "
                  f"{', '.join(sorted(accepted)) or 'none'}")
        if as_number(f"workload.options.{key}", value, integer=True) < 1:
            _fail(f"workload.options.{key}", f"{value} must be a positive integer")
    options = {k: int(v) for k, v in sorted(options.items())}
    if not files:
        check_subsets(options, dataset)
    # task is kept only for files: a registry data set has its own (and its dict stays as before)
    return Workload(dataset_name, model, optimizer, precision, options,
                    task if files else "", files)


def _why_not(key: str, source, task: str) -> str:
    """Why a subset option is not taken here (empty for any other option)."""
    if key not in SUBSET_OPTIONS:
        return ""
    if getattr(source, "storage", "arrays") != "arrays":
        return " (it is streamed from shards; train_size and classes need an in-memory data set)"
    return f" (classes needs a classification data set; this one is {task.replace('_', ' ')})"


def check_subsets(options: dict, dataset) -> None:
    """``train_size`` and ``classes`` against the data set's facts (``dataset``: its
    ``DatasetInfo``, the registry's or that of the user's files): classes 2..num_classes,
    train_size 1..the training split. One line naming the option otherwise."""
    classes = options.get(CLASSES_OPTION)
    if classes is not None and not 2 <= classes <= dataset.num_classes:
        _fail(f"workload.options.{CLASSES_OPTION}", f"{classes}; allowed: 2..{dataset.num_classes} "
              f"(the first K of the {dataset.num_classes} classes of {dataset.name})")
    size, split = options.get(TRAIN_SIZE_OPTION), dataset.split_sizes["train"]
    if size is not None and size > split:
        _fail(f"workload.options.{TRAIN_SIZE_OPTION}", f"{size} exceeds the {split} training "
              f"examples of {dataset.name}; allowed: 1..{split}")


def absolute_paths(workload: Workload, directory: str | None = None) -> Workload:
    """``workload`` with a relative model file (``path/to/file.py:function``) and a relative
    local data path made absolute against ``directory`` (default: the current one), for a
    spec handed to processes that run elsewhere: the kfp.local tasks of ``run --local``
    run in its work folder. A module reference and a gs:// URL stay as they are; the data
    set's store name follows its path (``DataFiles.name``)."""
    model = absolute_reference(workload.model, directory) if is_model_function(workload.model) \
        else workload.model
    files = workload.data
    if files is not None and "://" not in files.path and not os.path.isabs(files.path):
        path = os.path.join(directory or os.getcwd(), os.path.expanduser(files.path))
        files = replace(files, path=os.path.abspath(path))
    return replace(workload, model=model, data=files,
                   dataset=files.name if files is not None else workload.dataset)


def _parse_task(task) -> str:
    if task not in TASKS:
        _fail("workload.task", f"unknown task {task!r}; allowed: {', '.join(TASKS)}")
    return task


def with_defaults(raw: dict, workload: Workload, dataset) -> dict:
    """``raw`` with the workload's defaults filled in where the spec leaves fields out: the
    registry's for its (data set, model), else (the user's model function or data files)
    ``user_workload_defaults``, which bring no goal (``_user_goal_required``). Run with
    another optimizer than its own, a registry workload's default search space and fixed
    values are those for that optimizer (``workloads.optimizer_spaces``)."""
    defaults = workload_defaults(workload.dataset, workload.model)
    missing = [key for key in DEFAULTABLE if raw.get(key) is None]  # absent; [] is an error
    if not missing:
        return raw
    train = train_examples(dataset, workload.options)
    if defaults is None and (workload.data is not None or is_model_function(workload.model)):
        if "goals" in missing:
            _user_goal_required(dataset.task)
        defaults = user_workload_defaults(workload.dataset, workload.model, workload.optimizer, train)
    if defaults is None:
        for key in ("batch_sizes", "search_space", "goals", "max_steps"):
            if key in missing:
                _fail(key, f"is required (no workload defaults for {workload.dataset}/{workload.model}; "
                      "`batchscale workloads` lists the workloads that have them)")
        return raw
    filled = dict(raw)
    sizes = raw.get("batch_sizes")
    if not isinstance(sizes, (list, tuple)):  # absent, or not a list (parse_spec refuses that)
        sizes = [b for b in defaults.batch_sizes if b <= train] or [train]
    values = {  # batch sizes past a train_size's examples are left out (none: N itself)
        "batch_sizes": [b for b in defaults.batch_sizes if b <= train] or [train],
        "trials_per_batch_size": defaults.trials,
        "schedule": defaults.schedule,
        "search_space": optimizer_space(defaults.search_space, defaults.optimizer,
                                        workload.optimizer, defaults.trials),
        "fixed": optimizer_fixed(defaults.fixed, workload.optimizer),
        "goals": [defaults.goal],
        "max_steps": {int(b): defaults.budget(int(b), train) for b in sizes
                      if isinstance(b, (int, float)) and b >= 1},
    }
    if "schedule" in missing and raw.get("search_space"):
        values["schedule"] = "constant"  # a hand-written search space keeps the plain default
    for key in missing:
        filled[key] = values[key]
    return filled


def _user_goal_required(task: str) -> None:
    """A user's own workload names its goals: the value a study should reach cannot be
    guessed. One line naming the task's goal metric and what else it measures."""
    metric, goal_direction = TASK_GOAL_METRIC[task], METRIC_DIRECTIONS[TASK_GOAL_METRIC[task]]
    example = f"{metric}{'<' if goal_direction == 'minimize' else '>'}{_EXAMPLE_GOALS[metric]}"
    _fail("goals", f"is required for your own model or data (a goal's value cannot be guessed); "
          f"e.g. {example} (task {task} measures {', '.join(TASK_METRICS[task])})")


# A value for the example in that line (only an example: the data decides what is good).
_EXAMPLE_GOALS = {"classification_error": 0.1, "average_precision": 0.5, "mean_squared_error": 0.1,
                  "cross_entropy_error": 4.0}
