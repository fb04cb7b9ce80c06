"""The project's import graph, read from the source with ``ast`` (nothing is imported).

Used by tests/unit/test_layers.py to keep the layers of ``batchscale`` (and the rooms
inside some of them, ``ROOMS``) acyclic and downward-only. Every import counts, also those
inside functions (a lazy import is still a dependency). ``from package import name``
counts as importing the submodule when ``package.name`` is a module of the tree, else the
package itself. Importing a submodule is not counted as importing its parent packages'
``__init__`` (as import-linter does).
"""

from __future__ import annotations

import ast
from pathlib import Path

# Layer of each top-level part of the namespace: a module may import its own part and
# parts of a strictly lower layer, nothing else (peers stay independent of each other).
LAYERS = {
    "batchscale.core": 0,
    "batchscale.studies": 0,
    "batchscale.experiments": 0,
    "batchscale.store": 1,
    "batchscale.search": 1,
    "batchscale.workloads": 2,
    "batchscale.validation": 3,
    "batchscale.training": 4,
    "batchscale.analysis": 4,
    "batchscale.rounds": 4,
    "batchscale.planning": 5,  # probes (training) and the step-time rule (analysis)
    "batchscale.kube": 5,  # a multi-host pack's TrainJob: the light task (components) launches it
    "batchscale.components": 6,
    "batchscale.pipelines": 7,
    "batchscale.cli": 8,
}
# Rooms inside one part, in the order its work flows: a module in a room may import its own
# room and the rooms before it; a module of the part outside every room (its public API,
# e.g. batchscale.analysis.report) sits above all of them. Peers of other parts see only
# the part's layer above.
ROOMS = {
    "batchscale.analysis": ("reading", "statistics", "figures", "pages"),
}
# Source folders and the package each installs as (pyproject.toml's package-dir).
SOURCE_ROOTS = {"batchscale": "batchscale", "components": "batchscale.components",
                "pipelines": "batchscale.pipelines"}


def modules(repo: Path, roots: dict[str, str] = SOURCE_ROOTS) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under the source roots."""
    found = {}
    for folder, package in roots.items():
        for path in sorted((repo / folder).rglob("*.py")):
            parts = path.relative_to(repo / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


def imports(path: Path, module: str, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``module`` (source at ``path``) imports."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                child = f"{base}.{alias.name}"
                out.add(child if child in known else base)
    return {name for name in out if name in known}


def graph(repo: Path, roots: dict[str, str] = SOURCE_ROOTS) -> dict[str, set[str]]:
    found = modules(repo, roots)
    known = set(found)
    return {name: imports(path, name, known) - {name} for name, path in found.items()}


def layer_of(module: str, layers: dict[str, int] = LAYERS) -> str | None:
    """The longest part of ``layers`` that ``module`` belongs to (None: the root package)."""
    best = None
    for part in layers:
        if (module == part or module.startswith(part + ".")) and (best is None or len(part) > len(best)):
            best = part
    return best


def room_of(module: str, part: str, rooms: dict[str, tuple[str, ...]] = ROOMS) -> tuple[int, str]:
    """(position, name) of ``module``'s room inside ``part``; outside every room of the
    part (or in a part without rooms): after the last room, named "top"."""
    order = rooms.get(part, ())
    rest = module[len(part) + 1:].split(".")[0] if module != part else ""
    return (order.index(rest), rest) if rest in order else (len(order), "top")


def layer_violations(edges: dict[str, set[str]], layers: dict[str, int] = LAYERS,
                     rooms: dict[str, tuple[str, ...]] = ROOMS) -> list[str]:
    """One line per import that goes up a layer, sideways into a peer part, or up to a
    later room of its own part."""
    found = []
    for source, targets in sorted(edges.items()):
        mine = layer_of(source, layers)
        for target in sorted(targets):
            theirs = layer_of(target, layers)
            if mine is None or theirs is None:
                problem = None if mine is None else f"{target} is the root package, above every layer"
            elif mine == theirs:
                (here, name), (there, other) = room_of(source, mine, rooms), room_of(target, mine, rooms)
                problem = None if there <= here else (
                    f"up inside {mine}: room {name} ({here}) -> room {other} ({there})")
            elif layers[theirs] < layers[mine]:
                problem = None
            else:
                kind = "up" if layers[theirs] > layers[mine] else "sideways"
                problem = f"{kind}: {mine} (layer {layers[mine]}) -> {theirs} (layer {layers[theirs]})"
            if problem:
                found.append(f"{source} imports {target}: {problem}")
    return found


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan), as sorted lists."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(out)
