"""The check of a hardened pod (tests/pod_security.py) that the manifests' and the
TrainJob's tests use: it passes a pod that is hardened and names each missing field of
one that is not, wherever the pod spec sits in an object."""

from tests.pod_security import hardening_problems, pod_specs

HARDENED = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def test_a_hardened_pod_passes_and_each_gap_is_named():
    job = {"kind": "Job", "spec": {"template": {"spec": {
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "initContainers": [{"name": "setup", "securityContext": HARDENED}],
        "containers": [{"name": "main", "securityContext": HARDENED}]}}}}
    [spec] = pod_specs(job)
    assert hardening_problems(spec) == []
    spec["securityContext"] = {}
    spec["initContainers"][0]["securityContext"] = {"runAsNonRoot": True, "seccompProfile": {
        "type": "RuntimeDefault"}, "capabilities": {"drop": ["NET_RAW"]}}
    assert hardening_problems(spec) == [
        "initContainers/setup: allowPrivilegeEscalation is not false",
        "initContainers/setup: capabilities do not drop ALL",
        "containers/main: runAsNonRoot is not true",
        "containers/main: seccompProfile is not RuntimeDefault"]


def test_pod_specs_are_found_at_any_depth():
    jobset = {"spec": {"replicatedJobs": [{"template": {"spec": {"template": {"spec": {
        "containers": [{"name": "a"}]}}}}}, {"template": {"spec": {"template": {"spec": {
            "containers": [{"name": "b"}]}}}}}]}}
    assert [s["containers"][0]["name"] for s in pod_specs(jobset)] == ["a", "b"]
    assert pod_specs({"kind": "ConfigMap", "data": {"containers": "text"}}) == []
