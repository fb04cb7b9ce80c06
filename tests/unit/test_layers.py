"""The layers of the batchscale namespace: no import cycle, no upward or sideways import,
one definition per shared name, and no generic top-level import name.

The graph is read from the source (tests/import_graph.py), so the test is fast and sees
lazy imports inside functions too. The checker itself is tested on a small tree with a
deliberate cycle, a deliberate upward import and an import up the rooms of a part
(batchscale.analysis: reading < statistics < figures < pages < its public API), so a broken
checker cannot pass silently.
"""

from __future__ import annotations

import ast
from pathlib import Path

from batchscale.core import names
from tests.import_graph import LAYERS, ROOMS, SOURCE_ROOTS, cycles, graph, layer_violations, modules

REPO = Path(__file__).resolve().parents[2]


def test_no_import_cycle():
    found = cycles(graph(REPO))
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_every_import_goes_down_the_layers():
    found = layer_violations(graph(REPO))
    assert not found, "\n".join(found)


def test_every_module_belongs_to_a_layer():
    unplaced = [m for m in modules(REPO) if m != "batchscale" and not any(
        m == part or m.startswith(part + ".") for part in LAYERS)]
    assert not unplaced, f"modules outside every layer of tests/import_graph.py: {unplaced}"


def test_core_imports_nothing_of_the_project_but_core():
    edges = graph(REPO)
    outside = {f"{m} -> {t}" for m, targets in edges.items() if m.startswith("batchscale.core")
               for t in targets if not t.startswith("batchscale.core")}
    assert not outside


def test_no_module_imports_the_folders_by_their_generic_names():
    """components/ and pipelines/ install as batchscale.components / batchscale.pipelines;
    an ``import components`` would work in the repository and fail once installed."""
    offenders = []
    for folder in (*SOURCE_ROOTS, "tests", "benchmarks"):
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names_ = ([a.name for a in node.names] if isinstance(node, ast.Import)
                          else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                          else [])
                offenders += [f"{path.relative_to(REPO)}: {n}" for n in names_
                              if n.split(".")[0] in ("components", "pipelines")]
    assert not offenders, offenders


def test_shared_names_are_defined_once():
    """TASK_METRICS, OPTIMIZERS, STATUSES, ... live in batchscale.core.names only: no other
    module assigns a top-level name of the same name (importing it is fine)."""
    shared = {n for n in vars(names) if n.isupper()}
    redefined = []
    for module, path in modules(REPO).items():
        if module == "batchscale.core.names":
            continue
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, ast.AnnAssign) else [])
            redefined += [f"{module}.{t.id}" for t in targets if isinstance(t, ast.Name) and t.id in shared]
    assert not redefined, f"defined again outside batchscale.core.names: {redefined}"


# ---- the checker itself ------------------------------------------------------------
def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, set[str]]:
    for name, text in files.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return graph(tmp_path, {"pkg": "pkg"})


def test_checker_finds_a_cycle_through_a_lazy_import(tmp_path):
    edges = _tree(tmp_path, {
        "__init__.py": "",
        "low/__init__.py": "",
        "low/a.py": "def f():\n    from pkg.low import b\n",
        "low/b.py": "from . import a\n",
        "high.py": "import pkg.low.a\n",
    })
    assert cycles(edges) == [["pkg.low.a", "pkg.low.b"]]


def test_checker_finds_upward_and_sideways_imports(tmp_path):
    edges = _tree(tmp_path, {
        "__init__.py": "", "low.py": "from pkg.high import thing\n", "peer.py": "import pkg.other\n",
        "other.py": "", "high.py": "from pkg import low\nthing = 1\n",
    })
    layers = {"pkg.low": 0, "pkg.peer": 1, "pkg.other": 1, "pkg.high": 2}
    found = layer_violations(edges, layers)
    assert found == ["pkg.low imports pkg.high: up: pkg.low (layer 0) -> pkg.high (layer 2)",
                     "pkg.peer imports pkg.other: sideways: pkg.peer (layer 1) -> pkg.other (layer 1)"]
    assert cycles(edges) == [["pkg.high", "pkg.low"]]


def test_checker_finds_an_import_up_the_rooms_of_a_part(tmp_path):
    edges = _tree(tmp_path, {
        "__init__.py": "", "part/__init__.py": "", "part/api.py": "from pkg.part.late import x\n",
        "part/early/__init__.py": "",
        "part/early/a.py": "def f():\n    from pkg.part.late import b\n",  # up, lazily
        "part/early/c.py": "from pkg.part import api\n",  # up to the part's top
        "part/late/__init__.py": "", "part/late/b.py": "from pkg.part.early import a\nx = 1\n",
    })
    layers, rooms = {"pkg.part": 0}, {"pkg.part": ("early", "late")}
    assert layer_violations(edges, layers, rooms) == [
        "pkg.part.early.a imports pkg.part.late.b: up inside pkg.part: room early (0) -> room late (1)",
        "pkg.part.early.c imports pkg.part.api: up inside pkg.part: room early (0) -> room top (2)"]
    assert layer_violations(edges, layers, {}) == []  # without rooms, a part is one layer


def test_the_analysis_rooms_exist():
    """Every room named in ROOMS is a package of the tree, so a renamed room cannot leave
    the check with nothing to hold."""
    found = modules(REPO)
    missing = [f"{part}.{room}" for part, names in ROOMS.items() for room in names
               if f"{part}.{room}" not in found]
    assert not missing, missing
