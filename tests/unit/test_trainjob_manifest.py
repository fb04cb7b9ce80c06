"""The pure parts of a multi-host pack's job (batchscale.kube.trainjob_manifest): its name,
its labels, and what its status says. The whole manifest, sent by the real client, is
checked against the stand-in API in tests/integration/test_trainjob_stand_in.py."""

from __future__ import annotations

import re

import pytest

from batchscale.kube import trainjob_manifest as tm

SPEC = {"name": "imagenet-resnet50", "store": "gs://b/studies/imagenet-resnet50"}
PACK = {"pack_id": "b4096-t1-1", "batch_size": 4096, "trial_ids": [1]}


def test_the_name_is_the_study_and_pack_and_fits_every_limit():
    name = tm.job_name(SPEC, PACK)
    assert name == tm.job_name(dict(SPEC), dict(PACK))  # a retried task finds it
    assert re.fullmatch(r"bs-4096-[0-9a-f]{12}", name)
    assert len(f"{name}-node-0-15") <= 63  # JobSet's pod hostnames; TrainJob's RFC 1035 label
    others = {tm.job_name({**SPEC, "store": "gs://b/studies/other"}, PACK),
              tm.job_name(SPEC, {**PACK, "pack_id": "b4096-t2-2"}),
              tm.job_name({**SPEC, "name": "other"}, PACK)}
    assert name not in others and len(others) == 3
    assert tm.spec_digest(SPEC) == tm.spec_digest(dict(reversed(SPEC.items())))
    assert tm.spec_digest({**SPEC, "max_steps": {"4096": 2000}}) != tm.spec_digest(SPEC)


def test_label_values_are_what_kubernetes_accepts():
    assert tm.label_value("b2-t1-5+b8-t1-3") == "b2-t1-5_b8-t1-3"  # a mixed pack's id
    long = tm.label_value("x" * 70 + "-")
    assert len(long) == 63 and long.isalnum()
    assert tm.label_value("-study.") == "study"


def _job(kind, *conditions):
    return {"kind": kind, "status": {"conditions": [
        {"type": t, "status": s, "reason": "R", "message": "m"} for t, s in conditions]}}


@pytest.mark.parametrize("kind, conditions, state", [
    ("TrainJob", [], "running"),
    ("TrainJob", [("Created", "True")], "running"),
    ("TrainJob", [("Suspended", "True")], "suspended"),
    ("TrainJob", [("Suspended", "False"), ("Complete", "True")], "succeeded"),
    ("TrainJob", [("Complete", "False"), ("Failed", "True")], "failed"),
    ("JobSet", [("Completed", "True")], "succeeded"),
    ("JobSet", [("Failed", "True")], "failed"),
    ("JobSet", [("Complete", "True")], "running"),  # TrainJob's word means nothing to JobSet
])
def test_outcome_reads_each_kinds_own_conditions(kind, conditions, state):
    found, detail = tm.outcome(_job(kind, *conditions))
    assert found == state
    assert detail == {"failed": "R: m", "suspended": "m"}.get(state, "")


def _validate(obj: dict):
    import kubernetes_validate

    kubernetes_validate.validate(obj, "1.35.0", strict=True)  # unknown fields refused


def test_the_pods_and_jobs_inside_both_kinds_are_valid_kubernetes_objects():
    """No CRD schema of Trainer or JobSet ships here, but what they embed is Kubernetes':
    the JobSet's Job template, and the TrainJob's pod patch with its trainer container
    (env, resources) are checked against Kubernetes' own schemas, strictly."""
    from batchscale.pipelines.placement import multi_host_placement

    for preset in ("tpu-v5e-4x4", "nvidia-h100-80gb-2x8"):
        placement = multi_host_placement(preset)
        name = tm.job_name(SPEC, PACK)
        job = tm.jobset(name, SPEC, PACK, placement, "img", queue="q", kfp_run="r")
        (node,) = job["spec"]["replicatedJobs"]
        _validate({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"{name}-node-0"},
                   "spec": node["template"]["spec"]})
        train = tm.trainjob(name, SPEC, PACK, placement, "img", queue="q", kfp_run="r")
        trainer = train["spec"]["trainer"]
        (patch,) = train["spec"]["runtimePatches"]
        (rjob,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        pod = rjob["template"]["spec"]["template"]
        (container,) = pod["spec"]["containers"]
        container = {**container, "image": trainer["image"], "command": trainer["command"],
                     "args": trainer["args"], "env": trainer["env"],
                     "resources": trainer["resourcesPerNode"]}
        _validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", **pod["metadata"]},
                   "spec": {**pod["spec"], "containers": [container]}})
        for obj in (job, train):
            _validate({"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj["metadata"]})
