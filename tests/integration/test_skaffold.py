"""skaffold.yaml, checked structurally: skaffold's published JSON schema is not available
offline here (and skaffold itself is not installed), so these tests check what the
cluster workflow relies on instead. The config is a skaffold v4 ``Config`` with only known
top-level keys; every profile's JSON patches apply to the base config (with the real
``jsonpatch`` library, as skaffold applies them to its parsed config) and none addresses
a list element by index, so reordering the base cannot make a patch hit the wrong entry;
in the base and after every profile, each artifact has a unique image name and a
Dockerfile that exists relative to its context, and exactly one build type is set. The
image names are exactly ``batchscale.core.images.IMAGE_NAMES``: the base builds the light
image, ``gpu`` and ``tpu`` add their trainer, the user profiles add ``batchscale-user`` on
the image its preset trains on, and every placement preset's image is built by some
profile. Each profile's kustomize paths are overlays with a kustomization.yaml, and each
profile is preceded by a comment showing how to invoke it.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import jsonpatch
import pytest
import yaml

from batchscale.core.images import IMAGE_NAMES, LIGHT, TRAINER_GPU, TRAINER_TPU, USER
from batchscale.pipelines.placement import PRESETS

ROOT = Path(__file__).resolve().parents[2]
SKAFFOLD = ROOT / "skaffold.yaml"
# SkaffoldConfig's fields in the v4 schemas (v4beta1 .. v4beta14)
TOP_LEVEL_KEYS = {"apiVersion", "kind", "metadata", "requires", "build", "test", "manifests",
                  "deploy", "portForward", "profiles", "resourceSelector", "verify", "customActions"}
BUILD_TYPES = {"local", "googleCloudBuild", "cluster"}
JSON_PATCH_OPS = {"add", "remove", "replace", "move", "copy", "test"}
EXPECTED = {  # profile -> (images built, kustomize overlay)
    None: ({LIGHT}, "manifests/overlays/cpu"),
    "gpu": ({LIGHT, TRAINER_GPU}, "manifests/overlays/gpu"),
    "tpu": ({LIGHT, TRAINER_TPU}, "manifests/overlays/tpu"),
    "user": ({LIGHT, USER}, "manifests/overlays/cpu"),
    "user-gpu": ({LIGHT, TRAINER_GPU, USER}, "manifests/overlays/gpu"),
    "user-tpu": ({LIGHT, TRAINER_TPU, USER}, "manifests/overlays/tpu"),
}


@pytest.fixture(scope="module")
def config() -> dict:
    with open(SKAFFOLD) as fh:
        return yaml.safe_load(fh)


def _profiles(config) -> dict[str, dict]:
    return {p["name"]: p for p in config.get("profiles", [])}


def _base(config) -> dict:
    base = copy.deepcopy(config)
    base.pop("profiles", None)
    return base


def _activated(config, *names: str) -> dict:
    """The config with these profiles' patches applied, in order, as ``-p a,b`` does."""
    result = _base(config)
    profiles = _profiles(config)
    for name in names:
        result = jsonpatch.apply_patch(result, profiles[name].get("patches", []))
    return result


def _combinations(config) -> dict[str, dict]:
    names = list(_profiles(config))
    combos = {"base": _base(config)}
    combos.update({name: _activated(config, name) for name in names})
    if "cloud-build" in names:
        combos.update({f"{n},cloud-build": _activated(config, n, "cloud-build") for n in ("gpu", "tpu")})
    return combos


def test_is_a_skaffold_v4_config(config):
    assert re.fullmatch(r"skaffold/v4(beta\d+)?", config["apiVersion"]), config["apiVersion"]
    assert config["kind"] == "Config"
    assert config["metadata"]["name"] == "batchscale"
    assert set(config) <= TOP_LEVEL_KEYS, f"unknown top-level keys: {sorted(set(config) - TOP_LEVEL_KEYS)}"


def test_profiles_exist_with_unique_names(config):
    names = [p["name"] for p in config["profiles"]]
    assert len(names) == len(set(names)), names
    assert {"gpu", "tpu", "cloud-build"} <= set(names), names


def test_patches_are_not_index_based_and_apply(config):
    for name, profile in _profiles(config).items():
        patches = profile.get("patches", [])
        for patch in patches:
            assert patch.get("op", "replace") in JSON_PATCH_OPS, f"profile {name}: {patch}"
            for key in ("path", "from"):
                if key in patch:
                    segments = patch[key].split("/")[1:]
                    assert patch[key].startswith("/"), f"profile {name}: {key} {patch[key]}"
                    assert not any(s.isdigit() for s in segments), \
                        f"profile {name}: {key} {patch[key]} addresses a list element by index"
        jsonpatch.apply_patch(_base(config), patches)  # raises JsonPatchException if one fails


def test_every_artifact_is_unique_and_its_dockerfile_exists(config):
    for combo, cfg in _combinations(config).items():
        artifacts = cfg["build"]["artifacts"]
        images = [a["image"] for a in artifacts]
        assert len(images) == len(set(images)), f"{combo}: duplicate images {images}"
        for artifact in artifacts:
            context = ROOT / artifact.get("context", ".")
            assert context.is_dir(), f"{combo}: {artifact['image']}: context {context} missing"
            dockerfile = context / artifact.get("docker", {}).get("dockerfile", "Dockerfile")
            assert dockerfile.is_file(), f"{combo}: {artifact['image']}: {dockerfile} missing"
        build_types = BUILD_TYPES & set(cfg["build"])
        assert len(build_types) <= 1, f"{combo}: more than one build type: {sorted(build_types)}"


@pytest.mark.parametrize("profile", list(EXPECTED), ids=lambda p: p or "base")
def test_profile_builds_its_images(config, profile):
    cfg = _activated(config, profile) if profile else _base(config)
    images, overlay = EXPECTED[profile]
    assert {a["image"] for a in cfg["build"]["artifacts"]} == images
    assert cfg["manifests"]["kustomize"]["paths"] == [overlay]
    for trainer in images - {LIGHT, USER}:  # the trainer's Dockerfile is its own folder's
        [artifact] = [a for a in cfg["build"]["artifacts"] if a["image"] == trainer]
        assert artifact["docker"]["dockerfile"] == f"images/{trainer.replace('batchscale-', '')}/Dockerfile"


def test_image_names_are_the_codes(config):
    built = {a["image"] for cfg in _combinations(config).values() for a in cfg["build"]["artifacts"]}
    assert built == set(IMAGE_NAMES)
    folders = {p.parent.name for p in (ROOT / "images").glob("*/Dockerfile")}
    assert folders == {name.replace("batchscale-", "") for name in IMAGE_NAMES}


def test_every_preset_image_is_built_by_a_profile(config):
    built = {a["image"] for cfg in _combinations(config).values() for a in cfg["build"]["artifacts"]}
    for name, preset in PRESETS.items():
        assert preset.image in built, f"preset {name}: no skaffold profile builds {preset.image}"


def test_images_are_pushed_and_tagged_from_the_source(config):
    """GKE pulls from a registry, and --file-output carries digests only for pushed images."""
    build = config["build"]
    assert build["local"]["push"] is True
    assert set(build["tagPolicy"]) & {"gitCommit", "inputDigest"}, build["tagPolicy"]


def test_cloud_build_profile_switches_the_builder(config):
    for combo in ("cloud-build", "gpu,cloud-build", "tpu,cloud-build"):
        build = _combinations(config)[combo]["build"]
        assert "googleCloudBuild" in build and "local" not in build, f"{combo}: {sorted(build)}"
    gpu = _combinations(config)["gpu,cloud-build"]["build"]
    assert TRAINER_GPU in {a["image"] for a in gpu["artifacts"]}


def test_kustomize_paths_are_overlays(config):
    for combo, cfg in _combinations(config).items():
        for path in cfg["manifests"]["kustomize"]["paths"]:
            assert (ROOT / path / "kustomization.yaml").is_file(), \
                f"{combo}: kustomize path {path} has no kustomization.yaml"


def test_each_profile_has_a_comment_showing_how_to_invoke_it(config):
    lines = SKAFFOLD.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("profiles:"))
    found = {}
    for i in range(start + 1, len(lines)):
        match = re.match(r"\s*-\s+name:\s*['\"]?([\w-]+)['\"]?\s*$", lines[i])
        if not match:
            continue
        comment, j = [], i - 1
        while j > start and lines[j].strip().startswith("#"):
            comment.insert(0, lines[j])
            j -= 1
        found[match[1]] = comment
    assert set(found) == set(_profiles(config)), "every profile starts with `- name: ...` on its own line"
    for name, comment in found.items():
        invocations = [line for line in comment if "skaffold" in line
                       and any(name in m.split(",") for m in re.findall(r"-p[ =]([\w,-]+)", line))]
        assert invocations, f"profile {name}: no comment line above it with `skaffold ... -p {name}`"
        assert any("--default-repo" in line for line in invocations), \
            f"profile {name}: the invocation must pass --default-repo (images are pushed)"
