"""Build a kustomization with every kustomize (v4 or later) this machine has.

Two implementations are looked for: pykustomize (kustomize's Go library over FFI, a pip
package; CI installs it) and ``kubectl kustomize`` (kubectl 1.21 and later embed kustomize
v4+). Whichever are present are all used, so a test can also check that they agree. With
neither, the test skips (fails in CI: tests/system_tools.py) saying how to get one.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import yaml

from tests.system_tools import missing

WHAT = "a kustomize v4+ (pykustomize in the venv, or kubectl >= 1.21 on PATH)"
INSTALL_HINT = ("`.venv/bin/python -m pip install --ignore-requires-python pykustomize==0.1.4` "
                "(its metadata asks for Python 3.14; it runs on 3.10+), or put kubectl >= 1.21 on PATH")


def _pykustomize() -> tuple[str, Callable[[Path], str]] | None:
    try:
        import pykustomize
    except ImportError:
        return None
    # The package's version is its own; the kustomize library it bundles shows in the Go
    # module paths compiled into it (sigs.k8s.io/kustomize/api@v0.21.x is kustomize v5.8).
    lib = next(Path(pykustomize.__file__).parent.glob("_lib/*/libpykustomize.*"), None)
    api = None
    if lib is not None:
        found = re.search(rb"sigs\.k8s\.io/kustomize/api@v0\.(\d+)\.(\d+)", lib.read_bytes())
        api = (int(found.group(1)), int(found.group(2))) if found else None
    if api is not None and api < (8, 0):  # api v0.8 shipped with kustomize v4.0
        return None
    where = f"kustomize api v0.{api[0]}.{api[1]}" if api else "kustomize api version unknown"

    def build(path: Path) -> str:
        return asyncio.run(pykustomize.build(str(path))).yaml

    return f"pykustomize v{pykustomize.__version__} ({where})", build


def _kubectl() -> tuple[str, Callable[[Path], str]] | None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None
    try:
        out = subprocess.run([kubectl, "version", "--client", "-o", "json"], capture_output=True,
                             text=True, timeout=30, check=True).stdout
        version = json.loads(out).get("kustomizeVersion", "")
    except (subprocess.SubprocessError, ValueError):
        return None
    major = re.match(r"v(\d+)\.", version)
    if not major or int(major.group(1)) < 4:
        return None

    def build(path: Path) -> str:
        done = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True,
                              timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"kubectl kustomize {path} failed: {done.stderr.strip()}")
        return done.stdout

    return f"kubectl kustomize {version}", build


@functools.cache
def implementations() -> dict[str, Callable[[Path], str]]:
    """Name -> build function (kustomization directory -> YAML) of each kustomize v4+."""
    found = [impl for impl in (_pykustomize(), _kubectl()) if impl is not None]
    return dict(found)


def kustomize_builds(path: str | Path) -> dict[str, list[dict]]:
    """Implementation name -> the objects ``kustomize build PATH`` emits, parsed."""
    impls = implementations()
    if not impls:
        missing(WHAT, INSTALL_HINT)
    return {name: [doc for doc in yaml.safe_load_all(build(Path(path))) if doc]
            for name, build in impls.items()}
