"""The unit tier's guard: unit tests stay in-process.

A unit test that starts a process (``subprocess``, ``multiprocessing``, ``os.system``,
``os.fork``, ``os.posix_spawn``) or opens a network connection (``socket.connect``,
``socket.create_connection``: the GCS emulator and the KFP REST stand-in are sockets too)
fails with one message that says where it belongs. That is what keeps the tier fast
(under a minute on a 2-core machine) and honest: its name promises no processes, no
network. The guard is on for every test under tests/unit (autouse fixture), and a test
that asks for a fixture that starts a server (``gcs_emulator``, ``gcs_root``,
``gcs_study``) fails before that server starts.

A violation is also remembered, so a test that catches the guard's exception (``except
Exception``, a thread that dies quietly) still fails. tests/unit/test_unit_guard.py tests
the guard itself.
"""

from __future__ import annotations

import _posixsubprocess
import os
import platform
import socket
import subprocess
import threading

import pytest

MESSAGE = "unit tests stay in-process: move this test to tests/integration"

# tests/conftest.py's fixtures that start the GCS emulator.
SERVER_FIXTURES = frozenset({"gcs_emulator", "gcs_root", "gcs_study"})

_VIOLATIONS = pytest.StashKey[list]()


class OutOfProcessError(RuntimeError):
    """Raised by the guard where a unit test starts a process or opens a connection.

    A RuntimeError, not an OSError, so that code retrying or reporting connection
    errors does not mistake it for a refused connection.
    """


def _refuser(what: str, violations: list, older: set[int]):
    """Refuse the call; count it against the test unless it comes from a thread that was
    running before the test began (not the main thread): a library's background thread,
    started when the test files were imported, once tried a connection during a test
    that makes none (a fresh-clone CI run on 2026-11-25) and failed it. Threads the
    test starts, and the test itself, are always counted."""
    def refuse(*_args, **_kwargs):
        if threading.get_ident() not in older:  # older never holds the main thread
            violations.append(what)
        raise OutOfProcessError(f"{MESSAGE} ({what})")
    return refuse


# (owner, attribute, what the message calls it); the owners that exist on this platform.
_GUARDED = [
    (subprocess.Popen, "_execute_child", "subprocess.Popen"),  # run, call, check_output, os.popen
    (_posixsubprocess, "fork_exec", "a child process"),  # multiprocessing's spawn and forkserver
    (os, "system", "os.system"),
    (os, "fork", "os.fork"),
    (os, "forkpty", "os.forkpty"),
    (os, "posix_spawn", "os.posix_spawn"),
    (os, "posix_spawnp", "os.posix_spawnp"),
    (socket.socket, "connect", "socket.connect"),
    (socket.socket, "connect_ex", "socket.connect_ex"),
    (socket, "create_connection", "socket.create_connection"),
]


# The standard library asks ``uname -p`` once per process (platform.processor(), cached);
# h5py, under TensorFlow, asks at import. Ask before the guard goes up: not the test's doing.
platform.uname().processor  # noqa: B018


@pytest.fixture(autouse=True)
def in_process_only(request, monkeypatch):
    """Refuse processes and connections for the duration of one unit test.

    Yields the list of violations so far; the guard's own test clears it after checking
    that the guard raised.
    """
    violations = request.node.stash.setdefault(_VIOLATIONS, [])
    older = {t.ident for t in threading.enumerate() if t is not threading.main_thread()}
    for owner, name, what in _GUARDED:
        if hasattr(owner, name):
            monkeypatch.setattr(owner, name, _refuser(what, violations, older))
    yield violations


def pytest_runtest_setup(item):
    servers = sorted(SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())))
    if servers:
        pytest.fail(f"{MESSAGE} (uses {', '.join(servers)})", pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    violations = item.stash.get(_VIOLATIONS, [])
    if report.when == "call" and report.passed and violations:
        report.outcome = "failed"
        report.longrepr = f"{MESSAGE} (caught and swallowed: {', '.join(sorted(set(violations)))})"
