"""A multi-host pack's task against a STAND-IN Kubernetes API (tests/stand_ins/kube_api.py):
the real ``kubernetes`` client, configured from a kubeconfig as outside a cluster, creates
the TrainJob (or the JobSet where Trainer is absent) with the preset's shape and placement,
follows it to its end with process 0's log in the task's log, fails with a failed job,
re-attaches to a running one instead of starting a second, and deletes it when the task
gets SIGTERM. No controller runs: the test writes the statuses Trainer or JobSet would.
(No ``from __future__ import annotations``: KFP reads the pipeline's annotations as types.)"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from batchscale.components.train_multihost_pack import train_multihost_pack
from batchscale.core.errors import CommandFailed
from batchscale.kube import trainjob_manifest as tm
from batchscale.pipelines.placement import PRESETS, multi_host_placement
from batchscale.validation import default_spec_dict, resolve_spec
from tests.stand_ins.kube_api import JOBSET, TRAINER, KubeApiStandIn, kubeconfig

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "team-a"
IMAGE = "us-docker.pkg.dev/p/r/batchscale-trainer-tpu:abc"
PACK = {"pack_id": "b1024-t1-1", "batch_size": 1024, "trial_ids": [1]}
WORKFLOW = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "name": "run-x", "uid": "wf-uid"}


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """Start a stand-in (Trainer and JobSet served unless a test narrows it) and point the
    client at it; the task's own pod is there, owned by the run's Workflow."""
    def start(groups=(TRAINER, JOBSET)):
        api = KubeApiStandIn(groups).__enter__()
        stack.append(api)
        config = tmp_path / "kubeconfig"
        config.write_text(kubeconfig(api.url, NAMESPACE))
        monkeypatch.setenv("KUBECONFIG", str(config))
        monkeypatch.setenv("HOSTNAME", "task-pod")
        monkeypatch.setenv("BATCHSCALE_TRAINJOB_POLL_SECONDS", "0.05")
        api.add_pod("task-pod", NAMESPACE, owners=[WORKFLOW], service_account="batchscale-runner")
        return api

    stack = []
    yield start
    for api in stack:
        api.__exit__()


def _args(tmp_path, preset="tpu-v5e-4x4"):
    return {"study_spec": default_spec_dict(), "lane": {"lane": 1, "kind": "multi_host", "packs": [PACK]},
            "store_root": str(tmp_path / "store"),
            "placement": multi_host_placement(preset), "image": IMAGE, "queue": "team-a-queue",
            "kfp_run": "run-123"}


def _in_thread(args):
    """The task, run in a thread while the test plays the controllers; its outcome."""
    out = {}

    def task():
        try:
            out["line"] = train_multihost_pack.python_func(**args)
        except BaseException as e:  # noqa: BLE001 - the test asserts on it
            out["error"] = e

    thread = threading.Thread(target=task, daemon=True)
    thread.start()
    return thread, out


def _wait(condition, what, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _env(container_env):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container_env}


def test_trainjob_carries_the_pack_and_its_placement_and_follows_it_to_success(cluster, tmp_path, capsys):
    api = cluster()
    args = _args(tmp_path)
    thread, out = _in_thread(args)
    _wait(lambda: api.objects, "the TrainJob")
    (name, job), = api.objects.items()
    spec = resolve_spec(args["study_spec"], args["store_root"]).to_dict()
    preset = PRESETS["tpu-v5e-4x4"]
    assert name == tm.job_name(spec, PACK) and len(name) <= 40
    assert (job["apiVersion"], job["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    assert job["spec"]["runtimeRef"] == {"name": "jax-distributed", "apiGroup": "trainer.kubeflow.org",
                                         "kind": "ClusterTrainingRuntime"}
    assert job["spec"]["activeDeadlineSeconds"] == preset.pack_timeout_seconds
    trainer = job["spec"]["trainer"]
    assert trainer["numNodes"] == preset.hosts == 4 and trainer["image"] == IMAGE
    assert trainer["command"] == ["python", "-m", "batchscale.training.distributed_pack"]
    assert [json.loads(a) for a in trainer["args"]] == [spec, PACK]
    assert trainer["resourcesPerNode"] == {
        "requests": {"cpu": "100", "memory": "170Gi", "google.com/tpu": "4"},
        "limits": {"google.com/tpu": "4"}}
    env = _env(trainer["env"])
    assert env["BATCHSCALE_COORDINATOR"] == f"{name}-node-0-0.{name}:29500"
    assert env["BATCHSCALE_NUM_PROCESSES"] == "4"
    assert env["BATCHSCALE_PROCESS_ID"] == {"fieldRef": {"fieldPath": tm.COMPLETION_INDEX}}
    assert env["BATCHSCALE_PRESET"] == "tpu-v5e-4x4" and env["BATCHSCALE_CPUS"] == "100"

    (patch,) = job["spec"]["runtimePatches"]
    template = patch["trainingRuntimeSpec"]["template"]
    assert template["metadata"]["annotations"] == {tm.EXCLUSIVE_TOPOLOGY: "cloud.google.com/gke-nodepool"}
    (node,) = template["spec"]["replicatedJobs"]
    pod = node["template"]["spec"]["template"]["spec"]
    assert node["name"] == "node" and pod["nodeSelector"] == preset.node_selectors
    assert pod["nodeSelector"]["cloud.google.com/gke-tpu-topology"] == "4x4"
    assert {t["key"] for t in pod["tolerations"]} == {"google.com/tpu", "cloud.google.com/gke-spot"}
    assert pod["serviceAccountName"] == "batchscale-runner"
    assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["containers"] == [{"name": "node", "securityContext": {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"}}}]

    meta = job["metadata"]
    assert meta["ownerReferences"] == [WORKFLOW]
    assert meta["labels"]["kueue.x-k8s.io/queue-name"] == "team-a-queue"
    assert {k.removeprefix("batchscale.dev/"): v for k, v in meta["labels"].items()
            if k.startswith("batchscale.dev/")} == {
        "study": spec["name"], "batch-size": "1024", "pack": "b1024-t1-1", "kfp-run": "run-123"}

    api.set_state(name, "running", log="trial 1: step 100\ntrial 1: step 200\n")
    printed = []
    _wait(lambda: printed.append(capsys.readouterr().out) or "step 200" in "".join(printed),
          "process 0's log")
    api.set_state(name, "succeeded")
    thread.join(10)
    printed.append(capsys.readouterr().out)
    lines = "".join(printed).splitlines()
    assert f"created TrainJob {name}: b1024-t1-1" in lines
    assert lines.index(f"--- log of process 0 ({name}-node-0-0) ---") < lines.index("| trial 1: step 100") \
        < lines.index("| trial 1: step 200") < lines.index(f"TrainJob {name}: succeeded")
    assert "error" not in out, out.get("error")
    assert out["line"].startswith(f"TrainJob {name}: pack b1024-t1-1 trained on 4 hosts")
    assert [r["method"] for r in api.requests if r["path"].endswith(f"/trainjobs/{name}")][-1] == "DELETE"
    assert not api.objects  # nothing of the pack stays in the cluster


def test_jobset_where_trainer_is_absent_and_a_failed_job_fails_the_task(cluster, tmp_path):
    api = cluster(groups=(JOBSET,))
    thread, out = _in_thread(_args(tmp_path, "nvidia-h100-80gb-2x8"))
    _wait(lambda: api.objects, "the JobSet")
    (name, job), = api.objects.items()
    assert (job["apiVersion"], job["kind"]) == ("jobset.x-k8s.io/v1alpha2", "JobSet")
    assert job["spec"]["network"] == {"enableDNSHostnames": True, "subdomain": name}
    (node,) = job["spec"]["replicatedJobs"]
    job_spec = node["template"]["spec"]
    assert (node["name"], node["replicas"], job_spec["parallelism"], job_spec["completions"],
            job_spec["completionMode"], job_spec["backoffLimit"]) == ("node", 1, 2, 2, "Indexed", 0)
    pod = job_spec["template"]["spec"]
    assert pod["nodeSelector"]["cloud.google.com/gke-accelerator"] == "nvidia-h100-80gb"
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert _env(container["env"])["BATCHSCALE_COORDINATOR"] == f"{name}-node-0-0.{name}:29500"
    assert tm.EXCLUSIVE_TOPOLOGY not in job["metadata"]["annotations"]  # GPU nodes, not a slice

    api.set_state(name, "failed", message="pod node-0-1 was OOMKilled")
    thread.join(10)
    error = out["error"]
    assert isinstance(error, CommandFailed) and "\n" not in str(error)
    assert f"JobSet {name} failed: Test: pod node-0-1 was OOMKilled" in str(error)
    assert not api.objects


def test_a_lane_trains_its_packs_one_job_after_another_and_fails_after_the_last(cluster, tmp_path):
    api = cluster()
    second = {"pack_id": "b2048-t1-1", "batch_size": 2048, "trial_ids": [1]}
    args = {**_args(tmp_path), "lane": {"lane": 3, "kind": "multi_host", "packs": [PACK, second]}}
    spec = resolve_spec(args["study_spec"], args["store_root"]).to_dict()
    first_name, second_name = tm.job_name(spec, PACK), tm.job_name(spec, second)
    thread, out = _in_thread(args)
    _wait(lambda: first_name in api.objects, "the first pack's TrainJob")
    assert second_name not in api.objects  # one job at a time
    api.set_state(first_name, "failed", message="process 2 lost its host")
    _wait(lambda: second_name in api.objects, "the second pack's TrainJob")
    api.set_state(second_name, "succeeded")
    thread.join(10)
    error = str(out["error"])
    assert error.startswith("1 of 2 multi-host packs failed: b1024-t1-1 (TrainJob ") and "b2048" not in error
    assert not api.objects


def test_a_lane_starts_no_job_for_a_pack_whose_trials_are_finished(cluster, tmp_path):
    """A retried or resubmitted lane: the store says the first pack is done, so only the
    second gets a job (a multi-host job holds a whole slice while it starts)."""
    from batchscale.search.packs import pack_trials
    from batchscale.store.layout import StudyStore

    api = cluster()
    second = {"pack_id": "b2048-t1-1", "batch_size": 2048, "trial_ids": [1]}
    args = {**_args(tmp_path), "lane": {"lane": 2, "kind": "multi_host", "packs": [PACK, second]}}
    study = resolve_spec(args["study_spec"], args["store_root"])
    store = StudyStore(study.store)
    store.register_study(study, log=lambda *_: None)
    [trial] = pack_trials(study, tm_pack(PACK))
    store.write_metadata(study, trial, {"trial_id": 1, "status": "COMPLETE", "stop_reason": "goal",
                                        "steps": 10, "max_steps": study.max_steps[1024]})
    spec = study.to_dict()
    thread, out = _in_thread(args)
    _wait(lambda: tm.job_name(spec, second) in api.objects, "the second pack's TrainJob")
    assert tm.job_name(spec, PACK) not in api.objects and len(api.created()) == 1
    api.set_state(tm.job_name(spec, second), "succeeded")
    thread.join(10)
    assert "error" not in out, out


def tm_pack(pack: dict):
    from batchscale.core.spec import PackSpec

    return PackSpec.from_dict(pack)


@pytest.mark.parametrize("found, replaced", [("running", False), ("failed", True),
                                             ("other spec", True)])
def test_a_retried_task_reattaches_to_its_running_job_and_replaces_any_other(cluster, tmp_path,
                                                                            found, replaced):
    api = cluster()
    args = _args(tmp_path)
    spec = resolve_spec(args["study_spec"], args["store_root"]).to_dict()
    name = tm.job_name(spec, PACK)
    earlier = tm.trainjob(name, spec, PACK, args["placement"], IMAGE)
    if found == "other spec":
        earlier["metadata"]["annotations"][tm.SPEC_DIGEST] = "0" * 16
    earlier["metadata"]["namespace"] = NAMESPACE
    api.objects[name] = earlier
    api.set_state(name, "failed" if found == "failed" else "running")
    thread, out = _in_thread(args)
    if replaced:
        _wait(lambda: api.created("POST"), "the new TrainJob")
    else:
        _wait(lambda: any(r["path"].endswith("/pods") for r in api.requests), "the task following")
    api.set_state(name, "succeeded")
    thread.join(10)
    assert "error" not in out, out.get("error")
    methods = [r["method"] for r in api.requests if r["path"].endswith(f"/trainjobs/{name}")
               or r["path"].endswith("/trainjobs")]
    if replaced:  # the old one deleted before one is created
        assert methods.index("DELETE") < methods.index("POST")
    else:
        assert "POST" not in methods


def test_a_few_failed_reads_do_not_lose_the_job_but_a_lost_api_fails_the_task(cluster, tmp_path):
    api = cluster()
    thread, out = _in_thread(_args(tmp_path))
    _wait(lambda: api.objects, "the TrainJob")
    (name,) = api.objects
    api.set_state(name, "running")
    api.fail_reads(3)  # an API server restarting: the task reads again
    _wait(lambda: api.failing_reads == 0, "the failed reads")
    api.set_state(name, "succeeded")
    thread.join(10)
    assert "line" in out, out.get("error")

    thread, out = _in_thread(_args(tmp_path))
    _wait(lambda: api.objects, "the second TrainJob")
    api.fail_reads(100)
    thread.join(10)
    assert isinstance(out["error"], CommandFailed)
    assert str(out["error"]).startswith(f"lost the Kubernetes API while following TrainJob {name}: ")


def test_a_cluster_without_trainer_or_jobset_is_refused_in_one_line(cluster, tmp_path):
    api = cluster(groups=())
    with pytest.raises(CommandFailed, match=r"neither Kubeflow Trainer .* nor JobSet") as e:
        train_multihost_pack.python_func(**_args(tmp_path))
    assert "\n" not in str(e.value) and not api.created("POST")


def test_sigterm_deletes_the_job_and_the_task_exits_143(cluster, tmp_path):
    """A cancelled run: the task process gets SIGTERM while it follows the job."""
    api = cluster()
    args = json.dumps(_args(tmp_path))
    code = ("import json, sys\n"
            "from batchscale.components.train_multihost_pack import train_multihost_pack as task\n"
            "task.python_func(**json.loads(sys.argv[1]))\n")
    proc = subprocess.Popen([sys.executable, "-c", code, args], cwd=REPO, env=dict(os.environ),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait(lambda: api.objects, "the TrainJob", seconds=30)
        (name,) = api.objects
        api.set_state(name, "running", log="trial 1: step 100\n")
        _wait(lambda: any("/log" in r["path"] for r in api.requests), "the log stream")
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 143, output
    deletes = [r for r in api.requests if r["method"] == "DELETE"]
    assert [r["path"].rsplit("/", 1)[1] for r in deletes] == [name]
    assert deletes[0]["body"]["propagationPolicy"] == "Foreground"
    assert "task stopped (SIGTERM)" in output and not api.objects


def test_the_component_compiles_with_its_placement_as_a_constant(tmp_path):
    """How the pipeline uses it: the placement fixed at compile time, the run's id from
    KFP's placeholder; the task runs in the light image and asks for no accelerator."""
    import yaml
    from kfp import compiler, dsl

    from batchscale.core.images import LIGHT_IMAGE

    @dsl.pipeline(name="multihost-pack")
    def pipeline(study_spec: dict, lane: dict, store_root: str):
        train_multihost_pack(study_spec=study_spec, lane=lane, store_root=store_root,
                             placement=multi_host_placement("tpu-v6e-4x4"), image=IMAGE,
                             kfp_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER)

    path = tmp_path / "p.yaml"
    compiler.Compiler().compile(pipeline, str(path))
    doc = yaml.safe_load(path.read_text())
    (executor,) = doc["deploymentSpec"]["executors"].values()
    assert executor["container"]["image"] == LIGHT_IMAGE and "resources" not in executor["container"]
    inputs = doc["root"]["dag"]["tasks"]["train-multihost-pack"]["inputs"]["parameters"]
    assert inputs["placement"]["runtimeValue"]["constant"]["hosts"] == 4
    assert inputs["kfp_run"]["runtimeValue"]["constant"] == "{{$.pipeline_job_uuid}}"


def test_sigterm_while_the_task_lists_process_0s_pod_still_deletes_the_job(cluster, tmp_path):
    """SIGTERM that lands while the task asks for process 0's pod (a slow API server) is
    not taken for a failure to find the pod: the job is deleted and the task exits 143,
    as at any other moment (it used to be swallowed, the task following a job whose run
    was cancelled)."""
    from batchscale.kube.trainjob_launch import run_multihost_pack

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("SIGTERM's handler is installed in the main thread only")
    api = cluster()
    args = _args(tmp_path)
    spec = resolve_spec(args["study_spec"], args["store_root"]).to_dict()
    main = threading.main_thread().ident

    def controller():
        _wait(lambda: api.objects, "the TrainJob")
        (name,) = api.objects
        api.pod_list_seconds = 1.0
        api.set_state(name, "running")
        lists = len([r for r in api.requests if r["path"].endswith("/pods")])
        _wait(lambda: len([r for r in api.requests if r["path"].endswith("/pods")]) > lists,
              "a list of pods")  # answered a second from now: the task waits in that call
        signal.pthread_kill(main, signal.SIGTERM)
        deadline = time.monotonic() + 3.0
        while name in api.objects and time.monotonic() < deadline:
            time.sleep(0.02)
        if name in api.objects:  # the signal was lost: let the task end
            api.set_state(name, "succeeded")

    thread = threading.Thread(target=controller, daemon=True)
    thread.start()
    with pytest.raises(SystemExit) as stopped:
        run_multihost_pack(spec, PACK, args["placement"], IMAGE, poll=0.05, log=lambda *_: None)
    thread.join(10)
    assert stopped.value.code == 143
    assert not api.objects and [r["method"] for r in api.requests].count("DELETE") == 1
