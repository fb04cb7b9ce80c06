"""What a test needs from the machine beyond the README's install: one rule for all of them.

README's install (``pip install -e ".[test]"``) brings every Python package the suite
needs; a few tests also need a program or a file that no pip package installs on every
Python we support: headless Chromium, a kustomize v4+ (pykustomize asks for Python 3.14,
kubectl is not on PyPI), Debian's Fashion-MNIST files, ``unshare -n``. ``.ci/run``
installs each of them. Where one is absent:

- outside CI the test is skipped, and the reason names what is missing and how to get it;
- in CI (the ``CI`` variable set, as ``.ci/run`` runs and every CI service sets it) the
  test fails with the same words, so CI can never pass by skipping them silently.

docs/testing.md lists what needs which tool.
"""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest

CI_INSTALLS = "CI's .ci/run installs it"


def in_ci() -> bool:
    """True when the ``CI`` variable is set to anything but empty, 0, false or no."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing(what: str, how: str) -> NoReturn:
    """``what`` (a program or file this test needs) is absent: skip outside CI, fail in CI.
    ``how`` says how to get it (a command)."""
    message = f"needs {what}, which is not here: {how} ({CI_INSTALLS})"
    if in_ci():
        pytest.fail(f"CI must have it: {message}", pytrace=False)
    pytest.skip(message)


def program(*names: str, what: str, how: str) -> str:
    """The path of the first of ``names`` found on PATH, else ``missing(what, how)``."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    missing(what, how)


def stand_in_program(tmp_path, monkeypatch, name: str, script: str, log_variable: str):
    """A stand-in for the program ``name`` (a Python ``script`` recording how it was run
    into the JSON file named by ``log_variable``) first on PATH; returns a reader of that
    record. For commands that run a cluster tool this machine has not (kubectl, skaffold)."""
    import json

    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    program_file = folder / name
    program_file.write_text(script)
    program_file.chmod(0o755)
    log = tmp_path / f"{name}.json"
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(log_variable, str(log))
    return lambda: json.loads(log.read_text())
