"""Placement presets in the compiled pipeline: for every preset the trainer task carries
its accelerator resource and count, node selectors, tolerations, requests and image, and
the light tasks carry none of them; ``--images`` puts skaffold's built references in."""

import json
import re

import pytest

from batchscale.cli.main import main
from batchscale.core.images import IMAGE_NAMES, LIGHT, image_reference, read_images_file
from batchscale.pipelines.compiled_yaml import load_documents
from batchscale.pipelines.placement import GPU_RESOURCE, PRESETS, TPU_RESOURCE, multi_host_placement
from batchscale.pipelines.study import compile_pipeline, pipeline_name
from batchscale.validation import default_spec_dict, parse_spec
from batchscale.workloads.inputs import CPUS_ENV, available_cpus

LIGHT_TASKS = ("prepare-data", "plan-round", "aggregate")
BUILT = {name: f"us-docker.pkg.dev/example-project/batchscale/{name}:abc123@sha256:{'0' * 64}"
         for name in IMAGE_NAMES}


def _compiled(tmp_path, preset, images=None):
    spec = parse_spec(default_spec_dict())
    path = compile_pipeline(spec, str(tmp_path / f"{preset}.yaml"), store_root="gs://b/p",
                            preset=preset, images=images)
    with open(path) as fh:
        docs = load_documents(fh)
    return docs[0], (docs[1] if len(docs) > 1 else {})  # no platform spec without k8s settings


def _executors(pipeline, platform):
    """executor name -> (container spec, kubernetes platform config) for every task."""
    k8s = platform.get("platforms", {}).get("kubernetes", {}).get("deploymentSpec", {}).get("executors", {})
    return {name: (spec["container"], k8s.get(name, {}))
            for name, spec in pipeline["deploymentSpec"]["executors"].items()}


def _by_task(executors, prefix):
    """The task's executor; each search round has its own copy, and all must be alike."""
    matches = [v for k, v in executors.items() if re.fullmatch(rf"exec-{prefix}(-\d+)?", k)]
    assert matches and all(m == matches[0] for m in matches), prefix
    return matches[0]


@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_preset_places_the_trainer_and_only_the_trainer(tmp_path, preset):
    """A multi-host preset's one-pod packs train on its single-host sibling; its own hosts
    are reached only through the TrainJobs of the multi-host loop (a light task)."""
    p = PRESETS[preset]
    if p.hosts > 1:
        p = PRESETS[p.single_host]
    pipeline, platform = _compiled(tmp_path, preset, images=BUILT)
    assert pipeline["pipelineInfo"]["name"] == pipeline_name(preset) == f"batchscale-study-{preset}"
    executors = _executors(pipeline, platform)
    container, k8s = _by_task(executors, "train-pack")

    resources = container["resources"]
    assert resources["resourceCpuRequest"] == p.cpu
    assert resources["resourceMemoryRequest"] == p.memory
    if p.accelerator:
        assert resources["accelerator"]["resourceType"] == p.accelerator
        assert int(resources["accelerator"]["resourceCount"]) == p.accelerator_count
        expected_key = {GPU_RESOURCE: "cloud.google.com/gke-accelerator",
                        TPU_RESOURCE: "cloud.google.com/gke-tpu-accelerator"}[p.accelerator]
        assert expected_key in k8s["nodeSelector"]["labels"]
    else:
        assert "accelerator" not in resources
    assert k8s.get("nodeSelector", {}).get("labels", {}) == p.node_selectors
    expected = [{"key": t.key, "operator": t.operator, "value": t.value, "effect": t.effect}
                for t in p.tolerations]
    assert k8s.get("tolerations", []) == [{k: v for k, v in t.items() if v is not None} for t in expected]
    assert container["image"] == BUILT[p.image]
    assert {"name": CPUS_ENV, "value": p.cpu} in container["env"]

    multi = ("train-multihost-pack", "select-lanes") if PRESETS[preset].hosts > 1 else ()
    assert any(name.startswith("exec-train-multihost-pack") for name in executors) == bool(multi)
    for task in (*LIGHT_TASKS, *multi):
        light, light_k8s = _by_task(executors, task)
        assert "accelerator" not in light["resources"], task
        assert light["resources"]["resourceCpuRequest"] == "500m"
        assert not light_k8s.get("nodeSelector") and not light_k8s.get("tolerations"), task
        assert light["image"] == BUILT[LIGHT]


def test_accelerator_presets_match_the_papers_hardware_vocabulary():
    gpus = {n: p for n, p in PRESETS.items() if p.accelerator == GPU_RESOURCE}
    tpus = {n: p for n, p in PRESETS.items() if p.accelerator == TPU_RESOURCE}
    assert set(gpus) == {"nvidia-l4", "nvidia-a100-80gb", "nvidia-h100-80gb",
                         "nvidia-h100-80gb-1x8", "nvidia-h100-80gb-2x8"}
    assert set(tpus) == {"tpu-v5e-1x1", "tpu-v5e-2x2", "tpu-v5e-2x4", "tpu-v5e-4x4",
                         "tpu-v6e-2x2", "tpu-v6e-4x4"}
    for name, p in gpus.items():  # GKE's accelerator label is the GPU the preset's name starts with
        gpu = p.node_selectors["cloud.google.com/gke-accelerator"]
        assert name == gpu or name == f"{gpu}-{p.hosts}x{p.accelerator_count}"
    labels = {"v5e": "tpu-v5-lite-podslice", "v6e": "tpu-v6e-slice"}
    for name, p in tpus.items():  # chips of all hosts = product of the topology
        _, generation, topology = name.split("-")
        rows, cols = map(int, topology.split("x"))
        assert p.accelerator_count * p.hosts == rows * cols
        assert p.node_selectors["cloud.google.com/gke-tpu-topology"] == topology
        assert p.node_selectors["cloud.google.com/gke-tpu-accelerator"] == labels[generation]
        assert (p.hosts > 1) == (rows * cols > 8)  # 4-chip hosts past one VM's 8 chips


def test_multi_host_placement_is_the_one_pod_placement_of_every_host():
    """What train_multihost_pack gets for a multi-host preset: each host's pod settings,
    the same place() gives a one-pod task; single-host presets are refused in one line."""
    for name, p in PRESETS.items():
        if p.hosts == 1:
            continue
        settings = multi_host_placement(name)
        assert settings["hosts"] == p.hosts > 1 and settings["preset"] == name
        keys = ("cpu", "memory", "accelerator", "accelerator_count")
        assert [settings[k] for k in keys] == [p.cpu, p.memory, p.accelerator, p.accelerator_count]
        assert settings["node_selectors"] == p.node_selectors
        assert settings["tolerations"] == [{k: v for k, v in vars(t).items() if v is not None}
                                           for t in p.tolerations]
        assert settings["env"] == {CPUS_ENV: p.cpu, "BATCHSCALE_PRESET": name}
        assert settings["timeout_seconds"] == p.pack_timeout_seconds
        assert ("exclusive_topology" in settings) == (p.accelerator == TPU_RESOURCE)
        assert None not in settings.values()
        assert json.loads(json.dumps(settings)) == settings  # a KFP constant: plain JSON
    with pytest.raises(ValueError, match="preset 'tpu-v5e-2x2' is single-host; multi-host presets: "
                                         "nvidia-h100-80gb-2x8, tpu-v5e-4x4, tpu-v6e-4x4"):
        multi_host_placement("tpu-v5e-2x2")


def test_compile_cli_reads_skaffold_images(tmp_path, capsys):
    images = tmp_path / "images.json"
    images.write_text(json.dumps({"builds": [{"imageName": n, "tag": t} for n, t in BUILT.items()]}))
    out = tmp_path / "p.yaml"
    assert main(["compile", "-o", str(out), "--preset", "tpu-v5e-2x2", "--images", str(images)]) == 0
    text = out.read_text()
    assert BUILT["batchscale-trainer-tpu"] in text and BUILT[LIGHT] in text
    assert ":dev" not in text


def test_images_file_errors_name_the_problem(tmp_path, capsys):
    partial = tmp_path / "light-only.json"
    partial.write_text(json.dumps({"builds": [{"imageName": LIGHT, "tag": BUILT[LIGHT]}]}))
    assert main(["compile", "-o", str(tmp_path / "p.yaml"), "--preset", "nvidia-l4",
                 "--images", str(partial)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "batchscale-trainer-gpu" in err[0] and "-p gpu" in err[0]

    typo = tmp_path / "typo.json"
    typo.write_text(json.dumps({"builds": [{"imageName": "batchscale-lite", "tag": "x"}]}))
    with pytest.raises(ValueError, match="unknown images.*batchscale-lite"):
        read_images_file(str(typo))
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not skaffold's --file-output"):
        read_images_file(str(tmp_path / "bad.json"))
    with pytest.raises(ValueError, match="not found"):
        read_images_file(str(tmp_path / "missing.json"))
    assert image_reference(LIGHT, None) == f"{LIGHT}:dev"


def test_available_cpus_follows_the_pod_request(monkeypatch):
    for value, cpus in [("6", 6), ("500m", 1), ("2500m", 2), ("100", 100)]:
        monkeypatch.setenv(CPUS_ENV, value)
        assert available_cpus() == cpus
    monkeypatch.delenv(CPUS_ENV)
    assert available_cpus() >= 1
