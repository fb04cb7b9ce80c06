"""A model from the user's code: ``workload.model: "module:function"`` or
``"path/to/file.py:function"`` (``core.names.is_model_function``).

The function takes one dict, the trial's *model parameters* (``model_parameters``: the
fixed and searched values that are not trainer settings, i.e. not a name of
``core.spec.PARAMETER_BOUNDS``), plus ``input_shape`` (one example's shape, a tuple) and
``num_classes`` (classes; the number of target values per example for regression; the
vocabulary size for a language model), and returns an uncompiled Keras 3 model mapping
inputs to logits (regression: to predictions). The trainer adds loss, optimizer and
metrics.

A file path is imported with ``importlib.util.spec_from_file_location``, its folder on
``sys.path`` while it runs (so it may import modules beside it); a relative path is read
against the current directory. ``batchscale run --local`` makes it absolute
(``validation.workload_spec.absolute_paths``, with the store's path) before it hands the
spec to its kfp.local tasks, which run in another folder. A pod has only what its image
holds: a cluster study names a module installed there (``pipelines/cluster_workload.py``
refuses a file). A module reference is imported as Python finds it: installed, or on
``PYTHONPATH``.

Nothing here imports the user's code or Keras until a model is built; each reference is
imported once per process (``load_model_function``). Problems with the user's code are
``ModelFunctionError``s, each one line naming the file or module and what went wrong.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
import re
import sys

from batchscale.core.errors import InputError

_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
_MODULE = re.compile(rf"^{_IDENTIFIER}(\.{_IDENTIFIER})*\Z")
_FUNCTION = re.compile(rf"^{_IDENTIFIER}\Z")
# Keys the trainer adds to a model function's dict: a model parameter may not take them.
DATA_KEYS = ("input_shape", "num_classes")


class ModelFunctionError(InputError):
    """The user's model function cannot be used; the message is one line."""


def split_reference(reference: str) -> tuple[str, str]:
    """``(module or file path, function name)`` of a model reference; ValueError (one
    line) naming the allowed forms when it has neither."""
    from batchscale.core.names import MODEL_FUNCTION_SYNTAX

    where, _, function = reference.rpartition(":")
    if not where or not _FUNCTION.match(function):
        raise ValueError(f"{reference!r} does not name a function; allowed: {MODEL_FUNCTION_SYNTAX}")
    if not (where.endswith(".py") or _MODULE.match(where)):
        raise ValueError(f"{reference!r}: {where!r} is neither a module name nor a .py file; "
                         f"allowed: {MODEL_FUNCTION_SYNTAX}")
    return where, function


def check_model_reference(reference: str) -> None:
    """The reference's form only (importing it is ``training.workload_check``'s job)."""
    split_reference(reference)


def absolute_reference(reference: str, directory: str | None = None) -> str:
    """``reference`` with a relative file path made absolute against ``directory`` (default:
    the current one); a module reference as it is."""
    where, function = split_reference(reference)
    if not where.endswith(".py") or os.path.isabs(where):
        return reference
    path = os.path.abspath(os.path.join(directory or os.getcwd(), os.path.expanduser(where)))
    return f"{path}:{function}"


def model_parameters(parameters: dict) -> dict:
    """The values of ``parameters`` (a trial's) that are the model's, not the trainer's:
    every name that ``core.spec.PARAMETER_BOUNDS`` does not list (``decay_steps``, which
    the trainer derives from ``decay_fraction``, is one of its)."""
    from batchscale.core.spec import PARAMETER_BOUNDS

    return {k: v for k, v in sorted(parameters.items()) if k not in PARAMETER_BOUNDS}


@functools.cache
def load_model_function(reference: str):
    """The function ``reference`` names, imported once per process; a
    ModelFunctionError (one line) when the module or file cannot be imported, lacks the
    function, or names something that is not callable."""
    where, name = split_reference(reference)
    module = _import_file(where) if where.endswith(".py") else _import_module(where)
    if not hasattr(module, name):
        raise ModelFunctionError(f"{where} has no function {name!r}")
    function = getattr(module, name)
    if not callable(function):
        raise ModelFunctionError(f"{where}:{name} is not callable (it is a {type(function).__name__})")
    return function


def model_source(reference: str) -> dict:
    """What the model function's code is, for the study's record: the source file (the
    .py named, or the module's ``__file__``) and its sha256. Imports the function
    (``load_model_function``). The file holding the function is what is hashed: a helper
    module it imports is not (say so where this is documented)."""
    import inspect

    function = load_model_function(reference)
    path = inspect.getsourcefile(function) or getattr(sys.modules.get(function.__module__),
                                                       "__file__", None)
    if not path or not os.path.isfile(path):
        return {"reference": reference, "file": None, "sha256": None}
    with open(path, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    return {"reference": reference, "file": os.path.abspath(path), "sha256": digest}


def _import_module(name: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name and name.split(".")[:len(err.name.split("."))] == err.name.split("."):
            raise ModelFunctionError(f"module {name!r} is not importable: no module named "
                                     f"{err.name!r} (is it installed, or on PYTHONPATH?)") from None
        raise ModelFunctionError(f"importing {name} failed: {exception_line(err)}") from None
    except SyntaxError as err:
        raise ModelFunctionError(_syntax(err)) from None
    except Exception as err:  # noqa: BLE001  (the user's code: say what it raised, in one line)
        raise ModelFunctionError(f"importing {name} raised {exception_line(err)}") from None


def _import_file(path: str):
    from importlib.util import module_from_spec, spec_from_file_location

    if not os.path.isfile(path):
        what = "a folder, not a file" if os.path.isdir(path) else "no such file"
        raise ModelFunctionError(f"{path}: {what}")
    key = hashlib.sha256(os.path.abspath(path).encode()).hexdigest()[:12]
    module_name = f"batchscale_user_model_{key}"
    spec = spec_from_file_location(module_name, path)
    module = module_from_spec(spec)
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:
        del sys.modules[module_name]
        raise ModelFunctionError(_syntax(err)) from None
    except Exception as err:  # noqa: BLE001  (the user's code: say what it raised, in one line)
        del sys.modules[module_name]
        raise ModelFunctionError(f"importing {path} raised {exception_line(err)}") from None
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    return module


def _syntax(err: SyntaxError) -> str:
    return f"{err.filename}, line {err.lineno}: {type(err).__name__}: {err.msg}"


def exception_line(err: BaseException) -> str:
    """An exception as one line: its type and (the first 300 characters of) its message."""
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:300]}" if text else type(err).__name__


def build_user_model(reference: str, parameters: dict, input_shape, num_classes: int):
    """The keras.Model the user's function returns for a trial with ``parameters``
    (the model's share of them, ``model_parameters``, plus ``input_shape`` and
    ``num_classes``). What the function itself raises propagates; a return value that is
    not a keras.Model is a ModelFunctionError."""
    import keras

    function = load_model_function(reference)
    model = function({**model_parameters(parameters),
                      "input_shape": tuple(input_shape or ()), "num_classes": int(num_classes)})
    if not isinstance(model, keras.Model):
        raise ModelFunctionError(f"{reference} returned {type(model).__name__}, not a keras.Model "
                                 "(return e.g. keras.Sequential([...]) without compiling it)")
    return model
