"""``batchscale images``: the exact skaffold command it runs (profiles from the preset and
the user's code, the registry, the output file), where it runs it, the ``--images`` file
it reads back (and ``compile`` then puts in the pipeline), and one line for each failure:
no skaffold, a bad registry, skaffold failing, a build without an image the preset needs.

``skaffold`` here is a STAND-IN script put first on PATH (skaffold and Docker are not
installed here): it records its arguments, working folder and ``BATCHSCALE_USER_CODE``, and
writes the builds it is told to in skaffold's ``--file-output`` format.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from batchscale.cli.images import profiles_for
from batchscale.cli.main import main
from batchscale.core.images import USER_CODE_ENV
from batchscale.pipelines.placement import PRESETS
from tests.system_tools import stand_in_program

REPO = Path(__file__).resolve().parents[2]
REGISTRY = "us-docker.pkg.dev/my-project/batchscale"
FAKE_SKAFFOLD = f'''#!{sys.executable}
"""A STAND-IN for skaffold (not installed here): records how it was run, then writes the
builds in FAKE_SKAFFOLD_BUILDS to --file-output as skaffold does, or fails."""
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_SKAFFOLD_LOG"], "w") as fh:
    json.dump({{"args": args, "cwd": os.getcwd(), "user_code": os.environ.get("{USER_CODE_ENV}")}}, fh)
if os.environ.get("FAKE_SKAFFOLD_FAIL"):
    print("build failed: docker daemon not running", file=sys.stderr)
    sys.exit(1)
repo = next(a.split("=", 1)[1] for a in args if a.startswith("--default-repo="))
builds = [{{"imageName": name, "tag": f"{{repo}}/{{name}}:0a1b2c3@sha256:" + str(i) * 64}}
          for i, name in enumerate(os.environ["FAKE_SKAFFOLD_BUILDS"].split(","), 1)]
with open(args[args.index("--file-output") + 1], "w") as fh:
    json.dump({{"builds": builds}}, fh)
'''


@pytest.fixture
def skaffold(tmp_path, monkeypatch):
    """The stand-in first on PATH; returns a reader of what it recorded."""
    monkeypatch.delenv(USER_CODE_ENV, raising=False)
    return stand_in_program(tmp_path, monkeypatch, "skaffold", FAKE_SKAFFOLD, "FAKE_SKAFFOLD_LOG")


def test_builds_a_gpu_presets_images_and_compile_names_their_digests(skaffold, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_SKAFFOLD_BUILDS", "batchscale-light,batchscale-trainer-gpu")
    output = tmp_path / "build" / "images.json"
    assert main(["images", "--registry", REGISTRY + "/", "--preset", "nvidia-l4",
                 "--output", str(output)]) == 0
    ran = skaffold()
    assert ran["args"] == ["build", "-p", "gpu", f"--default-repo={REGISTRY}", "--file-output", str(output)]
    assert Path(ran["cwd"]) == REPO and ran["user_code"] is None  # the checkout with skaffold.yaml
    out, err = capsys.readouterr()
    assert f"skaffold build -p gpu --default-repo={REGISTRY} --file-output {output}" in err
    trainer = json.loads(output.read_text())["builds"][1]["tag"]
    assert f"batchscale-trainer-gpu: {trainer}" in out and f"--images {output}" in out
    pipeline = tmp_path / "pipeline.yaml"
    assert main(["compile", "--output", str(pipeline), "--preset", "nvidia-l4", "--images", str(output),
                 "--pipeline-store", "gs://my-bucket/s"]) == 0
    executors = next(yaml.safe_load_all(pipeline.read_text()))["deploymentSpec"]["executors"]
    assert executors["exec-train-pack"]["container"]["image"] == trainer


def test_your_model_on_a_tpu_preset_builds_the_user_profile_with_your_folder(skaffold, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_SKAFFOLD_BUILDS", "batchscale-light,batchscale-trainer-tpu,batchscale-user")
    code = tmp_path / "my-model"
    code.mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["images", "--registry", REGISTRY, "--preset", "tpu-v5e-1x1", "--user-code", "my-model"]) == 0
    ran = skaffold()
    assert ran["args"] == ["build", "-p", "user-tpu", f"--default-repo={REGISTRY}", "--file-output",
                           str(tmp_path / "build" / "images.json")]
    assert ran["user_code"] == str(code)


def test_every_preset_picks_profiles_that_skaffold_yaml_has():
    names = {p["name"] for p in yaml.safe_load((REPO / "skaffold.yaml").read_text())["profiles"]}
    for preset in PRESETS.values():
        for user_code in (False, True):
            assert set(profiles_for(preset.image, user_code, cloud_build=False)) <= names
        assert "cloud-build" in profiles_for(preset.image, False, cloud_build=True)


def _refused(argv, capsys) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()[-1]
    return code, err


def test_each_failure_is_one_line(skaffold, tmp_path, monkeypatch, capsys):
    output = str(tmp_path / "images.json")
    images = ["images", "--output", output, "--registry"]
    code, err = _refused([*images, "https://us-docker.pkg.dev/p/r"], capsys)
    assert code == 2 and err.startswith("batchscale: error: --registry: 'https://us-docker.pkg.dev/p/r': "
                                        "no scheme")
    code, err = _refused([*images, "us-docker.pkg.dev"], capsys)
    assert code == 2 and "is not a registry path; allowed: HOST/PATH" in err
    code, err = _refused(["images", "--registry", REGISTRY, "--user-code", "x", "--cloud-build"], capsys)
    assert code == 2 and "the user image builds with the local Docker engine only" in err
    monkeypatch.setenv("FAKE_SKAFFOLD_FAIL", "1")
    code, err = _refused([*images, REGISTRY], capsys)
    assert code == 1 and err == (f"batchscale: error: skaffold build exited with status 1 (its output is "
                                 f"above); {output} was not written by this build")
    monkeypatch.delenv("FAKE_SKAFFOLD_FAIL")
    monkeypatch.setenv("FAKE_SKAFFOLD_BUILDS", "batchscale-light")
    code, err = _refused([*images, REGISTRY, "--preset", "nvidia-l4"], capsys)
    assert code == 1 and f"skaffold wrote {output} without batchscale-trainer-gpu" in err
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))  # no skaffold anywhere
    code, err = _refused([*images, REGISTRY], capsys)
    assert code == 1 and err.startswith("batchscale: error: skaffold is not on PATH; install it "
                                        "(https://skaffold.dev/docs/install/)")
    assert err.endswith(f"skaffold build --default-repo={REGISTRY} --file-output {output}")
