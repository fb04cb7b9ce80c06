"""A model from the user's code: ``workload.model: "module:function"`` or
``"path/to/file.py:function"`` (``core.names.is_model_function``).

The function takes the trial's parameters (a dict: the fixed and searched values that
are not optimizer or schedule settings, plus ``input_shape`` and ``num_classes``) and
returns an uncompiled Keras 3 model mapping inputs to logits (or, for regression, to
predictions). Nothing here imports the user's code or Keras until a model is built.
"""

from __future__ import annotations

import re

_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
_MODULE = re.compile(rf"^{_IDENTIFIER}(\.{_IDENTIFIER})*\Z")
_FUNCTION = re.compile(rf"^{_IDENTIFIER}\Z")


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
    """The reference's form only (importing it is ``validation.user_workload``'s job)."""
    split_reference(reference)
