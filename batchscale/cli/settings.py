"""``batchscale gke-settings``: manifests/base/settings.env for your project and cluster.

The one file kustomize reads the project-specific names from (project id and number,
cluster, bucket, the runs' namespace and KFP's); the names derived from them are in
batchscale.pipelines.gke_settings.
"""

from __future__ import annotations

import argparse


def add_commands(sub) -> None:
    """Register ``gke-settings`` on the CLI's subparsers."""
    gke = sub.add_parser("gke-settings", help="write manifests/base/settings.env for your project")
    gke.add_argument("--project", required=True, help="Google Cloud project id")
    gke.add_argument("--project-number", required=True,
                     help="the project's number (gcloud projects describe PROJECT_ID "
                          "--format='value(projectNumber)'): the KFP UI's Workload Identity "
                          "principal names it")
    gke.add_argument("--location", required=True, help="the GKE cluster's region or zone")
    gke.add_argument("--cluster", required=True, help="the GKE cluster's name")
    gke.add_argument("--bucket", required=True,
                     help="the study store's bucket (created by Config Connector)")
    gke.add_argument("--namespace", default="kubeflow",
                     help="where KFP runs pods (default: kubeflow; a profile namespace in "
                          "multi-user Kubeflow)")
    gke.add_argument("--kfp-namespace", default="kubeflow",
                     help="where Kubeflow Pipelines itself runs, its UI included (default: "
                          "kubeflow, also in multi-user Kubeflow)")
    gke.add_argument("--output", "-o", default="manifests/base/settings.env", help="'-' for stdout")
    gke.set_defaults(func=cmd_gke_settings)


def cmd_gke_settings(args: argparse.Namespace) -> int:
    from batchscale.pipelines.gke_settings import render_settings

    text = render_settings(args.project, args.location, args.cluster, args.bucket, args.namespace,
                           project_number=args.project_number, kfp_namespace=args.kfp_namespace)
    if args.output == "-":
        print(text, end="")
    else:
        with open(args.output, "w") as fh:
            fh.write(text)
        print(f"wrote {args.output}: store gs://{args.bucket}, namespace {args.namespace}, "
              f"cluster {args.cluster} in {args.location}, KFP UI in {args.kfp_namespace}")
    return 0
