"""The ``batchscale`` command: run a study locally, compile the pipeline, read reports.

  batchscale run --local [SPEC]     the pipeline through kfp.local, with a progress line
  batchscale compile [SPEC]         the pipeline YAML for Kubeflow Pipelines
  batchscale upload [SPEC] --preset P   the compiled pipeline to Kubeflow Pipelines (idempotent)
  batchscale submit [SPEC] --preset P   upload, then start a run; prints the run's URL
  batchscale report STUDY           analyse a study (ours or the paper's layout), write its report
  batchscale compare STUDY...       overlay several studies' steps to result (optionally normalised)
  batchscale validate [SPEC]        check a spec (and its flags) without running anything
  batchscale workloads [--json]     the workloads with defaults: goal, search space, budgets
  batchscale presets                the trainer placement presets (GPU, TPU, CPU node pools)
  batchscale gke-settings ...       manifests/base/settings.env for your project and cluster

SPEC is a YAML file; without it the embedded default study (quickstart) is used. Flags
override fields of the spec. A bad spec exits with status 2 and one line naming the
field; nothing is written to the store before the spec is valid.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

from batchscale.core.spec import SpecError, StudySpec
from batchscale.validation import load_spec_dict, parse_spec

POLL_SECONDS = 3.0


def _spec_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", nargs="?", help="study spec YAML, or a shipped study's name "
                        "(quickstart, toy_resnet8); default: quickstart")
    group = parser.add_argument_group("spec overrides")
    group.add_argument("--workload", metavar="DATASET/MODEL",
                       help="start from that workload's defaults instead of the quickstart "
                            "(see `batchscale workloads`)")
    group.add_argument("--name", help="study name (a folder under the store root)")
    group.add_argument("--store", help="store root: a local folder or gs://bucket/prefix")
    group.add_argument("--dataset")
    group.add_argument("--model")
    group.add_argument("--optimizer")
    group.add_argument("--batch-sizes", help="comma-separated, e.g. 8,16,32")
    group.add_argument("--trials", type=int, help="trials per batch size")
    group.add_argument("--max-steps", type=int, help="one step budget for every batch size")
    group.add_argument("--goal", action="append", metavar="METRIC<VALUE",
                       help="goal (repeatable): METRIC<VALUE or METRIC>VALUE, e.g. "
                            "classification_error<0.05")
    group.add_argument("--seed", type=int)
    group.add_argument("--backend", help="jax or tensorflow")
    group.add_argument("--parallelism", type=int, help="trials trained at once")


def build_spec(args: argparse.Namespace) -> StudySpec:
    """The validated spec from the file (or default) with command-line overrides."""
    if args.workload and args.spec is None:
        dataset, _, model = args.workload.partition("/")
        raw = {"name": f"{dataset}-{model}".replace("/", "-"), "store": "./batchscale-store",
               "workload": {"dataset": dataset, "model": model}}
    else:
        raw = load_spec_dict(args.spec)
    for key in ("name", "store", "seed", "backend", "parallelism"):
        if getattr(args, key) is not None:
            raw[key] = getattr(args, key)
    workload = dict(raw.get("workload") or {})
    for key in ("dataset", "model", "optimizer"):
        if getattr(args, key) is not None:
            workload[key] = getattr(args, key)
    raw["workload"] = workload
    if args.batch_sizes:
        try:
            raw["batch_sizes"] = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
        except ValueError:
            raise SpecError(f"batch_sizes: {args.batch_sizes!r} must be comma-separated integers") from None
        if isinstance(raw.get("max_steps"), dict) and args.max_steps is None:
            known = {int(k): v for k, v in raw["max_steps"].items()}
            raw["max_steps"] = {b: known.get(b, max(known.values())) for b in raw["batch_sizes"]}
    if args.trials is not None:
        raw["trials_per_batch_size"] = args.trials
    if args.max_steps is not None:
        raw["max_steps"] = args.max_steps
    if args.goal:
        raw["goals"] = list(args.goal)  # the one goal syntax, checked by parse_spec
    return parse_spec(raw)


def _absolute_store(spec: StudySpec) -> StudySpec:
    if spec.store.startswith("gs://"):
        return spec
    raw = spec.to_dict()
    raw["store"] = os.path.abspath(os.path.expanduser(spec.store))
    return parse_spec(raw)


# ---- commands -------------------------------------------------------------------------
def cmd_run(args) -> int:
    if not args.local:
        raise SpecError("run: only --local runs are available here; use `batchscale compile` "
                        "and upload the YAML to Kubeflow Pipelines to run on a cluster")
    from batchscale.pipelines.progress import ProgressTracker
    from batchscale.store.layout import StudyStore

    spec = _absolute_store(build_spec(args))
    store = StudyStore(spec.store)
    store.check_compatible(spec)  # refuse before anything is written
    work = os.path.abspath(args.work_dir)
    os.makedirs(os.path.join(work, "logs"), exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log_path = os.path.join(work, "logs", f"{spec.name}-{stamp}.log")
    spec_path = os.path.join(work, f"{spec.name}-{stamp}.spec.json")
    with open(spec_path, "w") as fh:
        json.dump(spec.to_dict(), fh)

    total = len(spec.batch_sizes) * spec.trials_per_batch_size
    print(f"study {spec.name}: {spec.workload.dataset}/{spec.workload.model}/"
          f"{spec.workload.optimizer}, {total} trials, store {store.url()}")
    print(f"kfp task logs: {log_path}")
    started = time.time()
    with open(log_path, "w") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "batchscale.pipelines.local_run", spec_path,
             os.path.join(work, "kfp-outputs")],
            stdout=log, stderr=subprocess.STDOUT, cwd=work,
        )
        last, tracker = "", ProgressTracker(spec, store)
        while child.poll() is None:
            time.sleep(POLL_SECONDS)
            try:
                line = tracker.poll().line()
            except Exception:  # the store may be mid-write; try again next poll
                continue
            if line != last:
                print(f"[{time.time() - started:6.0f}s] {line}", flush=True)
                last = line
    elapsed = time.time() - started
    if child.returncode != 0:
        reason = failure_reason(open(log_path).read())
        print(f"batchscale: error: the local pipeline failed after {elapsed:.0f}s: {reason}; "
              f"full log: {log_path}", file=sys.stderr)
        return 1
    print(f"[{elapsed:6.0f}s] {tracker.poll().line()}")
    from batchscale.cli.report import print_stored_report

    return print_stored_report(spec, store, elapsed=elapsed)


def failure_reason(log_text: str) -> str:
    """The first exception line a task printed (what went wrong, not kfp's summary)."""
    for line in log_text.splitlines():
        match = re.match(r"^\s*([A-Za-z_.]*(Error|Exception)): (.*)$", line)
        if match and "RuntimeError: Pipeline" not in line:
            return f"{match.group(1)}: {match.group(3).strip()}"
    return "see the log"


def cmd_compile(args) -> int:
    from batchscale.pipelines.study import compile_pipeline

    spec = build_spec(args)
    images = images_arg(args)
    compile_pipeline(spec, args.output, store_root=pipeline_store_arg(args), preset=args.preset,
                     images=images)
    print(f"wrote {args.output} (study {spec.name}, parallelism {spec.parallelism}, preset {args.preset})")
    if not (args.pipeline_store or spec.store.startswith("gs://")):
        print("note: the default store is a local folder; pass --pipeline-store gs://BUCKET/PREFIX "
              "or set store_root when starting the run on a cluster", file=sys.stderr)
    if images is None:
        print("note: no --images given, so the pipeline names placeholder images (*:dev); build "
              "them with `skaffold build --file-output build/images.json`", file=sys.stderr)
    return 0


def images_arg(args) -> dict[str, str] | None:
    """The built image references from --images, or None (the pipeline keeps placeholders)."""
    from batchscale.core.images import read_images_file

    return read_images_file(args.images) if args.images else None


def pipeline_store_arg(args) -> str:
    """--pipeline-store, checked (a cluster run writes to a bucket); "" when not given."""
    if args.pipeline_store and not args.pipeline_store.startswith("gs://"):
        raise SpecError("--pipeline-store: a cluster run needs a gs://bucket/prefix store")
    return args.pipeline_store or ""


def add_placement_args(parser: argparse.ArgumentParser) -> None:
    """--preset and --images: where the trainer runs and which built images the pipeline names."""
    from batchscale.pipelines.placement import PRESETS

    parser.add_argument("--preset", default="cpu", choices=list(PRESETS),
                        help="trainer placement preset (default: cpu); see `batchscale presets`")
    parser.add_argument("--images", metavar="FILE",
                        help="skaffold's --file-output JSON (e.g. build/images.json): the built "
                             "image references to put in the pipeline")


def cmd_validate(args) -> int:
    spec = build_spec(args)
    print(json.dumps(spec.to_dict(), indent=2))
    return 0


def cmd_workloads(args) -> int:
    from batchscale.cli.catalog import format_workloads, workload_rows

    rows = workload_rows()
    print(json.dumps(rows, indent=2) if args.json else format_workloads(rows))
    return 0


def cmd_presets(args) -> int:
    from batchscale.pipelines.placement import format_presets

    print(format_presets())
    return 0


def cmd_gke_settings(args) -> int:
    from batchscale.pipelines.gke_settings import render_settings

    text = render_settings(args.project, args.location, args.cluster, args.bucket, args.namespace)
    if args.output == "-":
        print(text, end="")
    else:
        with open(args.output, "w") as fh:
            fh.write(text)
        print(f"wrote {args.output}: store gs://{args.bucket}, namespace {args.namespace}, "
              f"cluster {args.cluster} in {args.location}")
    return 0


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="batchscale", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a study (locally through kfp.local)")
    _spec_args(run)
    run.add_argument("--local", action="store_true", help="run on this machine with kfp.local")
    run.add_argument("--work-dir", default=".batchscale", help="kfp outputs and logs (default: .batchscale)")
    run.set_defaults(func=cmd_run)
    comp = sub.add_parser("compile", help="write the pipeline YAML")
    _spec_args(comp)
    comp.add_argument("--output", "-o", default="batchscale-study.yaml")
    comp.add_argument("--pipeline-store", help="default store_root run parameter (gs://...)")
    add_placement_args(comp)
    comp.set_defaults(func=cmd_compile)
    from batchscale.cli.compare import add_analysis_commands
    from batchscale.cli.report import add_report_command

    add_report_command(sub)
    add_analysis_commands(sub)  # compare
    val = sub.add_parser("validate", help="check a spec and print it resolved")
    _spec_args(val)
    val.set_defaults(func=cmd_validate)
    wl = sub.add_parser("workloads", help="list the workloads with defaults (goal, search space, budgets)")
    wl.add_argument("--json", action="store_true", help="one JSON object per workload")
    wl.set_defaults(func=cmd_workloads)
    pre = sub.add_parser("presets", help="list the trainer placement presets (accelerators, node pools)")
    pre.set_defaults(func=cmd_presets)
    gke = sub.add_parser("gke-settings", help="write manifests/base/settings.env for your project")
    gke.add_argument("--project", required=True, help="Google Cloud project id")
    gke.add_argument("--location", required=True, help="the GKE cluster's region or zone")
    gke.add_argument("--cluster", required=True, help="the GKE cluster's name")
    gke.add_argument("--bucket", required=True,
                     help="the study store's bucket (created by Config Connector)")
    gke.add_argument("--namespace", default="kubeflow",
                     help="where KFP runs pods (default: kubeflow; a profile namespace in "
                          "multi-user Kubeflow)")
    gke.add_argument("--output", "-o", default="manifests/base/settings.env", help="'-' for stdout")
    gke.set_defaults(func=cmd_gke_settings)
    from batchscale.cli.cluster import add_cluster_commands

    add_cluster_commands(sub)  # upload, submit
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        return args.func(args)
    except (SpecError, FileNotFoundError, ValueError) as err:
        print(f"batchscale: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
