"""What a hardened pod is, for the tests: the checks of the Pod Security Standards'
``restricted`` profile that batchscale promises (docs/gke.md, "Hardened pods") on any
Kubernetes object that holds a pod spec (a Pod, a Deployment's or Job's template, a
JobSet's or TrainJob runtime's replicated jobs, ...).

Each container (init containers too) runs as non-root and under the RuntimeDefault seccomp
profile, each said on the container or once on the pod; each says
``allowPrivilegeEscalation: false`` and drops ALL capabilities on the container.
"""

from __future__ import annotations

CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def pod_specs(obj) -> list[dict]:
    """Every pod spec inside ``obj`` (a dict holding a ``containers`` list), at any depth."""
    found = []
    if isinstance(obj, dict):
        if isinstance(obj.get("containers"), list):
            found.append(obj)
        for value in obj.values():
            found += pod_specs(value)
    elif isinstance(obj, list):
        for value in obj:
            found += pod_specs(value)
    return found


def hardening_problems(pod_spec: dict) -> list[str]:
    """What ``pod_spec`` lacks of a hardened pod, one entry per container and field."""
    pod = pod_spec.get("securityContext") or {}
    problems = []
    for kind in CONTAINER_LISTS:
        for container in pod_spec.get(kind) or []:
            own = container.get("securityContext") or {}
            name = f"{kind}/{container.get('name', '?')}"
            if own.get("runAsNonRoot", pod.get("runAsNonRoot")) is not True:
                problems.append(f"{name}: runAsNonRoot is not true")
            seccomp = own.get("seccompProfile") or pod.get("seccompProfile") or {}
            if seccomp.get("type") != "RuntimeDefault":
                problems.append(f"{name}: seccompProfile is not RuntimeDefault")
            if own.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{name}: allowPrivilegeEscalation is not false")
            if "ALL" not in ((own.get("capabilities") or {}).get("drop") or []):
                problems.append(f"{name}: capabilities do not drop ALL")
    return problems
