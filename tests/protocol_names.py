"""Where source code still treats a stopping protocol as its name, read with ``ast``.

Used by tests/unit/test_protocols.py to keep every module but ``batchscale/core/protocols.py``
asking the protocol's record (``core.protocols``) instead of comparing its name. Flagged:

- a comparison (``==``, ``!=``, ``in``, ``not in``) with a protocol's name as one side (a
  string, or a tuple, list or set of strings holding one) and, on another side, code
  whose source mentions "protocol": ``spec.protocol == "race"``, ``protocol in ("goal",
  "race")``, ``"race" in protocol``, ``study_json["protocol"] != "full"``;
- a tuple, list or set literal of two or more strings, each a protocol's name, and a
  dict literal whose two or more keys are all protocol names: a table by name
  (``EARLY_STOPPING_PROTOCOLS = ("goal", "race")``).

The word "goal" alone is not a protocol: ``steps["goal"] == goal`` (a column) or
``"goal" in curves`` compare it with nothing that mentions a protocol, so they pass.
"""

from __future__ import annotations

import ast
from pathlib import Path

COMPARISONS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
SCANNED = ("batchscale", "components", "pipelines", "benchmarks")  # source, and benchmarks
OWNER = "batchscale/core/protocols.py"  # the one module that may spell protocols by name


def _strings(node: ast.AST) -> list[str] | None:
    """The string constants ``node`` is made of (a string, or a tuple/list/set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts \
            and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return [e.value for e in node.elts]
    return None


def _mentions_protocol(source: str, node: ast.AST) -> bool:
    return "protocol" in (ast.get_source_segment(source, node) or "").lower()


def offenders(source: str, names: set[str], filename: str = "<snippet>") -> list[str]:
    """'file:line: code' for each place in ``source`` that spells a protocol by name."""
    found = sorted((node.lineno, node.col_offset, ast.get_source_segment(source, node).splitlines())
                   for node in ast.walk(ast.parse(source, filename=filename))
                   if _is_offence(node, source, names))
    return [f"{filename}:{line}: {code[0]}{' ...' if len(code) > 1 else ''}"
            for line, _, code in found]


def _is_offence(node: ast.AST, source: str, names: set[str]) -> bool:
    if isinstance(node, ast.Compare) and any(isinstance(op, COMPARISONS) for op in node.ops):
        sides = [node.left, *node.comparators]
        named = [s for s in sides if set(_strings(s) or ()) & names]
        return bool(named) and any(_mentions_protocol(source, s) for s in sides if s not in named)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        strings = _strings(node)
        return strings is not None and len(strings) > 1 and set(strings) <= names
    if isinstance(node, ast.Dict):
        keys = [k.value if isinstance(k, ast.Constant) else None for k in node.keys]
        return len(keys) > 1 and all(isinstance(k, str) and k in names for k in keys)
    return False


def scan(repo: Path, names: set[str], folders: tuple[str, ...] = SCANNED) -> list[str]:
    """Every offence in the .py files under ``folders`` of ``repo``, but ``OWNER``'s."""
    found = []
    for folder in folders:
        for path in sorted((repo / folder).rglob("*.py")):
            relative = path.relative_to(repo).as_posix()
            if relative != OWNER:
                found += offenders(path.read_text(), names, relative)
    return found
