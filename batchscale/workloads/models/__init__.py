"""Models of the paper's Appendix B, named as in its released database.

Names: ``fc_<N1>_..._<Nk>`` (FC-N1-...-Nk), ``simple_cnn_base/narrow/wide``,
``resnet_8``, ``resnet_50``, ``vgg_11`` (image models: classification and multilabel)
and ``transformer_base/shallow/narrow_and_shallow/wide``, ``lstm`` (language models).

This module is a registry of plain names: checking a name costs nothing, and Keras
(and with it JAX or TensorFlow) is imported only when ``build_model`` imports the
builder module of the requested family (dense, resnet, vgg, transformer, lstm).

Every model maps its inputs to LOGITS in float32, also under a mixed-precision global
dtype policy (the output layer computes in float32): softmax or sigmoid live in the
trainer's loss. Image models take float32 images (H, W, C) and return (batch,
num_outputs); multilabel uses the same network as classification. Language models take
int32 token ids (batch, time), time variable, padding id 0 at the end of sentences,
and return causal next-token logits (batch, time, vocab).
"""

from __future__ import annotations

import importlib
import re

from batchscale.core.names import MODEL_FUNCTION_SYNTAX, TASKS, is_model_function
from batchscale.workloads.models.user_model import build_user_model

_IMAGE_TASKS = ("classification", "multilabel")
_LM_TASKS = ("language_model",)

# name -> (builder module, tasks); fc_* is matched by a pattern instead.
_MODELS = {
    "simple_cnn_base": ("dense", _IMAGE_TASKS),
    "simple_cnn_narrow": ("dense", _IMAGE_TASKS),
    "simple_cnn_wide": ("dense", _IMAGE_TASKS),
    "resnet_8": ("resnet", _IMAGE_TASKS),
    "resnet_50": ("resnet", _IMAGE_TASKS),
    "vgg_11": ("vgg", _IMAGE_TASKS),
    "transformer_base": ("transformer", _LM_TASKS),
    "transformer_shallow": ("transformer", _LM_TASKS),
    "transformer_narrow_and_shallow": ("transformer", _LM_TASKS),
    "transformer_wide": ("transformer", _LM_TASKS),
    "lstm": ("lstm", _LM_TASKS),
}
_GHOST_BATCH_NORM = frozenset({"resnet_50"})  # builders that take ghost_batch_size
_FC = re.compile(r"^fc(_[1-9][0-9]{0,5})+$")
_FC_FAMILY = "fc_<N1>_..._<Nk> (fully connected, e.g. fc_128_128)"
MODEL_FAMILIES = (_FC_FAMILY, *_MODELS)
_OWN_MODEL = f"name your own model function, {MODEL_FUNCTION_SYNTAX}"


def _entry(name: str):
    if isinstance(name, str) and _FC.match(name):
        return "dense", _IMAGE_TASKS
    return _MODELS.get(name)


def _families(task: str | None) -> tuple[str, ...]:
    return tuple(f for f in MODEL_FAMILIES
                 if task is None or task in (_IMAGE_TASKS if f == _FC_FAMILY else _MODELS[f][1]))


def model_tasks(name: str) -> tuple[str, ...]:
    """The tasks model ``name`` serves (ValueError for an unknown name)."""
    check_model_name(name)
    return _entry(name)[1]


def check_model_name(name: str, task: str | None = None) -> None:
    """Raise ValueError naming the allowed models (for ``task`` if given) unless valid."""
    if task is not None and task not in TASKS:
        raise ValueError(f"unknown task {task!r}; allowed: {', '.join(TASKS)}")
    entry = _entry(name)
    allowed = ", ".join(_families(task)) or f"none of the registry's; {_OWN_MODEL}"
    if entry is None:
        scope = "" if task is None else f" for task {task!r}"
        raise ValueError(f"unknown model {name!r}{scope}; allowed: {allowed}")
    if task is not None and task not in entry[1]:
        raise ValueError(f"model {name!r} does not serve task {task!r} (it serves "
                         f"{', '.join(entry[1])}); allowed for {task}: {allowed}")


def _input_shape(name: str, input_shape, task: str) -> tuple:
    if task == "language_model":
        shape = (None,) if input_shape is None or tuple(input_shape) == () else tuple(input_shape)
        if len(shape) != 1:
            raise ValueError(f"{name}: a language model takes token ids of shape (time,), "
                             f"got input_shape {input_shape!r}")
        return shape
    shape = tuple(input_shape or ())
    if len(shape) != 3 and not (name.startswith("fc_") and shape):
        raise ValueError(f"{name}: expected an image shape (height, width, channels), got {shape!r}")
    return shape


def build_model(name: str, input_shape, num_outputs: int, task: str = "classification",
                ghost_batch_size: int = 32, parameters: dict | None = None):
    """A keras.Model mapping inputs to float32 logits (see the module docstring).

    ``input_shape``: (H, W, C) for image models (any shape for fc_*); for language
    models (time,) with time usually None, or None. ``num_outputs``: classes, or the
    vocabulary size of a language model (regression: target values per example).
    ``ghost_batch_size``: examples per ghost batch of ghost batch normalisation
    (resnet_50 only). ``parameters``: the trial's; a user's model function
    (``core.names.is_model_function``) gets its model parameters (``user_model``), a
    registry model takes none.
    """
    if is_model_function(name):
        return build_user_model(name, parameters or {}, input_shape, num_outputs)
    check_model_name(name, task)
    if int(num_outputs) != num_outputs or num_outputs < 1:
        raise ValueError(f"num_outputs must be a positive integer, got {num_outputs!r}")
    module = importlib.import_module(f"{__name__}.{_entry(name)[0]}")
    options = {"ghost_batch_size": ghost_batch_size} if name in _GHOST_BATCH_NORM else {}
    return module.build(name, _input_shape(name, input_shape, task), int(num_outputs), **options)


__all__ = ["MODEL_FAMILIES", "TASKS", "build_model", "check_model_name",
           "model_tasks"]
