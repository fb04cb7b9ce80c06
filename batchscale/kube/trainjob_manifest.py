"""The job one multi-host pack runs as: a Kubeflow Trainer TrainJob, or a JobSet where
Trainer is absent. Plain dicts, no Kubernetes client (``trainjob_launch`` sends them).

Both describe the same pods: one per host of the preset (``placement``, made at compile
time by ``batchscale.pipelines.placement.multi_host_placement``), each running
``python -m batchscale.training.distributed_pack SPEC_JSON PACK_JSON`` in the trainer
image with the preset's requests, accelerator, node selectors and tolerations, and the
environment contract of the multi-process trainer:

- ``BATCHSCALE_COORDINATOR``: process 0's stable DNS name and port. A TrainJob is
  reconciled into a JobSet of the same name whose replicated job ``node`` runs one Indexed
  Job; JobSet gives pod ``<name>-node-0-<i>`` the hostname of that name in the subdomain
  ``<name>``, so process 0 is ``<name>-node-0-0.<name>`` (Trainer's JAX runtime sets the
  same address in ``JAX_COORDINATOR_ADDRESS``, on port 29500);
- ``BATCHSCALE_NUM_PROCESSES``: the hosts;
- ``BATCHSCALE_PROCESS_ID``: the pod's completion index (the Indexed Job's annotation).

Every pod is hardened: non-root, no privilege escalation, every capability dropped, the
RuntimeDefault seccomp profile (the images run as UID 1000). Labels name the study, batch
size, pack and KFP run; the Kueue queue label is set when a queue is named. The name is a
function of the study's store and the pack id only, so a retried or resubmitted task
finds the job an earlier attempt started.

Trainer v2.2 or newer: node selectors, tolerations and the security context reach the
pods through ``runtimePatches`` (v2.2 replaced ``podTemplateOverrides`` with it).
"""

from __future__ import annotations

import hashlib
import json
import re

TRAINER = ("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob")
JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
JAX_RUNTIME = "jax-distributed"  # Trainer's ClusterTrainingRuntime for JAX (v2.2+)
NODE = "node"  # the replicated job and container name of Trainer's runtimes; the JobSet's too
COORDINATOR_PORT = 29500  # Trainer's trainer port, which its JAX runtime opens
ENTRY = ("python", "-m", "batchscale.training.distributed_pack")
COORDINATOR_ENV = "BATCHSCALE_COORDINATOR"
NUM_PROCESSES_ENV = "BATCHSCALE_NUM_PROCESSES"
PROCESS_ID_ENV = "BATCHSCALE_PROCESS_ID"
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"  # on every pod, a TrainJob's too
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
EXCLUSIVE_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
PATCH_MANAGER = "batchscale.dev/train-multihost-pack"
PREFIX = "batchscale.dev/"
SPEC_DIGEST = PREFIX + "spec-sha256"

POD_SECURITY = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                      "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}


def job_name(spec: dict, pack: dict) -> str:
    """The job's name: ``bs-<batch size>-<12 hex>`` from the study's store and name and the
    pack id. Short enough for JobSet's pod hostnames (``<name>-node-0-<i>``, 63 at most)
    and an RFC 1035 label, as TrainJob requires."""
    key = json.dumps([spec.get("store"), spec.get("name"), pack["pack_id"]])
    return f"bs-{int(pack['batch_size'])}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def spec_digest(spec: dict) -> str:
    """What identifies the spec a job was created for: a running job of another spec (a
    study grown since) is replaced, not re-attached to."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def label_value(text: str) -> str:
    """``text`` as a label value: 63 characters of ``[A-Za-z0-9_.-]``, alphanumeric ends."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(text))[:63].strip("_.-")


def _labels(spec: dict, pack: dict, kfp_run: str) -> dict[str, str]:
    labels = {"app.kubernetes.io/managed-by": "batchscale", PREFIX + "study": spec.get("name", ""),
              PREFIX + "batch-size": str(pack["batch_size"]), PREFIX + "pack": pack["pack_id"]}
    if kfp_run:
        labels[PREFIX + "kfp-run"] = kfp_run
    return {k: label_value(v) for k, v in labels.items()}


def _metadata(name: str, spec: dict, pack: dict, placement: dict, kfp_run: str, queue: str,
              owners: list[dict]) -> dict:
    labels = _labels(spec, pack, kfp_run)
    if queue:
        labels[QUEUE_LABEL] = queue
    annotations = {PREFIX + "pack-id": pack["pack_id"], PREFIX + "store": str(spec.get("store", "")),
                   PREFIX + "preset": placement["preset"], SPEC_DIGEST: spec_digest(spec)}
    if kfp_run:
        annotations[PREFIX + "kfp-run"] = kfp_run
    meta = {"name": name, "labels": labels, "annotations": annotations}
    if owners:
        meta["ownerReferences"] = owners
    return meta


def _env(name: str, placement: dict) -> list[dict]:
    env = [{"name": k, "value": v} for k, v in placement["env"].items()]
    return env + [
        {"name": COORDINATOR_ENV, "value": f"{name}-{NODE}-0-0.{name}:{COORDINATOR_PORT}"},
        {"name": NUM_PROCESSES_ENV, "value": str(placement["hosts"])},
        {"name": PROCESS_ID_ENV, "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}}]


def _resources(placement: dict) -> dict:
    requests = {"cpu": placement["cpu"], "memory": placement["memory"]}
    limits = {k: placement[f"{k}_limit"] for k in ("cpu", "memory") if placement.get(f"{k}_limit")}
    if placement.get("accelerator"):
        requests[placement["accelerator"]] = limits[placement["accelerator"]] = \
            str(placement["accelerator_count"])
    return {"requests": requests, **({"limits": limits} if limits else {})}


def _args(spec: dict, pack: dict) -> list[str]:
    return [json.dumps(spec, sort_keys=True), json.dumps(pack, sort_keys=True)]


def _pod_spec(placement: dict, service_account: str | None) -> dict:
    pod = {"nodeSelector": dict(placement["node_selectors"]),
           "tolerations": [dict(t) for t in placement["tolerations"]],
           "securityContext": dict(POD_SECURITY)}
    if service_account:
        pod["serviceAccountName"] = service_account
    return pod


def _jobset_annotations(placement: dict) -> dict[str, str]:
    # A multi-host TPU slice is one node pool: each job gets one pool to itself, so its
    # pods never straddle two slices.
    topology = placement.get("exclusive_topology")
    return {EXCLUSIVE_TOPOLOGY: topology} if topology else {}


def trainjob(name: str, spec: dict, pack: dict, placement: dict, image: str, *, queue: str = "",
             kfp_run: str = "", service_account: str | None = None,
             owners: list[dict] | None = None) -> dict:
    """The TrainJob of one pack on Trainer's ``jax-distributed`` runtime."""
    group, version, _, kind = TRAINER
    meta = _metadata(name, spec, pack, placement, kfp_run, queue, owners or [])
    pod = {**_pod_spec(placement, service_account),
           "containers": [{"name": NODE, "securityContext": dict(CONTAINER_SECURITY)}]}
    job_template = {"metadata": {"labels": dict(meta["labels"])}, "spec": pod}
    jobset_meta = {"labels": dict(meta["labels"])}
    if _jobset_annotations(placement):
        jobset_meta["annotations"] = _jobset_annotations(placement)
    return {
        "apiVersion": f"{group}/{version}", "kind": kind, "metadata": meta,
        "spec": {
            "runtimeRef": {"name": JAX_RUNTIME, "apiGroup": group, "kind": "ClusterTrainingRuntime"},
            "activeDeadlineSeconds": int(placement["timeout_seconds"]),
            "trainer": {"image": image, "command": list(ENTRY), "args": _args(spec, pack),
                        "env": _env(name, placement), "numNodes": int(placement["hosts"]),
                        "resourcesPerNode": _resources(placement)},
            "runtimePatches": [{"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {
                "metadata": jobset_meta,
                "spec": {"replicatedJobs": [{"name": NODE, "template": {"spec": {
                    "template": job_template}}}]}}}}],
        },
    }


def jobset(name: str, spec: dict, pack: dict, placement: dict, image: str, *, queue: str = "",
           kfp_run: str = "", service_account: str | None = None,
           owners: list[dict] | None = None) -> dict:
    """The JobSet of one pack, where Trainer is absent: the same pods, one Indexed Job of
    ``hosts`` pods, no restart of its own (a failed job fails the task, whose KFP retry
    starts it again from the trials' checkpoints), as Trainer's JAX runtime does."""
    group, version, _, kind = JOBSET
    meta = _metadata(name, spec, pack, placement, kfp_run, queue, owners or [])
    meta["annotations"].update(_jobset_annotations(placement))
    hosts = int(placement["hosts"])
    container = {"name": NODE, "image": image, "command": list(ENTRY), "args": _args(spec, pack),
                 "env": _env(name, placement), "resources": _resources(placement),
                 "ports": [{"containerPort": COORDINATOR_PORT}],
                 "securityContext": dict(CONTAINER_SECURITY)}
    pod = {**_pod_spec(placement, service_account), "restartPolicy": "Never",
           "containers": [container]}
    return {
        "apiVersion": f"{group}/{version}", "kind": kind, "metadata": meta,
        "spec": {
            "network": {"enableDNSHostnames": True, "subdomain": name},
            "failurePolicy": {"maxRestarts": 0},
            "replicatedJobs": [{"name": NODE, "replicas": 1, "template": {
                "metadata": {"labels": dict(meta["labels"])},
                "spec": {"parallelism": hosts, "completions": hosts, "backoffLimit": 0,
                         "completionMode": "Indexed",
                         "activeDeadlineSeconds": int(placement["timeout_seconds"]),
                         "template": {"metadata": {"labels": dict(meta["labels"])},
                                      "spec": pod}}}}],
        },
    }


# Terminal and waiting conditions of each kind's status (True when they hold).
_DONE = {"TrainJob": ("Complete", "Failed", "Suspended"), "JobSet": ("Completed", "Failed", "Suspended")}


def outcome(obj: dict) -> tuple[str, str]:
    """(state, detail) of a TrainJob or JobSet from its status: ``succeeded``, ``failed``
    (detail: its reason and message), ``suspended`` (waiting for Kueue's admission, or
    suspended by hand) or ``running``."""
    done, failed, suspended = _DONE[obj["kind"]]
    held = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []
            if str(c.get("status")) == "True"}
    if failed in held:
        c = held[failed]
        return "failed", ": ".join(x for x in (c.get("reason"), c.get("message")) if x) or "failed"
    if done in held:
        return "succeeded", ""
    if suspended in held:
        return "suspended", held[suspended].get("message", "")
    return "running", ""
