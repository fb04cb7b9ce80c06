"""The unit tier's guard (tests/unit/conftest.py) refuses processes and connections.

Each test triggers the guard on purpose, checks the one message, then clears the
recorded violation (``in_process_only``) so that the test itself passes.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import subprocess
import sys

import pytest

# The message only: pytest imports tests/unit/conftest.py as its own module (``conftest``),
# so its exception class is not the one ``tests.unit.conftest`` would define.
from tests.unit.conftest import MESSAGE

pytest_plugins = ["pytester"]


@pytest.mark.parametrize("start", [
    lambda: subprocess.Popen([sys.executable, "-c", "pass"]),
    lambda: subprocess.run([sys.executable, "-c", "pass"], check=True),
    lambda: subprocess.check_output(["true"]),
    lambda: os.popen("true"),
    lambda: os.system("true"),
    lambda: os.posix_spawn("/bin/true", ["true"], {}),
    lambda: multiprocessing.get_context("spawn").Process(target=os.getpid).start(),
    lambda: multiprocessing.get_context("forkserver").Process(target=os.getpid).start(),
], ids=["Popen", "run", "check_output", "os.popen", "os.system", "posix_spawn", "spawn", "forkserver"])
def test_guard_refuses_a_subprocess(start, in_process_only):
    with pytest.raises(RuntimeError, match=MESSAGE):
        start()
    assert in_process_only
    in_process_only.clear()


@pytest.mark.parametrize("fork", [
    lambda: os.fork(),
    lambda: multiprocessing.get_context("fork").Process(target=os._exit, args=(0,)).start() or 1,
], ids=["os.fork", "multiprocessing-fork"])
def test_guard_refuses_fork(fork, in_process_only):
    with pytest.raises(RuntimeError, match=MESSAGE):
        if fork() == 0:  # only without the guard, in the child: leave at once
            os._exit(0)
    in_process_only.clear()


@pytest.mark.parametrize("connect", [
    lambda: socket.create_connection(("127.0.0.1", 9), timeout=1),
    lambda: socket.socket().connect(("127.0.0.1", 9)),
    lambda: socket.socket().connect_ex(("127.0.0.1", 9)),
    lambda: socket.socket(socket.AF_UNIX).connect("/nonexistent.sock"),
], ids=["create_connection", "connect", "connect_ex", "unix"])
def test_guard_refuses_a_connection(connect, in_process_only):
    # Port 9 (discard) is closed here: without the guard this raises ConnectionRefusedError.
    with pytest.raises(RuntimeError, match=MESSAGE):
        connect()
    in_process_only.clear()


def test_guard_fails_a_test_that_swallows_its_exception(pytester):
    pytester.makeconftest(
        "from tests.unit.conftest import in_process_only, pytest_runtest_makereport  # noqa: F401\n")
    pytester.makepyfile("""
        import subprocess

        def test_swallows():
            try:
                subprocess.run(["true"])
            except Exception:
                pass
    """)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*{MESSAGE} (caught and swallowed: subprocess.Popen)*"])


def test_guard_fails_a_test_that_asks_for_the_emulator_before_it_starts(pytester):
    pytester.makeconftest(
        "import pytest\n"
        "from tests.unit.conftest import in_process_only, pytest_runtest_setup  # noqa: F401\n"
        "@pytest.fixture\n"
        "def gcs_root():\n"
        "    raise AssertionError('the emulator started')\n")
    pytester.makepyfile("def test_on_gcs(gcs_root):\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*{MESSAGE} (uses gcs_root)*"])
    result.stdout.no_fnmatch_line("*the emulator started*")
