"""Inside batchscale.training: the training engines never touch the store.

A trial's durable life (metadata, measurements, checkpoints, live curves, crossings,
leases) is written by one module, ``training/trial_lifecycle.py``, whichever engine
trains it: were an engine to write to the store itself, the fit and pack engines could
drift apart in what a trial leaves there. Read from the source (tests/import_graph.py),
lazy imports inside functions included.
"""

from __future__ import annotations

from pathlib import Path

from tests.import_graph import graph

REPO = Path(__file__).resolve().parents[2]
TRAINING = "batchscale.training"

# The training loops and the modules they are made of: none may import batchscale.store.
ENGINES = (
    "batchscale.training.trainer",  # the fit engine: one trial with Keras fit
    "batchscale.training.pack_loop",  # the pack engine: a pack's trials vmapped
    "batchscale.training.pack_groups",  # how the pack engine's groups take turns
    "batchscale.training.packs",  # run_pack: leases, re-use, picks an engine
    "batchscale.training.vmapped_step",
    "batchscale.training.evaluator",
    "batchscale.training.stop_rule",
    "batchscale.training.signals",
)
# The training modules that may import the store, and why each is at its boundary.
STORE_BOUNDARY = {
    "batchscale.training.trial_lifecycle": "a trial's every write, its leases and re-use",
    "batchscale.training.live_curves": "the TensorBoard event files the lifecycle writes",
    "batchscale.training.pack_summary": "reads a pack's runs back for the Kubeflow UI",
    "batchscale.training.pack_task": "a pack task opens its study's store (either pipeline's)",
    "batchscale.training.distributed_pack": "a multi-host pack's process opens its study's store",
    "batchscale.training.step_timing": "the step-time probes record their profiles",
    "batchscale.training.mixed_probe": "the mixed-batch probe records its pack mode",
    "batchscale.training.pack_mode": "the pack-mode probe reads and records its choice in the profile",
}


def store_importers(edges: dict[str, set[str]], package: str = TRAINING) -> dict[str, set[str]]:
    """Each module of ``package`` that imports the store -> the store modules it imports."""
    out = {}
    for module, targets in edges.items():
        if module == package or module.startswith(package + "."):
            found = {t for t in targets if t == "batchscale.store" or t.startswith("batchscale.store.")}
            if found:
                out[module] = found
    return out


def test_no_training_engine_imports_the_store():
    edges = graph(REPO)
    missing = [m for m in (*ENGINES, *STORE_BOUNDARY) if m not in edges]
    assert not missing, f"listed here but no longer modules: {missing}"
    importers = store_importers(edges)
    offenders = {m: sorted(importers[m]) for m in ENGINES if m in importers}
    assert not offenders, f"engines importing the store (go through trial_lifecycle): {offenders}"


def test_only_the_lifecycle_and_the_store_boundary_import_the_store():
    """A new training module that imports the store fails here until it is either made to
    go through the lifecycle or named (with its reason) in STORE_BOUNDARY."""
    outside = {m: sorted(t) for m, t in store_importers(graph(REPO)).items() if m not in STORE_BOUNDARY}
    assert not outside, f"training modules importing the store outside its boundary: {outside}"


def test_the_check_sees_direct_and_package_imports():
    edges = {"batchscale.training.a": {"batchscale.store.layout"},
             "batchscale.training.b": {"batchscale.store", "batchscale.core.spec"},
             "batchscale.training.c": {"batchscale.core.spec"},
             "batchscale.analysis.d": {"batchscale.store.layout"}}
    assert store_importers(edges) == {"batchscale.training.a": {"batchscale.store.layout"},
                                      "batchscale.training.b": {"batchscale.store"}}
