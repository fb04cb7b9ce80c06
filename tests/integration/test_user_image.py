"""images/user/: the image that adds a user's folder to ours, and how skaffold builds it.

No Docker engine and no skaffold here: skaffold.yaml's user profiles are read (the
structure skaffold's custom builder and artifact dependencies take), build.sh runs with
a stand-in ``docker`` on PATH that records its arguments (the contract skaffold's
custom builder gives it: IMAGE, PUSH_IMAGE, BUILD_CONTEXT, and the required base as
BASE), code_files.py lists a real folder, and the install step the Dockerfile runs
(``batchscale.pipelines.user_code_install``) runs with real pip, offline, in a throwaway
virtual environment that sees this project's dependencies, as the image's Python does.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from batchscale.core.images import BASES, USER, USER_CODE_ENV, USER_PROFILES, user_image_base
from batchscale.pipelines.placement import PRESETS

ROOT = Path(__file__).resolve().parents[2]
USER_DIR = ROOT / "images" / "user"
INSTALLER = ROOT / "pipelines" / "user_code_install.py"


@pytest.fixture(scope="module")
def user_artifacts() -> dict[str, tuple[dict, set[str]]]:
    """profile -> (its batchscale-user artifact, every image the profile builds)."""
    config = yaml.safe_load((ROOT / "skaffold.yaml").read_text())
    found = {}
    for profile in config["profiles"]:
        added = [p["value"] for p in profile.get("patches", [])
                 if p["op"] == "add" and p["path"] == "/build/artifacts/-"]
        users = [a for a in added if a["image"] == USER]
        if users:
            [artifact] = users
            built = {a["image"] for a in config["build"]["artifacts"]} | {a["image"] for a in added}
            found[profile["name"]] = (artifact, built)
    return found


def test_each_user_profile_builds_the_user_image_on_its_presets_image(user_artifacts):
    """The profile named for a base (core.images.USER_PROFILES) builds the user image on
    that base, beside it, and holds no other trainer: what compile's check
    (``user_image_base``) infers from a build file is what the profile built."""
    assert set(user_artifacts) == set(USER_PROFILES.values())
    for base in BASES:
        artifact, built = user_artifacts[USER_PROFILES[base]]
        assert artifact["requires"] == [{"image": base, "alias": "BASE"}]
        assert base in built and user_image_base(dict.fromkeys(built, "ref")) == base
        assert artifact["context"] == "images/user"
        custom = artifact["custom"]
        assert custom["buildCommand"] == "sh build.sh" and (USER_DIR / "build.sh").is_file()
        script = custom["dependencies"]["command"].split(" ")  # skaffold splits it on spaces
        assert script[0] == "python3" and (ROOT / script[1]).is_file()
    for name, preset in PRESETS.items():  # every preset's model can be the user's
        assert preset.image in USER_PROFILES, name


def test_the_dockerfile_extends_the_base_it_is_given():
    text = (USER_DIR / "Dockerfile").read_text()
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert lines[0].startswith("ARG BASE=") and lines[1] == "FROM ${BASE}"
    assert "PYTHONPATH=/opt/batchscale-user" in text
    assert "COPY --chown=1000:1000 . /opt/batchscale-user/" in text
    assert re.search(r"RUN python -m batchscale\.pipelines\.user_code_install /opt/batchscale-user", text)
    assert "pip install" not in text  # only through the installer, which pins the base


def _stand_in_docker(tmp_path) -> tuple[Path, Path]:
    bin_dir, calls = tmp_path / "bin", tmp_path / "docker-calls.jsonl"
    bin_dir.mkdir(parents=True)
    docker = bin_dir / "docker"
    docker.write_text(f"#!{sys.executable}\nimport json, sys\n"
                      f"open({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n")
    docker.chmod(0o755)
    return bin_dir, calls


def _build_sh(tmp_path, **env) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    bin_dir, calls = _stand_in_docker(tmp_path)
    environ = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "IMAGE": "repo/batchscale-user:abc",
               "BASE": "repo/batchscale-trainer-gpu:abc@sha256:" + "0" * 64,
               "BUILD_CONTEXT": str(USER_DIR), "PUSH_IMAGE": "true", **env}
    result = subprocess.run(["sh", "build.sh"], cwd=USER_DIR, env=environ, capture_output=True,
                            text=True, timeout=60)
    recorded = [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []
    return result, recorded


def test_build_sh_builds_the_users_folder_on_the_base_and_pushes(tmp_path):
    code = tmp_path / "my-model"
    code.mkdir()
    result, calls = _build_sh(tmp_path, **{USER_CODE_ENV: str(code), "BATCHSCALE_MODEL": "my_models:build"})
    assert result.returncode == 0, result.stderr
    build, push = calls
    assert build[0] == "build" and build[-1] == str(code)  # the context: the user's folder
    flags = dict(zip(build[1:-1:2], build[2:-1:2]))
    assert flags == {"--file": f"{USER_DIR}/Dockerfile",
                     "--build-arg": "BATCHSCALE_MODEL=my_models:build", "--tag": "repo/batchscale-user:abc"}
    assert "BASE=repo/batchscale-trainer-gpu:abc@sha256:" + "0" * 64 in build
    assert push == ["push", "repo/batchscale-user:abc"]

    _, calls = _build_sh(tmp_path / "again", **{USER_CODE_ENV: str(code), "PUSH_IMAGE": "false"})
    assert [c[0] for c in calls] == ["build"]  # skaffold asked for a local image only


def test_build_sh_without_the_users_folder_says_so_and_builds_nothing(tmp_path):
    for env in ({}, {USER_CODE_ENV: str(tmp_path / "missing")}):
        result, calls = _build_sh(tmp_path / str(len(env)), **env)
        assert result.returncode == 2 and calls == []
        assert USER_CODE_ENV in result.stderr and "skaffold build -p user" in result.stderr


def test_code_files_lists_the_users_files_for_skaffolds_cache(tmp_path):
    code = tmp_path / "my-model"
    for path in ("my_models/cnn.py", "requirements.txt", ".git/HEAD", "my_models/__pycache__/cnn.pyc"):
        (code / path).parent.mkdir(parents=True, exist_ok=True)
        (code / path).write_text("x")
    run = subprocess.run([sys.executable, "images/user/code_files.py"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, env={**os.environ, USER_CODE_ENV: str(code)})
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == [str(USER_DIR / "Dockerfile"), str(USER_DIR / "build.sh"),
                                      str(code / "requirements.txt"), str(code / "my_models/cnn.py")]
    env = {k: v for k, v in os.environ.items() if k != USER_CODE_ENV}
    run = subprocess.run([sys.executable, "images/user/code_files.py"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, env=env)
    assert run.returncode == 2 and USER_CODE_ENV in run.stderr


def _project(folder: Path, name: str, version: str, dependencies: str = "") -> Path:
    (folder / name).mkdir(parents=True)
    (folder / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{name}"\nversion = "{version}"\ndependencies = [{dependencies}]\n')
    (folder / name / "__init__.py").write_text(f"VERSION = {version!r}\n")
    return folder


@pytest.fixture(scope="module")
def image_python(tmp_path_factory):
    """A throwaway environment standing in for the base image: this project's
    dependencies visible (a .pth, as the worktree's own venv does), and ``basepkg 1.0``
    installed in it, as batchscale's own packages are in the image."""
    root = tmp_path_factory.mktemp("image")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    python = str(root / "venv" / "bin" / "python")
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    deps = [p for p in sys.path if p.endswith("site-packages")]  # this venv's, and any it links
    Path(site, "project_deps.pth").write_text("\n".join(deps) + "\n")
    base = _project(root / "base1", "basepkg", "1.0")
    subprocess.run([python, "-m", "pip", "install", "-q", str(base)], check=True, env=_offline())
    return root, python


def _offline() -> dict:
    """pip with no index and no build isolation (no network here): the builds use the
    setuptools and wheel this project's environment has."""
    return {**os.environ, "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0"}


def _install(python: str, folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([python, str(INSTALLER), str(folder)], capture_output=True, text=True,
                          timeout=300, env=_offline())


def _version(python: str, module: str) -> str:
    return subprocess.run([python, "-c", f"import {module}; print({module}.VERSION)"], capture_output=True,
                          text=True, check=True).stdout.strip()


def test_the_installer_adds_the_users_package_and_changes_nothing_it_finds(image_python):
    root, python = image_python
    user = _project(root / "user", "usermodels", "0.1", '"basepkg"')
    (user / "requirements.txt").write_text("basepkg\n")  # satisfied by what is there
    result = _install(python, user)
    assert result.returncode == 0, result.stdout + result.stderr
    assert _version(python, "usermodels") == "0.1" and _version(python, "basepkg") == "1.0"
    assert "--constraint" in result.stdout and "--requirement" in result.stdout


def test_the_installer_refuses_a_requirement_that_would_change_the_image(image_python):
    root, python = image_python
    newer = _project(root / "base2", "basepkg", "2.0")
    conflict = root / "conflict"
    conflict.mkdir()
    (conflict / "requirements.txt").write_text(f"basepkg @ {newer.as_uri()}\n")  # pip would upgrade
    result = _install(python, conflict)
    assert result.returncode == 1
    assert "basepkg==1.0" in result.stdout + result.stderr  # pip names the pin it kept
    assert "another version of a package the image pins" in result.stderr
    assert _version(python, "basepkg") == "1.0"


def test_the_installer_leaves_a_folder_of_plain_modules_to_pythonpath(image_python, tmp_path):
    _, python = image_python
    (tmp_path / "cnn.py").write_text("def build(params):\n    return None\n")
    result = _install(python, tmp_path)
    assert result.returncode == 0 and "PYTHONPATH" in result.stdout
