"""The cluster settings of a study: ``manifests/base/settings.env``, the one file to edit.

kustomize copies each value of that file into the manifests (``replacements``), but it
cannot join strings, so the values derived from the seven inputs (the Google service
account's email, the Workload Identity members of the study's runner and of the Kubeflow
Pipelines UI, the cluster reference, the bucket's region, the pipeline root) are written
out in the file as well. ``render_settings`` computes them; ``parse_settings`` reads a
file back and refuses one whose derived lines disagree with its inputs (say, a project id
edited by hand and nothing else).

Plain functions, no kustomize and no Kubernetes client: the CLI wraps them.
"""

from __future__ import annotations

import re

from batchscale.core.errors import InputError

GSA_NAME = "batchscale"  # IAMServiceAccount in manifests/base/gcp-service-account.yaml
KSA_NAME = "batchscale-runner"  # ServiceAccount in manifests/base/runner-service-account.yaml
# The Kubernetes service account the Kubeflow Pipelines UI server runs as (the
# ml-pipeline-ui Deployment of KFP's manifests); manifests/base/kfp-ui-reader.yaml lets it
# read the store's bucket, where the UI finds the HTML, Markdown and Metrics artifacts.
KFP_UI_KSA = "ml-pipeline-ui"

INPUT_KEYS = ("project_id", "project_number", "location", "cluster", "bucket", "namespace",
              "kfp_namespace")
DERIVED_KEYS = ("gsa_email", "workload_identity_member", "kfp_ui_member", "cluster_ref",
                "bucket_location", "pipeline_root")
KEYS = INPUT_KEYS + DERIVED_KEYS

_HEADER = """\
# batchscale cluster settings: the one file to edit (see manifests/README.md).
# kustomize copies every value below into the manifests. The last six lines are derived
# from the first seven: write the file with `batchscale gke-settings --project P
# --project-number N --location L --cluster C --bucket B [--namespace NS]
# [--kfp-namespace K]` rather than editing them by hand.
"""

_NAMESPACE_RULE = ("a Kubernetes namespace (a DNS label): 1-63 characters, lowercase letters, "
                   "digits and hyphens, starting and ending with a letter or digit")

_RULES = {
    "project_id": (re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]"),
                   "a GCP project id: 6-30 characters, lowercase letters, digits and hyphens, "
                   "starting with a letter and not ending with a hyphen"),
    "project_number": (re.compile(r"[1-9][0-9]{0,18}"),
                       "a GCP project number: digits only, no leading zero (`gcloud projects "
                       "describe PROJECT_ID --format='value(projectNumber)'` prints it)"),
    "location": (re.compile(r"[a-z]+(-[a-z]+)+[0-9]+(-[a-z])?"),
                 "a GCP region or zone, e.g. us-central1 or us-central1-a"),
    "cluster": (re.compile(r"[a-z]([a-z0-9-]{0,38}[a-z0-9])?"),
                "a GKE cluster name: 1-40 characters, lowercase letters, digits and hyphens, "
                "starting with a letter and not ending with a hyphen"),
    "bucket": (re.compile(r"[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]"),
               "a bucket name: 3-63 characters, lowercase letters, digits, '-', '_' and '.', "
               "starting and ending with a letter or digit"),
    "namespace": (re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"), _NAMESPACE_RULE),
    "kfp_namespace": (re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"), _NAMESPACE_RULE),
}


def _check(key: str, value: object) -> str:
    pattern, rule = _RULES[key]
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise InputError(f"{key}: {value!r} is not {rule}")
    return value


def kfp_ui_member(project_id: str, project_number: str, kfp_namespace: str) -> str:
    """The IAM principal of the KFP UI's Kubernetes service account under Workload Identity
    Federation for GKE: the project's workload identity pool (``PROJECT_ID.svc.id.goog``,
    addressed by the project *number*), subject ``ns/<namespace>/sa/ml-pipeline-ui``. It
    names the Kubernetes service account itself, so no Google service account and no
    annotation on KFP's own ServiceAccount are needed."""
    return (f"principal://iam.googleapis.com/projects/{project_number}/locations/global/"
            f"workloadIdentityPools/{project_id}.svc.id.goog/subject/ns/{kfp_namespace}/"
            f"sa/{KFP_UI_KSA}")


def derive(project_id: str, project_number: str, location: str, cluster: str, bucket: str,
           namespace: str, kfp_namespace: str) -> dict[str, str]:
    """All thirteen settings, in file order, from the seven inputs (validated)."""
    values = {key: _check(key, value) for key, value in zip(
        INPUT_KEYS, (project_id, project_number, location, cluster, bucket, namespace,
                     kfp_namespace))}
    region = re.sub(r"-[a-z]$", "", location)  # a zonal cluster's bucket goes in its region
    values.update(
        gsa_email=f"{GSA_NAME}@{project_id}.iam.gserviceaccount.com",
        workload_identity_member=f"serviceAccount:{project_id}.svc.id.goog[{namespace}/{KSA_NAME}]",
        kfp_ui_member=kfp_ui_member(project_id, project_number, kfp_namespace),
        cluster_ref=f"projects/{project_id}/locations/{location}/clusters/{cluster}",
        bucket_location=region.upper(),
        pipeline_root=f"gs://{bucket}/pipeline-root",
    )
    return values


def render_settings(project_id: str, location: str, cluster: str, bucket: str,
                    namespace: str = "kubeflow", *, project_number: str,
                    kfp_namespace: str = "kubeflow") -> str:
    """The text of ``settings.env`` for these values, derived lines included.

    ``namespace`` is where the study's runs (and its Config Connector objects) live;
    ``kfp_namespace`` is where Kubeflow Pipelines itself, and so its UI, runs. They are the
    same (``kubeflow``) in a standalone install and differ in multi-user Kubeflow, where
    runs go to a profile namespace. Raises ValueError (one line naming the setting and its
    rule) on a bad value.
    """
    values = derive(project_id, project_number, location, cluster, bucket, namespace,
                    kfp_namespace)
    return _HEADER + "".join(f"{key}={values[key]}\n" for key in KEYS)


def parse_settings(text: str) -> dict[str, str]:
    """The settings of a ``settings.env`` text, checked: every key once, no unknown key,
    valid inputs, and derived lines equal to what ``render_settings`` computes."""
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep:
            raise InputError(f"settings line {number}: {line!r} is not KEY=VALUE")
        if key not in KEYS:
            raise InputError(f"settings line {number}: unknown key {key!r}; allowed: {', '.join(KEYS)}")
        if key in values:
            raise InputError(f"settings line {number}: {key} given twice")
        values[key] = value.strip()
    missing = [key for key in KEYS if key not in values]
    if missing:
        raise InputError(f"settings: missing {', '.join(missing)}")
    expected = derive(*(values[key] for key in INPUT_KEYS))
    for key in DERIVED_KEYS:
        if values[key] != expected[key]:
            raise InputError(f"settings: {key} is {values[key]!r} but the other settings give "
                             f"{expected[key]!r}; regenerate the file with render_settings")
    return {key: values[key] for key in KEYS}
