"""A paper-size ImageNet study compiled for a multi-host preset (tpu-v5e-4x4: 16 chips on 4
hosts): its big batch sizes' packs go to light tasks that launch one TrainJob each over
every host, its small ones stay one-pod packs on the one-host sibling (tpu-v5e-2x2), and
the run stays small. The lanes are those the compiled pipeline's constants plan."""

import json

from batchscale.cli.main import main
from batchscale.core.presets import MIN_EXAMPLES_PER_CHIP
from batchscale.kube.trainjob_manifest import job_name, trainjob
from batchscale.pipelines.compiled_yaml import load_documents
from batchscale.pipelines.pipeline_size import size
from batchscale.rounds.stage_lanes import multi_host_rule, plan_lanes
from batchscale.search.lanes import MULTI_HOST, ONE_POD
from batchscale.store.layout import StudyStore
from batchscale.validation import parse_spec

BATCH_SIZES = [2**k for k in range(3, 17)]  # 8 ... 65,536: 14 batch sizes


def _compiled(tmp_path):
    out = tmp_path / "imagenet.yaml"
    assert main(["compile", "--workload", "imagenet/resnet_50", "--trials", "100",
                 "--batch-sizes", ",".join(map(str, BATCH_SIZES)), "--preset", "tpu-v5e-4x4",
                 "--pipeline-store", "gs://bucket/studies", "--queue", "tpu-queue",
                 "--output", str(out)]) == 0
    docs = load_documents(out.read_text())
    return out, docs[0], docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]


def test_big_batches_launch_trainjobs_small_ones_stay_single_pod(tmp_path):
    out, doc, k8s = _compiled(tmp_path)
    executors = doc["deploymentSpec"]["executors"]
    one_pod = executors["exec-train-pack"]["container"]["resources"]["accelerator"]
    assert (one_pod["resourceType"], one_pod["count"]) == ("google.com/tpu", "4")
    assert k8s["exec-train-pack"]["nodeSelector"]["labels"]["cloud.google.com/gke-tpu-topology"] == "2x2"
    launcher = executors["exec-train-multihost-pack"]["container"]
    assert "accelerator" not in launcher["resources"] and launcher["image"].startswith("batchscale-light")
    assert "nodeSelector" not in k8s["exec-train-multihost-pack"]

    # round 1 as the compiled constants plan it, on a fresh store
    [plan] = [t for c in doc["components"].values() for name, t in c.get("dag", {}).get("tasks", {}).items()
              if name == "plan-round"][:1]
    constants = {k: v["runtimeValue"]["constant"] for k, v in plan["inputs"]["parameters"].items()
                 if "runtimeValue" in v}
    raw = doc["root"]["inputDefinitions"]["parameters"]["study_spec"]["defaultValue"]
    spec = parse_spec({**raw, "store": str(tmp_path / "store")})
    planned = plan_lanes(spec, StudyStore(spec.store), 1, int(constants["pack_size"]),
                         int(constants["lanes"]), multi_host_rule(constants["multi_host_preset"]),
                         int(constants["multi_host_lanes"]), int(constants["multi_host_pack_size"]),
                         log=lambda *_: None)
    threshold = MIN_EXAMPLES_PER_CHIP * 16  # every chip of the 4x4 slice at least 64 examples
    spanning = {p["batch_size"] for lane in planned.multi_host for p in lane["packs"]}
    staying = {b for lane in planned.one_pod for p in lane["packs"] for b in [p["batch_size"]]}
    assert spanning == {b for b in BATCH_SIZES if b >= threshold} == {
        1024, 2048, 4096, 8192, 16384, 32768, 65536}
    assert staying == {b for b in BATCH_SIZES if b < threshold}
    assert len(planned.one_pod) == 16 and len(planned.multi_host) == 2
    assert {lane["kind"] for lane in planned.one_pod} == {ONE_POD}
    assert {lane["kind"] for lane in planned.multi_host} == {MULTI_HOST}
    trials = sum(len(p["trial_ids"]) for lane in planned.items for p in lane["packs"])
    assert trials == 100 * len(BATCH_SIZES)

    # one of those packs as the TrainJob its launcher creates: every host of the slice
    pack = planned.multi_host[0]["packs"][0]
    placement = json.loads(json.dumps(_launcher_input(doc, "placement")))
    job = trainjob(job_name(spec.to_dict(), pack), spec.to_dict(), pack, placement,
                   launcher_image := _launcher_input(doc, "image"), queue="tpu-queue")
    assert job["spec"]["trainer"]["numNodes"] == 4 and launcher_image.startswith("batchscale-trainer-tpu")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "tpu-queue"

    counted = size(str(out))
    assert counted.iterations <= 64 and counted.pods <= 256, counted


def _launcher_input(doc, name):
    for component in doc["components"].values():
        for task in component.get("dag", {}).get("tasks", {}).values():
            if task["componentRef"]["name"] == "comp-train-multihost-pack":
                return task["inputs"]["parameters"][name]["runtimeValue"]["constant"]
    raise AssertionError("no train-multihost-pack task")


def test_the_plan_pipeline_of_a_multi_host_preset_probes_on_its_one_host_sibling(tmp_path):
    """The plan's probe is one pod: on a multi-host preset it runs where that study's
    one-pod packs do (tpu-v5e-2x2), never as a lone pod asking for one host of a 4x4 slice
    (a multi-host slice's TPU runtime starts only with every host's pod)."""
    out = tmp_path / "plan.yaml"
    assert main(["plan", "--compile", str(out), "--preset", "tpu-v5e-4x4",
                 "--pipeline-store", "gs://bucket/studies"]) == 0
    docs = load_documents(out.read_text())
    probe = docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]["exec-plan-study"]
    assert probe["nodeSelector"]["labels"]["cloud.google.com/gke-tpu-topology"] == "2x2"
    env = {e["name"]: e["value"] for e in
           docs[0]["deploymentSpec"]["executors"]["exec-plan-study"]["container"]["env"]}
    assert env["BATCHSCALE_PRESET"] == "tpu-v5e-2x2"  # its step times priced as the sibling's
