"""``batchscale upload`` and ``batchscale submit``: the study on a Kubeflow Pipelines cluster.

  batchscale upload [SPEC] --preset P [--images build/images.json] <connection>
      compile for the preset and make sure KFP holds it (pipeline batchscale-study-<P>,
      version <study>-<hash>); uploading the same thing again creates nothing
  batchscale submit [SPEC] --store gs://BUCKET/PREFIX --preset P <connection>
      upload as above, then start a run in the study's experiment; prints the run's URL

SPEC may be an experiment (``core.experiment``): its own pipeline,
batchscale-experiment-<P>, one run for all its studies.

Connection: --host URL or --port-forward, with --token-file or --iap-client-id where the
cluster needs them (see batchscale.pipelines.kfp_connect; a secret is read from a file or
the environment, never from a flag's value). Thin: the work is in kfp_publish.
What no pod could reach of the user's workload (a model named by its file, local data, a
build without the user image), a local store and bad connection flags are refused before
any connection is made. ``batchscale plan --submit`` submits through the same functions
(``connection_options`` and ``check_submit`` before its probes, ``submit_checked`` after
the plan).
"""

from __future__ import annotations

import argparse

from batchscale.cli.experiment import build_run_spec
from batchscale.cli.options import (
    add_placement_args,
    add_spec_args,
    for_cluster,
    images_arg,
    pipeline_store_arg,
)
from batchscale.pipelines import kfp_connect, kfp_publish
from batchscale.pipelines.cluster_workload import check_for_cluster
from batchscale.pipelines.gke_settings import KSA_NAME
from batchscale.pipelines.placement import check_queue, get_preset


def _common(parser: argparse.ArgumentParser) -> None:
    add_spec_args(parser)
    add_placement_args(parser)  # --preset (choices: the placement presets) and --images
    kfp_connect.add_connection_args(parser)


def _checked(args: argparse.Namespace):
    """The study or experiment (``build_run_spec``), each study checked for the cluster
    before any connection is made."""
    spec = for_cluster(build_run_spec(args), args)
    check_cluster_workload(args, spec)
    check_queue(args.queue, args.preset)
    return spec


def check_cluster_workload(args: argparse.Namespace, spec) -> None:
    """What no pod could reach of the user's workload, refused (``check_for_cluster``)."""
    for study in getattr(spec, "specs", (spec,)):
        check_for_cluster(study, get_preset(args.preset).image, images_arg(args))


def connection_options(args: argparse.Namespace) -> kfp_connect.ConnectOptions:
    """The connection flags, checked first: a secret on the command line is refused before
    anything else is read (``ps`` has shown it already; the user should hear so first)."""
    options = kfp_connect.ConnectOptions.from_args(args)
    kfp_connect.check_options(options)
    return options


def cmd_upload(args: argparse.Namespace) -> int:
    options = connection_options(args)
    spec = _checked(args)
    store_root = pipeline_store_arg(args) or (spec.store if spec.store.startswith("gs://") else "")
    images = images_arg(args)
    with kfp_connect.connect(options) as (client, ui_base):
        out = kfp_publish.upload(client, spec, args.preset, images=images, store_root=store_root,
                                 queue=args.queue)
    what = ("created pipeline and version" if out["pipeline_created"]
            else "created version" if out["created"] else "already there, nothing created")
    print(f"pipeline {out['pipeline_name']} ({out['pipeline_id']})")
    print(f"version {out['version_name']} ({out['version_id']}): {what}")
    print(f"{ui_base}/#/pipelines/details/{out['pipeline_id']}/version/{out['version_id']}")
    return 0


def check_submit(args: argparse.Namespace, spec) -> None:
    """What ``submit`` refuses of the study before it connects (after ``connection_options``):
    a workload no pod could reach, a --queue that cannot work, a store that is not a bucket."""
    check_cluster_workload(args, spec)
    check_queue(args.queue, args.preset)
    kfp_publish.require_gs_store(spec)


def submit_checked(args: argparse.Namespace, spec, options: kfp_connect.ConnectOptions) -> int:
    """Upload (idempotently) and start a run of ``spec``, which ``check_submit`` passed;
    prints the run's URL."""
    images = images_arg(args)
    with kfp_connect.connect(options) as (client, ui_base):
        out = kfp_publish.submit(client, spec, args.preset, images=images, experiment=args.experiment,
                                 pipeline_root=args.pipeline_root, service_account=args.service_account,
                                 run_name=args.run_name, ui_base=ui_base, queue=args.queue)
    print(f"pipeline {out['pipeline_name']} version {out['version_name']}"
          f"{' (new)' if out['created'] else ''}; experiment {out['experiment']}"
          f"{' (new)' if out['experiment_created'] else ''}")
    print(f"run {out['run_name']} ({out['run_id']}): {out['url']}")
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    options = connection_options(args)
    spec = for_cluster(build_run_spec(args), args)
    check_submit(args, spec)
    return submit_checked(args, spec, options)


def add_run_args(parser: argparse.ArgumentParser) -> None:
    """The run's flags of ``submit`` (and ``plan --submit``)."""
    run = parser.add_argument_group("run")
    run.add_argument("--experiment", help="experiment name (default: the study name)")
    run.add_argument("--pipeline-root", metavar="gs://...",
                     help="where KFP keeps artifacts (default: <store>/pipeline-root)")
    run.add_argument("--service-account", default=KSA_NAME,
                     help="Kubernetes service account of the run's pods (default: batchscale-runner)")
    run.add_argument("--run-name", help="run name (default: <study>-<UTC time>)")


def add_commands(sub) -> None:
    """Register ``upload`` and ``submit`` on the CLI's subparsers."""
    up = sub.add_parser("upload", help="upload the study's pipeline to Kubeflow Pipelines (idempotent)")
    _common(up)
    up.add_argument("--pipeline-store", metavar="gs://BUCKET/PREFIX",
                    help="default store_root run parameter (default: the spec's store when gs://)")
    up.set_defaults(func=cmd_upload)
    sm = sub.add_parser("submit", help="upload and start a run on Kubeflow Pipelines; prints its URL")
    _common(sm)
    add_run_args(sm)
    sm.set_defaults(func=cmd_submit)
