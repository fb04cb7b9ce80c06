"""Shared pytest fixtures for batchscale, and the test tiers.

Tiers by cost, assigned by folder (a test's marker is its folder's name):

- ``unit`` (tests/unit): no subprocess, no network, no emulator, no training beyond a few
  steps; the whole tier runs in about two minutes on two workers (docs/testing.md).
  tests/unit/conftest.py fails a unit test that starts a process or opens a connection.
- ``integration`` (tests/integration): the GCS emulator, the KFP REST stand-in, kustomize,
  hadolint, the headless browser, subprocesses, short trials, KFP components run alone.
- ``e2e`` (tests/e2e): whole studies through ``batchscale run --local`` (kfp.local).

``pytest -m unit`` runs one tier; the summary at the end of every run prints each tier's
time (the sum of its tests' setup, call and teardown) and the whole run's wall time
(collection, which imports every test module, included).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
import uuid
from collections import defaultdict
from http import HTTPStatus
from pathlib import Path

import pytest

from batchscale.training.signals import StopRequest
from batchscale.validation import parse_spec

GCS_TEST_BUCKET = "batchscale-test"

# Keras picks its backend once, at first import: tests that train in-process use JAX
# (the trainer's default); the TensorFlow backend is exercised in subprocesses.
os.environ.setdefault("KERAS_BACKEND", "jax")
# Packs take turns without measuring (batchscale.training.pack_mode): a probe's choice on a
# busy machine could differ between two stores a test compares, and each probe costs
# seconds; tests/integration/test_pack_mode_probe.py measures with the variable unset.
os.environ.setdefault("BATCHSCALE_PACK_MODE", "turns")


def _share_jax_compilations() -> None:
    """One JAX compilation cache for the whole run: the pytest process, its xdist workers
    (started later, they inherit this environment) and every subprocess and kfp.local task
    they start. Many tests train the same small models in fresh processes (packs, kill -9
    and resume, search rounds), and each compiled the same step again. The key includes
    the computation, the XLA flags and the backend, so a hit is the executable a fresh
    compile would give. A folder of this run only, removed when it ends; a run given
    JAX_COMPILATION_CACHE_DIR keeps that one."""
    if "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return
    folder = tempfile.mkdtemp(prefix="batchscale-tests-jax-cache-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = folder
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")


_share_jax_compilations()

TIERS = ("unit", "integration", "e2e")
_TESTS = Path(__file__).resolve().parent
_tier_seconds: dict[str, float] = defaultdict(float)
_tier_counts: dict[str, int] = defaultdict(int)
_clock: dict[str, float] = {}  # "start" of the session, "collected" when collection ended


def _tier(nodeid: str) -> str | None:
    """The tier of a test from its node id (``tests/<tier>/test_x.py::test_y``)."""
    parts = Path(nodeid.split("::", 1)[0]).parts
    return parts[1] if len(parts) > 2 and parts[0] == _TESTS.name and parts[1] in TIERS else None


def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = _tier(item.nodeid)
        if tier is None:
            raise pytest.UsageError(f"{item.nodeid}: every test lives in one of tests/{{{','.join(TIERS)}}}/")
        item.add_marker(getattr(pytest.mark, tier))


def pytest_runtest_logreport(report):
    tier = _tier(report.nodeid)
    if tier:
        _tier_seconds[tier] += report.duration
        _tier_counts[tier] += report.when == "call"


def pytest_sessionstart(session):
    _clock["start"] = time.perf_counter()


def pytest_collection_finish(session):
    _clock["collected"] = time.perf_counter()


def pytest_terminal_summary(terminalreporter):
    if not _tier_counts:
        return
    terminalreporter.section("time per tier")
    for tier in TIERS:
        if _tier_counts[tier]:
            terminalreporter.write_line(
                f"{tier:<12} {_tier_counts[tier]:>4} tests  {_tier_seconds[tier]:7.1f} s")
    if "start" in _clock:
        wall = time.perf_counter() - _clock["start"]
        collection = _clock.get("collected", _clock["start"]) - _clock["start"]
        tests = sum(_tier_counts.values())
        terminalreporter.write_line(
            f"{'whole run':<12} {tests:>4} tests  {wall:7.1f} s wall (collection {collection:.1f} s)")


def _patch_generation_preconditions(mp: pytest.MonkeyPatch) -> None:
    """Make gcp-storage-emulator honour ``ifGenerationMatch`` on object uploads.

    The emulator silently ignores upload preconditions (it overwrites where real GCS
    answers 412), so create-only writes could not be tested against it otherwise.
    """
    from gcp_storage_emulator import server
    from gcp_storage_emulator.exceptions import NotFound
    from gcp_storage_emulator.handlers import objects

    original = objects.insert

    def insert(request, response, storage, *args, **kwargs):
        want = (request.query.get("ifGenerationMatch") or [None])[0]
        if want is not None:
            name = (request.query.get("name") or [None])[0]
            if name is None and isinstance(request.data, dict):  # multipart / resumable
                name = (request.data.get("meta") or request.data).get("name")
            try:
                have = storage.get_file_obj(request.params["bucket_name"], name)["generation"]
            except NotFound:
                have = "0"
            if str(have) != want:
                response.status = HTTPStatus.PRECONDITION_FAILED
                response.json({"error": {"code": 412, "message": "conditionNotMet"}})
                return None
        return original(request, response, storage, *args, **kwargs)

    mp.setattr(objects, "insert", insert)
    for _regex, handlers in server.HANDLERS:
        for method, handler in list(handlers.items()):
            if handler is original:
                mp.setitem(handlers, method, insert)


EMULATOR_CONNECTION_TIMEOUT = 5.0  # seconds a connection to the emulator may stall


@pytest.fixture(scope="session")
def gcs_emulator():
    """In-process GCS emulator (in-memory) with bucket "batchscale-test", for the session.

    STORAGE_EMULATOR_HOST points at it while the session runs and is restored after.
    """
    from gcp_storage_emulator.server import RequestHandler, create_server

    with pytest.MonkeyPatch.context() as mp:
        _patch_generation_preconditions(mp)
        # The emulator serves one connection at a time (http.server.HTTPServer), so one
        # connection that stalls mid-request (the outage tests cut them through a relay)
        # would block every later client for good: a CI run hung in connect() that way.
        # StreamRequestHandler applies ``timeout`` to each connection's socket: a stalled
        # one is dropped after it, and the server serves the next.
        mp.setattr(RequestHandler, "timeout", EMULATOR_CONNECTION_TIMEOUT, raising=False)
        # Port 0: the OS picks a free port at bind time, so there is no port race.
        server = create_server("127.0.0.1", 0, in_memory=True, default_bucket=GCS_TEST_BUCKET)
        server.start()
        try:
            port = server._api._httpd.server_address[1]
            host = f"http://127.0.0.1:{port}"
            mp.setenv("STORAGE_EMULATOR_HOST", host)
            yield {"host": host, "bucket": GCS_TEST_BUCKET}
        finally:
            server.stop()


@pytest.fixture
def gcs_root(gcs_emulator, monkeypatch):
    """A fresh, empty ``gs://batchscale-test/<uuid>`` root on the emulator."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator["host"])
    return f"gs://{gcs_emulator['bucket']}/{uuid.uuid4().hex}"


@pytest.fixture(scope="session")
def digits_store(tmp_path_factory):
    """A local store root with scikit-learn's real digits prepared (offline, ~1,800 images)."""
    from batchscale.store.layout import StudyStore
    from batchscale.workloads.prepare import prepare_dataset

    root = str(tmp_path_factory.mktemp("digits-store"))
    prepare_dataset(StudyStore(root), "digits", log=lambda *_: None)
    return root


def tiny_spec_dict(store: str, **changes) -> dict:
    """A small, fast study on the digits data set (real images, shipped offline).

    One search round and the ``goal`` protocol unless changed: tests of training
    mechanics (packs, faults, budgets, resumption) compare runs trial by trial, and under
    ``race`` a trial's stop depends on which trials finished first, while later rounds
    add trials. tests/integration/test_protocol_rounds.py sets both explicitly."""
    raw = {
        "protocol": "goal", "max_rounds": 1,
        "name": "tiny", "store": store,
        "workload": {"dataset": "digits", "model": "fc_32", "optimizer": "nesterov_momentum"},
        "batch_sizes": [16, 128], "trials_per_batch_size": 2,
        "search_space": {"learning_rate": {"scale": "log", "min": 0.02, "max": 0.2}},
        "fixed": {"momentum": 0.9},
        "goals": [{"metric": "classification_error", "value": 0.2}],
        "max_steps": 300, "evaluation": {"train_examples": 500}, "seed": 0, "parallelism": 2,
    }
    raw.update(changes)
    return raw


@pytest.fixture(scope="session")
def gcs_study(gcs_emulator):
    """A tiny study ("tiny", digits, batch sizes 16 and 128) trained for real straight into
    a gs:// store; returns the store root."""
    from batchscale.search.trials import make_trials
    from batchscale.store.layout import StudyStore
    from batchscale.training.trainer import run_trial
    from batchscale.workloads.prepare import prepare_dataset

    root = f"gs://{gcs_emulator['bucket']}/report-test"
    spec = parse_spec(tiny_spec_dict(root, max_steps=120))
    store = StudyStore(root)
    prepare_dataset(store, "digits", log=lambda *_: None)
    store.register_study(spec)
    for trial in make_trials(spec):
        run_trial(spec, trial, store, log=lambda *_: None)
    return root


def host_devices_flags(count: int) -> str:
    """XLA_FLAGS for a subprocess that sees ``count`` logical CPU devices (data parallelism
    on this 2-core machine). XLA ends a CPU all-reduce whose threads do not all arrive
    within 40 s with a fatal "Termination timeout" (SIGABRT), seen once in a full suite run
    (2026-11-26), most likely the deadlock ``host_devices_env`` explains and prevents (use
    it, not this alone); the tests allow 600 s: a real hang still ends at the test's own
    subprocess timeout, with its stacks."""
    return (f"--xla_force_host_platform_device_count={count} "
            "--xla_cpu_collective_call_terminate_timeout_seconds=600")


def host_devices_env(count: int) -> dict:
    """Environment for a subprocess that sees ``count`` logical CPU devices: their
    XLA_FLAGS (``host_devices_flags``) and ``NPROC``, which sizes XLA:CPU's runtime thread
    pools (tsl ``DefaultThreadPoolSize``; the cores otherwise), to at least twice ``count``.

    XLA:CPU runs both the launch of each device's share of a multi-device step and the
    share itself on one pool of max(cores, devices) threads: 4 on this 2-core machine. A
    launch waits, on its pool thread, while its device has 32 steps in flight; when the
    host dispatches that far ahead (a loop of steps it does not wait on, on busy cores),
    one blocked launch plus the other devices' shares of an all-reduce fill the 4 threads
    and the last device's share never runs: a deadlock (gdb: 3 threads in the
    all-reduce's rendezvous, the 4th in ``Semaphore::Acquire``). Twice ``count`` threads
    leave room for one step's launches and one step's shares at once."""
    return {"XLA_FLAGS": host_devices_flags(count),
            "NPROC": str(max(os.cpu_count() or 1, 2 * count))}


def trial_histories(store, spec, by_batch_size: bool = False) -> dict:
    """Each trial of ``spec`` (round 1) as the store holds it: (status, steps, stop reason,
    measurement rows without wall times): what a resumed or raced run must leave exactly as
    an uninterrupted one did (the fault tests compare them). Keyed by trial id, or by
    (batch size, trial id) (``by_batch_size``: ids repeat across batch sizes)."""
    from batchscale.search.trials import make_trials

    out = {}
    for trial in make_trials(spec):
        rows = [{k: v for k, v in row.items() if k != "wall_time"}
                for row in store.read_measurements(spec, trial)]
        meta = store.read_metadata(spec, trial)
        key = (trial.batch_size, trial.trial_id) if by_batch_size else trial.trial_id
        out[key] = (meta["status"], meta["steps"], meta.get("stop_reason"), rows)
    return out


def share_datasets(store_root: str, into: str) -> None:
    """Give the store at ``into`` the prepared data sets of ``store_root`` without copying
    their bytes: hard links (a symlink would lead out of the store, which LocalStorage
    refuses to follow)."""
    import shutil

    shutil.copytree(os.path.join(store_root, "datasets"), os.path.join(into, "datasets"),
                    copy_function=os.link)


class StopAfter(StopRequest):
    """A stop request that turns on at the ``checks``-th time the trainer looks at it (no
    signal, so no deadline: the loops' own checkpoint is what is tested)."""

    def __init__(self, checks: int):
        self.checks = checks
        super().__init__(deadline=None)

    @property
    def requested(self) -> bool:
        self.checks -= 1
        return self.checks < 0

    @requested.setter
    def requested(self, _value) -> None:
        pass  # StopRequest's own flag: this one counts checks instead


PROTOCOL_PLUGIN = "tests.stand_ins.protocol_plugin"  # registers the test-only "goal_alone"


@pytest.fixture
def protocol_plugin(monkeypatch):
    """``BATCHSCALE_PLUGINS`` names the test-only protocol plugin for this test (and every
    process it starts); the protocol table is as before once the test ends. Yields the
    plugin module's name. Tests must not import the plugin themselves: an import outside
    this fixture would register its protocol for the rest of the process."""
    import sys

    from batchscale.core import protocols

    monkeypatch.setenv(protocols.PLUGINS_VARIABLE, PROTOCOL_PLUGIN)
    monkeypatch.setattr(protocols, "_TABLE", dict(protocols._TABLE))
    monkeypatch.setattr(protocols, "_plugins_loaded", set(protocols._plugins_loaded))
    monkeypatch.delitem(sys.modules, PROTOCOL_PLUGIN, raising=False)
    yield PROTOCOL_PLUGIN
