"""The deep check of a user's own workload, ``check_user_workload(spec)``, before anything
is written: their data files' content (``data_files.check_files``: every check data
preparation makes, nothing written), then their model function, imported once, built and
run on a tiny batch.

``parse_spec`` checks a model reference's and a data mapping's form only and imports no
Keras; this check runs where the spec is about to train or be checked on a machine that
holds the user's code: the CLI's ``validate``, ``plan`` and ``run --local``
(``cli.options.check_here``) and each pack task before it trains (components/train_pack;
a cluster's ``compile``, ``upload`` and ``submit`` never import the user's code). It runs
for a study of the user's model function or data files (a registry model on the
registry's data is known to work): a registry study imports nothing for it.

Each problem is one ``SpecError`` line. The data's are ``workload.dataset: ...``; the
model's ``workload.model: ...``: the module or file cannot be imported (a syntax error
names the file and line), lacks the function or it is not callable, the function raises
(its exception named), returns no keras.Model, the model raises on the batch, its output
has the wrong shape for the task (classification and multilabel (B, classes); regression
(B, k), k the targets' values per example; a language model (B, T, vocabulary)), a
classifier returns probabilities instead of logits, or the training loss at
initialisation is not finite. The model is built with the trial parameters at the middle
of the search space and, where the function's own parameters are searched, at both ends
of it too.
"""

from __future__ import annotations

import math

import numpy as np

from batchscale.core.errors import fail_field
from batchscale.core.names import is_model_function
from batchscale.core.spec import StudySpec

TINY_BATCH = 2  # examples the model is run on
LM_LENGTH = 8  # tokens per example for a language model
FIELD = "workload.model"


def needs_check(spec: StudySpec) -> bool:
    """Whether the spec names the user's model function or data files."""
    return is_model_function(spec.workload.model) or spec.workload.data is not None


def check_user_workload(spec: StudySpec, files: bool = True) -> None:
    """Refuse, with one line, a user's data files or model that cannot train (see the
    module docstring); a registry workload returns at once, importing nothing.
    ``files=False``: the model only (a pack task, whose data preparation checked the
    files and wrote the copy it trains on)."""
    if not needs_check(spec):
        return
    from batchscale.training.keras_setup import select_backend, training_scope
    from batchscale.workloads.dataset_registry import dataset_for, workload_task
    from batchscale.workloads.models.user_model import ModelFunctionError, load_model_function

    if files and spec.workload.data is not None:
        from batchscale.workloads.data_files import check_files

        check_files(spec.workload.data, workload_task(spec.workload))
    select_backend(spec.backend)  # before the user's module imports keras on its default
    reference = spec.workload.model
    if is_model_function(reference):
        try:
            load_model_function(reference)
        except ModelFunctionError as err:
            fail_field(FIELD, str(err))
    info = dataset_for(spec.workload)
    with training_scope(spec.backend, spec.workload.precision, 1, log=_quiet):
        for params in parameter_points(spec):
            _check_model(spec, info, params)


def parameter_points(spec: StudySpec) -> list[dict]:
    """The trial parameters the model is built with: the middle of every searched range
    (and the fixed values); where the search holds the function's own parameters, also
    every searched value at its lowest and at its highest."""
    from batchscale.workloads.models.user_model import model_parameters

    def point(u: float) -> dict:
        return {**spec.fixed, **{p.name: p.from_unit(u) for p in spec.search_space}}

    searched = model_parameters({p.name: 0 for p in spec.search_space})
    points = [point(0.5), *([point(0.0), point(1.0)] if searched else [])]
    distinct = {repr(model_parameters(p)): p for p in points}
    return list(distinct.values())


def _check_model(spec: StudySpec, info, params: dict) -> None:
    from batchscale.workloads.models import build_model
    from batchscale.workloads.models.user_model import (
        ModelFunctionError,
        exception_line,
        model_parameters,
    )

    reference, task = spec.workload.model, info.task
    own = model_parameters(params)
    called = f" (called with {own})" if own else ""
    try:
        model = build_model(reference, info.input_shape, info.num_classes, task=task,
                            parameters=params)
    except ModelFunctionError as err:
        fail_field(FIELD, f"{err}{called}")
    except Exception as err:  # noqa: BLE001  (the user's code: name what it raised)
        fail_field(FIELD, f"{reference} raised {exception_line(err)}{called}")
    x, targets = tiny_batch(task, info)
    try:
        outputs = np.asarray(model(x, training=False), dtype=np.float32)
    except Exception as err:  # noqa: BLE001
        fail_field(FIELD, f"the model raised {exception_line(err)} on a batch of shape "
                   f"{x.shape}{called}")
    expected = expected_shape(task, info, x)
    if outputs.shape != expected:
        fail_field(FIELD, f"the model's output has shape {outputs.shape} on a batch of shape "
                   f"{x.shape}; task {task} needs {expected} ({_SHAPE_WORDS[task]}){called}")
    if task == "classification" and info.num_classes > 1 and np.all(outputs >= 0) \
            and np.allclose(outputs.sum(axis=1), 1.0, atol=1e-4):
        fail_field(FIELD, "the model returns probabilities (each row sums to 1): return logits, "
                   "without a final softmax; the loss applies it")
    loss = initial_loss(task, outputs, targets)
    if not math.isfinite(loss):
        why = ("its outputs hold NaN or inf" if not np.all(np.isfinite(outputs))
               else "its outputs overflow the loss")
        fail_field(FIELD, f"the training loss at initialisation is {loss} on a batch of random "
                   f"inputs: {why}{called}")


_SHAPE_WORDS = {
    "classification": "batch, num_classes: one logit per class",
    "multilabel": "batch, num_classes: one logit per label",
    "regression": "batch, values per target: e.g. end with keras.layers.Dense(num_classes)",
    "language_model": "batch, time, vocabulary: next-token logits",
}


def tiny_batch(task: str, info) -> tuple[np.ndarray, np.ndarray]:
    """``TINY_BATCH`` random inputs of the data's shape (float32 in [0, 1); token ids for
    a language model, ``LM_LENGTH`` of them where the data's length varies) and targets
    of the task's form, seeded."""
    rng = np.random.default_rng(0)
    n, classes = TINY_BATCH, int(info.num_classes)
    if task == "language_model":  # the data's length where it has one (a user's .npz)
        length = info.input_shape[0] if info.input_shape and info.input_shape[0] else LM_LENGTH
        x = rng.integers(1, max(2, min(classes, 100)), size=(n, int(length))).astype(np.int32)
        return x, np.roll(x, -1, axis=1)
    shape = tuple(info.input_shape)
    x = rng.random((n, *shape), dtype=np.float32)
    if task == "classification":
        return x, rng.integers(0, classes, size=n)
    if task == "multilabel":
        return x, (rng.random((n, classes)) < 0.5).astype(np.float32)
    return x, rng.standard_normal((n, classes)).astype(np.float32)


def expected_shape(task: str, info, x: np.ndarray) -> tuple:
    if task == "language_model":
        return (*x.shape[:2], int(info.num_classes))
    return (x.shape[0], int(info.num_classes))


def initial_loss(task: str, outputs: np.ndarray, targets: np.ndarray) -> float:
    """The fit engine's training loss (``keras_setup.make_loss``) of ``outputs``."""
    from batchscale.training.keras_setup import make_loss
    from batchscale.training.task_losses import loss_targets

    if task == "classification":
        targets = loss_targets(task, targets, outputs.shape[1])
    return float(np.asarray(make_loss(task)(targets, outputs)))


def _quiet(*_) -> None:
    """A log that says nothing (the check's scope spreads no batch over devices)."""


def check_model_source(spec: StudySpec, store, record: bool = False) -> None:
    """Refuse, in one line, a user's model function whose source file changed since the
    study's first pack task trained with it (its sha256 in ``<study>/model_source.json``):
    a re-run would otherwise re-use trials of the old model and report them as the new
    one's. ``record``: write the record when the study has none yet (a pack task, about
    to train; the CLI only reads). ``store``: the study's StudyStore, or None (nothing
    stored yet). A registry model returns at once."""
    if not is_model_function(spec.workload.model):
        return
    from batchscale.workloads.models.user_model import model_source

    now = model_source(spec.workload.model)
    stored = store.read_model_source(spec.name) if store is not None else None
    if stored is None:
        if record and now["sha256"]:
            store.write_model_source(spec.name, now)
        return
    if stored.get("sha256") and now["sha256"] and stored["sha256"] != now["sha256"]:
        fail_field(FIELD, f"{now['file']} changed since study {spec.name} trained with it "
                   f"(sha256 {stored['sha256'][:12]}..., now {now['sha256'][:12]}...): its "
                   "finished trials are of the old model; restore the file, or study the new "
                   f"model under a new study name (the record: "
                   f"{store.url(spec.name + '/model_source.json')})")


def check_data_source(spec: StudySpec, store) -> None:
    """Refuse, in one line, a user's data file that changed since the study's store
    prepared it (``data_files.check_source_unchanged``, which data preparation also runs):
    here so the CLI says it before it starts anything (exit 2), not a task after it has.
    ``store``: the study's StudyStore, or None (nothing prepared yet)."""
    if spec.workload.data is None or store is None or not store.has_dataset(spec.workload.dataset):
        return
    from batchscale.workloads.data_files import check_source_unchanged
    from batchscale.workloads.dataset_registry import dataset_for

    check_source_unchanged(store, dataset_for(spec.workload))
