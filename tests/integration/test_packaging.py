"""What ``pip install .`` puts into site-packages: one import name, ``batchscale``.

components/ and pipelines/ are top-level folders of the repository but install as
``batchscale.components`` and ``batchscale.pipelines`` (pyproject.toml's package-dir), so
no generic top-level name lands in site-packages. The wheel is built for real (pip, the
project's own build backend) and imported from outside the repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.import_graph import modules

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """``pip install --no-deps --target SITE`` of a copy of the sources (pip builds in the
    source tree, and the repository should not get a build/ folder from a test)."""
    source, target = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("site")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for folder in ("batchscale", "components", "pipelines"):
        shutil.copytree(REPO / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
                    "--target", str(target), str(source)], check=True, capture_output=True, text=True)
    return target


def _python(code: str, site: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True)


def test_only_batchscale_is_installed_and_it_holds_every_module(installed):
    top = {p.name for p in installed.iterdir() if not p.name.endswith((".dist-info", ".data"))} - {"bin"}
    assert top == {"batchscale"}
    for module in modules(REPO):
        path = installed.joinpath(*module.split("."))
        assert path.with_suffix(".py").exists() or (path / "__init__.py").exists(), module
    assert (installed / "batchscale" / "studies" / "quickstart.yaml").exists()


def test_outside_the_repository_only_batchscale_imports(installed, tmp_path):
    ok = _python("import batchscale, batchscale.components.aggregate, batchscale.pipelines.study, "
                 "batchscale.cli; from batchscale.validation import default_spec_dict; "
                 "print(batchscale.components.aggregate.__file__, default_spec_dict()['name'])",
                 installed, tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(str(installed)) and ok.stdout.split()[-1] == "quickstart"
    for generic in ("components", "pipelines"):
        gone = _python(f"import {generic}", installed, tmp_path)
        assert gone.returncode == 1 and "ModuleNotFoundError" in gone.stderr, generic


def test_the_console_script_runs(installed, tmp_path):
    script = installed / "bin" / "batchscale"
    env = {**os.environ, "PYTHONPATH": str(installed)}
    done = subprocess.run([sys.executable, str(script), "validate"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "quickstart" in done.stdout and "mnist_5k" in done.stdout


def test_the_user_image_installer_runs_from_the_installed_package(installed, tmp_path):
    """images/user/Dockerfile runs ``python -m batchscale.pipelines.user_code_install`` in
    a base image, where batchscale is installed as here."""
    env = {**os.environ, "PYTHONPATH": str(installed)}
    run = subprocess.run([sys.executable, "-m", "batchscale.pipelines.user_code_install"], cwd=tmp_path,
                         env=env, capture_output=True, text=True)
    assert run.returncode == 2
    assert "usage: python -m batchscale.pipelines.user_code_install FOLDER" in run.stderr
