"""manifests/: every overlay builds with every kustomize here (pykustomize and/or ``kubectl
kustomize``) and they agree. Each built object is valid: built-in kinds against the
Kubernetes JSON schemas of kubernetes-validate in strict mode (unknown fields refused),
for 1.35.0, a current minor, and for the newest the package ships (1.37 at the time of
writing), so an API removed later shows too; Config Connector kinds against the pydantic
model generated from their published CRD. The settings in base/settings.env reach every
field that needs them; node pools are spot, from zero, tainted; the Google service account
gets access to the store's bucket only, and the Kubeflow Pipelines UI's service account
may read that bucket and nothing else. Any object that holds a pod spec is hardened
(tests/pod_security.py); today the manifests hold none: the pods are KFP's.
"""

from __future__ import annotations

import functools
import importlib
import re
import shutil
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from batchscale.pipelines.gke_settings import (
    DERIVED_KEYS,
    KFP_UI_KSA,
    derive,
    kfp_ui_member,
    parse_settings,
    render_settings,
)
from batchscale.pipelines.placement import PRESETS
from tests.kustomize_build import kustomize_builds
from tests.pod_security import hardening_problems, pod_specs

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
OVERLAYS = ("cpu", "gpu", "tpu")
K8S_VERSIONS = ("1.35.0", kubernetes_validate.latest_version())
CC_GROUP = ".cnrm.cloud.google.com"
CLUSTER_SCOPED = {"PriorityClass"}
DEFAULTS = ("example-project", "us-central1", "batchscale", "example-project-batchscale-store")
DEFAULT_NUMBER = "123456789012"  # the placeholder project number in base/settings.env
UI_BINDING = "batchscale-store-kfp-ui-viewer"

GPU_POOLS = {  # node pool -> (machine type, accelerator type, GPUs per node)
    "batchscale-nvidia-l4": ("g2-standard-8", "nvidia-l4", 1),
    "batchscale-nvidia-a100-80gb": ("a2-ultragpu-1g", "nvidia-a100-80gb", 1),
    "batchscale-nvidia-h100-80gb": ("a3-highgpu-1g", "nvidia-h100-80gb", 1),
    "batchscale-nvidia-h100-80gb-1x8": ("a3-highgpu-8g", "nvidia-h100-80gb", 8),
    "batchscale-nvidia-h100-80gb-2x8": ("a3-highgpu-8g", "nvidia-h100-80gb", 8),
}
TPU_POOLS = {  # node pool -> (machine type, topology of a multi-host slice, else None)
    "batchscale-tpu-v5e-1x1": ("ct5lp-hightpu-1t", None),
    "batchscale-tpu-v5e-2x2": ("ct5lp-hightpu-4t", None),
    "batchscale-tpu-v5e-2x4": ("ct5lp-hightpu-8t", None),
    "batchscale-tpu-v5e-4x4": ("ct5lp-hightpu-4t", "4x4"),
    "batchscale-tpu-v6e-2x2": ("ct6e-standard-4t", None),
    "batchscale-tpu-v6e-4x4": ("ct6e-standard-4t", "4x4"),
}
SPOT_TAINT = ("cloud.google.com/gke-spot", "true", "NO_SCHEDULE")
TAINTS = {"gpu": {("nvidia.com/gpu", "present", "NO_SCHEDULE"), SPOT_TAINT},
          "tpu": {("google.com/tpu", "present", "NO_SCHEDULE"), SPOT_TAINT}}


def _key(obj: dict) -> tuple:
    meta = obj["metadata"]
    return obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"]


def _agreed(path: Path) -> list[dict]:
    """The objects of one build, after checking every implementation emits the same ones."""
    builds = kustomize_builds(path)
    by_impl = {name: sorted(objs, key=_key) for name, objs in builds.items()}
    (first, objs), *others = by_impl.items()
    for name, other in others:
        assert other == objs, f"{path}: {name} and {first} build different objects"
    return objs


@functools.cache
def _built(overlay: str) -> tuple[dict, ...]:
    return tuple(_agreed(MANIFESTS / "overlays" / overlay))


def _one(objs, kind: str, name: str | None = None) -> dict:
    found = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def _pools(objs) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == "ContainerNodePool"}


def _cc_model(obj: dict):
    """The pydantic model of a Config Connector kind, checked to be for its API version."""
    version = obj["apiVersion"].partition("/")[2]
    try:
        module = importlib.import_module(f"cnrm_pydantic_models.{obj['kind'].lower()}")
    except ModuleNotFoundError:
        module = None
    if module is None:
        pytest.fail(f"{obj['kind']} ({obj['apiVersion']}): no cnrm_pydantic_models model", pytrace=False)
    header = Path(module.__file__).read_text()[:300]
    assert f"{obj['kind'].lower()}_{version}.json" in header, f"{obj['kind']}: model is not {version}"
    return module.Model


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_builds_the_same_everywhere_and_validates(overlay):
    objs = _built(overlay)  # fails if the implementations disagree
    assert objs
    for obj in objs:
        where = f"{overlay}: {obj['kind']}/{obj['metadata']['name']}"
        if obj["apiVersion"].partition("/")[0].endswith(CC_GROUP):
            _cc_model(obj).model_validate(obj)
            continue
        for version in K8S_VERSIONS:
            problem = None
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.SchemaNotFoundError:
                problem = f"no Kubernetes {version} schema and not a Config Connector kind"
            except kubernetes_validate.ValidationError as e:
                problem = f"Kubernetes {version}: {'.'.join(map(str, e.path)) or '(top)'}: {e.message}"
            if problem:  # outside the except: no chained jsonschema dump in the report
                pytest.fail(f"{where}: {problem}", pytrace=False)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_pod_the_manifests_hold_is_hardened(overlay):
    """Non-root, seccomp RuntimeDefault, no privilege escalation, ALL capabilities dropped,
    on every pod spec of every object (a Deployment, a Job, a JobSet, a training runtime
    added here later is checked as it comes). Today the overlays create no pod: KFP and
    Argo create the run's pods (docs/gke.md, "Hardened pods")."""
    objs = _built(overlay)
    problems = [f"{o['kind']}/{o['metadata']['name']}: {p}" for o in objs for spec in pod_specs(o)
                for p in hardening_problems(spec)]
    assert not problems, problems


def test_overlays_share_the_base_and_only_add_node_pools():
    base = {_key(o) for o in _built("cpu")}
    assert {k[1] for k in base} == {"ServiceAccount", "Role", "RoleBinding", "ConfigMap", "PriorityClass",
                                    "IAMServiceAccount", "IAMPolicyMember", "StorageBucket"}
    for overlay, names in (("gpu", GPU_POOLS), ("tpu", TPU_POOLS)):
        objs = _built(overlay)
        assert {_key(o) for o in objs if o["kind"] != "ContainerNodePool"} == base
        assert set(_pools(objs)) == set(names)


def test_settings_configmap_is_not_emitted_and_defaults_are_placeholders():
    for overlay in OVERLAYS:
        objs = _built(overlay)
        assert [o["metadata"]["name"] for o in objs if o["kind"] == "ConfigMap"] == ["kfp-launcher"]
        for obj in objs:
            assert "config.kubernetes.io/local-config" not in obj["metadata"].get("annotations", {})
    text = (MANIFESTS / "base" / "settings.env").read_text()
    assert text == render_settings(*DEFAULTS, project_number=DEFAULT_NUMBER)


@pytest.mark.parametrize("overlay", ["gpu", "tpu"])
def test_node_pools_spot_from_zero_tainted(overlay):
    pools = _pools(_built(overlay))
    for name, pool in pools.items():
        spec, node = pool["spec"], pool["spec"]["nodeConfig"]
        assert node["spot"] is True and "preemptible" not in node, name
        scaling = spec["autoscaling"]
        assert scaling.get("totalMinNodeCount", scaling.get("minNodeCount")) == 0, name
        assert 1 <= scaling.get("totalMaxNodeCount", scaling.get("maxNodeCount", 0)) <= 8, name
        assert scaling["locationPolicy"] == "ANY"
        assert spec.get("initialNodeCount", 0) == 0
        assert {(t["key"], t["value"], t["effect"]) for t in node["taint"]} == TAINTS[overlay], name
        assert spec["management"] == {"autoRepair": True, "autoUpgrade": True}
        assert node["oauthScopes"] == ["https://www.googleapis.com/auth/cloud-platform"]
        assert node["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
        if overlay == "gpu":
            machine, accelerator, count = GPU_POOLS[name]
            driver = {"gpuDriverVersion": "LATEST"}
            assert node["guestAccelerator"] == [
                {"type": accelerator, "count": count, "gpuDriverInstallationConfig": driver}]
        else:
            machine, topology = TPU_POOLS[name]
            assert "guestAccelerator" not in node
            if topology:  # a multi-host slice: one pool, its hosts placed together
                assert spec["placementPolicy"] == {"type": "COMPACT", "tpuTopology": topology}
                hosts = PRESETS[name.removeprefix("batchscale-")].hosts
                assert hosts == spec["autoscaling"]["totalMaxNodeCount"]  # one slice
            else:
                assert "placementPolicy" not in spec  # single host
        assert node["machineType"] == machine


def test_node_pools_match_the_placement_presets():
    """Each accelerator preset has its node pool (batchscale-<preset>), with the preset's
    machine type, the accelerator its node selector names, and taints it tolerates."""
    pools = {**_pools(_built("gpu")), **_pools(_built("tpu"))}
    assert {f"batchscale-{p}" for p, preset in PRESETS.items() if preset.accelerator} == set(pools)
    for name, pool in pools.items():
        preset, node = PRESETS[name.removeprefix("batchscale-")], pool["spec"]["nodeConfig"]
        assert preset.machine_type == node["machineType"], name
        for accelerator in node.get("guestAccelerator", []):
            assert preset.node_selectors["cloud.google.com/gke-accelerator"] == accelerator["type"]
        for taint in node["taint"]:
            assert any(t.key == taint["key"] and t.effect == "NoSchedule"
                       and (t.operator == "Exists" or t.value == taint["value"])
                       for t in preset.tolerations), f"{name}: preset does not tolerate {taint}"


def test_the_runner_may_launch_trainjobs_and_nothing_more():
    """The light task of a multi-host pack creates, follows and deletes its TrainJob or
    JobSet and reads process 0's log with the run's service account: exactly those
    verbs, in the runs' namespace, bound to batchscale-runner."""
    objs = _built("cpu")
    role = _one(objs, "Role", "batchscale-trainjobs")
    granted = {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"]
               for resource in rule["resources"] for verb in rule["verbs"]}
    jobs = {(g, r, v) for g, r in (("trainer.kubeflow.org", "trainjobs"), ("jobset.x-k8s.io", "jobsets"))
            for v in ("create", "get", "list", "watch", "delete")}
    assert granted == jobs | {("", "pods", "get"), ("", "pods", "list"), ("", "pods/log", "get")}
    binding = _one(objs, "RoleBinding", "batchscale-runner-trainjobs")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "batchscale-trainjobs"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "batchscale-runner",
                                    "namespace": "kubeflow"}]
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "kubeflow"
    assert not [o for o in objs if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]


def test_gsa_gets_the_bucket_and_workload_identity_only():
    objs = _built("gpu")
    kinds = {o["kind"] for o in objs}
    assert not kinds & {"IAMPolicy", "IAMPartialPolicy", "IAMAuditConfig", "IAMCustomRole"}
    members = {o["metadata"]["name"]: o["spec"] for o in objs if o["kind"] == "IAMPolicyMember"}
    assert set(members) == {"batchscale-workload-identity", "batchscale-store-object-admin", UI_BINDING}
    gsa = _one(objs, "IAMServiceAccount")["metadata"]["name"]
    bucket = _one(objs, "StorageBucket")
    wi, store = members["batchscale-workload-identity"], members["batchscale-store-object-admin"]
    assert wi["role"] == "roles/iam.workloadIdentityUser"
    assert wi["resourceRef"] == {"kind": "IAMServiceAccount", "name": gsa}
    assert store["role"] == "roles/storage.objectAdmin"
    assert store["resourceRef"] == {"kind": "StorageBucket", "name": bucket["metadata"]["name"]}
    assert store["memberFrom"] == {"serviceAccountRef": {"name": gsa}} and "member" not in store
    assert bucket["spec"]["uniformBucketLevelAccess"] is True
    assert bucket["spec"]["publicAccessPrevention"] == "enforced"


IAM_KINDS = {"IAMPolicyMember", "IAMPolicy", "IAMPartialPolicy", "IAMAuditConfig"}
# What the KFP UI may hold on the store: read objects, nothing else. objectViewer is
# storage.objects.get and .list; the UI's GCS handler lists an artifact's key as a prefix,
# then downloads what matched, so legacyObjectReader (get only) would not do.
UI_ROLE = "roles/storage.objectViewer"
WRITE_ROLES = {"roles/storage.objectAdmin", "roles/storage.objectCreator", "roles/storage.objectUser",
               "roles/storage.admin", "roles/storage.legacyBucketWriter",
               "roles/storage.legacyBucketOwner", "roles/storage.legacyObjectOwner",
               "roles/owner", "roles/editor"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_kfp_ui_reads_the_store_bucket_and_nothing_else(overlay):
    """The Kubeflow Pipelines UI (KSA ml-pipeline-ui in KFP's namespace) gets one grant:
    read-only on the store's bucket, through its Workload Identity Federation principal."""
    objs = _built(overlay)
    ui = kfp_ui_member(DEFAULTS[0], DEFAULT_NUMBER, "kubeflow")
    assert ui == ("principal://iam.googleapis.com/projects/123456789012/locations/global/"
                  "workloadIdentityPools/example-project.svc.id.goog/subject/ns/kubeflow/sa/ml-pipeline-ui")
    binding = _one(objs, "IAMPolicyMember", UI_BINDING)
    _cc_model(binding).model_validate(binding)  # the Config Connector CRD's own model
    spec, bucket = binding["spec"], _one(objs, "StorageBucket")
    assert spec["member"] == ui and "memberFrom" not in spec
    assert spec["member"].endswith(f"/subject/ns/kubeflow/sa/{KFP_UI_KSA}")
    assert spec["role"] == UI_ROLE and spec["role"] not in WRITE_ROLES
    assert spec["resourceRef"] == {"kind": "StorageBucket", "name": bucket["metadata"]["name"]}
    assert "condition" not in spec
    assert binding["metadata"]["annotations"]["cnrm.cloud.google.com/project-id"] == DEFAULTS[0]
    # Workload Identity Federation principals are honoured on buckets with uniform
    # bucket-level access only (no per-object ACLs).
    assert bucket["spec"]["uniformBucketLevelAccess"] is True
    # Nothing else names the UI: no project-level grant, no second role, no other resource.
    naming_ui = [o["metadata"]["name"] for o in objs if o["kind"] in IAM_KINDS and ui in yaml.safe_dump(o)]
    assert naming_ui == [UI_BINDING]
    assert yaml.safe_dump_all(list(objs)).count(KFP_UI_KSA) == 1


def test_no_credentials_anywhere():
    for overlay in OVERLAYS:
        assert not {o["kind"] for o in _built(overlay)} & {"IAMServiceAccountKey", "Secret", "StorageHMACKey"}
    for path in MANIFESTS.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert not re.search(r"PRIVATE KEY|private_key|\"type\":\s*\"service_account\"", text), path


def test_settings_reach_every_field(tmp_path):
    copy = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, copy)
    (copy / "base" / "settings.env").write_text(
        render_settings("other-proj-123", "europe-west4", "c2", "other-bucket", namespace="team-a",
                        project_number="987654321", kfp_namespace="pipelines"))
    gpu, tpu = (_agreed(copy / "overlays" / overlay) for overlay in ("gpu", "tpu"))
    objs = gpu + tpu
    for obj in objs:
        meta = obj["metadata"]
        if obj["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in meta, obj["kind"]
        else:
            assert meta.get("namespace") == "team-a", f"{obj['kind']}/{meta['name']}"
        if obj["apiVersion"].partition("/")[0].endswith(CC_GROUP):
            assert meta["annotations"]["cnrm.cloud.google.com/project-id"] == "other-proj-123", meta["name"]
    ksa = _one(gpu, "ServiceAccount", "batchscale-runner")
    assert ksa["metadata"]["annotations"] == {
        "iam.gke.io/gcp-service-account": "batchscale@other-proj-123.iam.gserviceaccount.com"}
    binding = _one(gpu, "RoleBinding", "batchscale-runner")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "batchscale-runner", "namespace": "team-a"}]
    wi = _one(gpu, "IAMPolicyMember", "batchscale-workload-identity")
    assert wi["spec"]["member"] == "serviceAccount:other-proj-123.svc.id.goog[team-a/batchscale-runner]"
    ui = _one(gpu, "IAMPolicyMember", UI_BINDING)  # the runs' namespace, KFP's principal
    assert ui["spec"]["member"] == ("principal://iam.googleapis.com/projects/987654321/locations/global/"
                                    "workloadIdentityPools/other-proj-123.svc.id.goog/subject/ns/"
                                    "pipelines/sa/ml-pipeline-ui")
    bucket = _one(gpu, "StorageBucket")
    assert (bucket["spec"]["resourceID"], bucket["spec"]["location"]) == ("other-bucket", "EUROPE-WEST4")
    launcher = _one(gpu, "ConfigMap", "kfp-launcher")
    assert launcher["data"] == {"defaultPipelineRoot": "gs://other-bucket/pipeline-root"}
    pools = [o for o in objs if o["kind"] == "ContainerNodePool"]
    assert len(pools) == len(GPU_POOLS) + len(TPU_POOLS) == 11
    for pool in pools:
        assert pool["spec"]["location"] == "europe-west4"
        assert pool["spec"]["clusterRef"] == {
            "external": "projects/other-proj-123/locations/europe-west4/clusters/c2"}
    dumped = yaml.safe_dump_all(objs).replace("trainer.kubeflow.org", "")  # an API group, not the namespace
    for default in ("example-project", DEFAULT_NUMBER, "us-central1", "US-CENTRAL1", "kubeflow"):
        assert default not in dumped


def test_render_and_parse_round_trip():
    text = render_settings("other-proj-123", "europe-west4-b", "c2", "other_bucket.x", namespace="team-a",
                           project_number="42")
    values = parse_settings(text)
    assert values == derive("other-proj-123", "42", "europe-west4-b", "c2", "other_bucket.x", "team-a",
                            "kubeflow")
    assert values["kfp_ui_member"].endswith("/projects/42/locations/global/workloadIdentityPools/"
                                            "other-proj-123.svc.id.goog/subject/ns/kubeflow/sa/ml-pipeline-ui")
    assert values["bucket_location"] == "EUROPE-WEST4"  # a zonal cluster's bucket is regional
    assert values["cluster_ref"] == "projects/other-proj-123/locations/europe-west4-b/clusters/c2"
    assert set(DERIVED_KEYS) < set(values)
    checked_in = parse_settings((MANIFESTS / "base" / "settings.env").read_text())
    assert (checked_in["namespace"], checked_in["kfp_namespace"]) == ("kubeflow", "kubeflow")


GOOD_NUMBER = {"project_number": "123456789012"}


@pytest.mark.parametrize("args, message", [
    (("Proj-123", "us-central1", "c", "b-1"), "project_id: 'Proj-123' is not a GCP project id"),
    (("abc", "us-central1", "c", "b-1"), "project_id: 'abc' is not a GCP project id"),
    (("1project", "us-central1", "c", "b-1"), "project_id: '1project' is not"),
    (("project-", "us-central1", "c", "b-1"), "project_id: 'project-' is not"),
    (("p" * 31, "us-central1", "c", "b-1"), "project_id:"),
    (("my-project", "us central1", "c", "b-1"), "location: 'us central1' is not a GCP region or zone"),
    (("my-project", "us-central1", "C_1", "b-1"), "cluster: 'C_1' is not a GKE cluster name"),
    (("my-project", "us-central1", "c", "ab"), "bucket: 'ab' is not a bucket name"),
    (("my-project", "us-central1", "c", "Bucket"), "bucket: 'Bucket' is not a bucket name"),
    (("my-project", "us-central1", "c", "b" * 64), "bucket:"),
    (("my-project", "us-central1", "c", "gs://b"), "bucket: 'gs://b' is not"),
    (("my-project", "us-central1", "c", "b-1", "Team_A"),
     "namespace: 'Team_A' is not a Kubernetes namespace"),
    (("my-project", "us-central1", "c", "b-1", {"project_number": "my-project"}),
     "project_number: 'my-project' is not a GCP project number"),
    (("my-project", "us-central1", "c", "b-1", {"project_number": "0123"}), "project_number: '0123' is not"),
    (("my-project", "us-central1", "c", "b-1", {"project_number": "12 34"}),
     "project_number: '12 34' is not"),
    (("my-project", "us-central1", "c", "b-1", {"project_number": "1" * 20}), "project_number:"),
    (("my-project", "us-central1", "c", "b-1", {**GOOD_NUMBER, "kfp_namespace": "Kube_Flow"}),
     "kfp_namespace: 'Kube_Flow' is not a Kubernetes namespace"),
    (("my-project", "us-central1", "c", "b-1", {**GOOD_NUMBER, "kfp_namespace": ""}),
     "kfp_namespace: '' is not"),
])
def test_render_refuses_bad_values_in_one_line(args, message):
    keywords = args[-1] if isinstance(args[-1], dict) else GOOD_NUMBER
    positional = args[:-1] if isinstance(args[-1], dict) else args
    with pytest.raises(ValueError) as caught:
        render_settings(*positional, **keywords)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("project_id=example-project", "project_id=other-proj-456"),
     "settings: gsa_email is 'batchscale@example-project"),
    (lambda t: t.replace("\nnamespace=kubeflow\n", "\n"), "settings: missing namespace"),
    (lambda t: t.replace("project_number=123456789012", "project_number=555"),
     "settings: kfp_ui_member is 'principal://iam.googleapis.com/projects/123456789012/"),
    (lambda t: t.replace("kfp_namespace=kubeflow", "kfp_namespace=pipelines"),
     "settings: kfp_ui_member is"),
    (lambda t: t.replace("sa/ml-pipeline-ui", "sa/default"), "settings: kfp_ui_member is"),
    (lambda t: t.replace("kfp_namespace=kubeflow\n", ""), "settings: missing kfp_namespace"),
    (lambda t: t + "zone=us-central1-a\n", "settings line 19: unknown key 'zone'"),
    (lambda t: t + "bucket\n", "settings line 19: 'bucket' is not KEY=VALUE"),
    (lambda t: t + "cluster=c2\n", "settings line 19: cluster given twice"),
    (lambda t: t.replace("bucket=example-project-batchscale-store", "bucket=UPPER"),
     "bucket: 'UPPER' is not a bucket name"),
])
def test_parse_refuses_inconsistent_files_in_one_line(edit, message):
    text = edit(render_settings(*DEFAULTS, project_number=DEFAULT_NUMBER))
    with pytest.raises(ValueError) as caught:
        parse_settings(text)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)
