"""``batchscale run``, ``validate`` and ``compile``: one study, from its spec.

  batchscale run --local [SPEC]     the pipeline through kfp.local, with live progress
  batchscale validate [SPEC]        check a spec (and its flags) without running anything
  batchscale compile [SPEC]         the pipeline YAML for Kubeflow Pipelines

``run --local`` checks the study and its store, then runs the pipeline in a child process
with live progress (``cli.local_pipeline``: the console, and how Ctrl-C, SIGTERM and SIGHUP
stop the whole pipeline). The store is written atomically per trial, so running the same
command again resumes: finished trials are re-used. A SPEC that names an experiment goes
to ``cli.experiment``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

from batchscale.cli.experiment import build_run_spec
from batchscale.cli.local_pipeline import run_files, run_pipeline, run_with_signals
from batchscale.cli.options import (
    add_placement_args,
    add_spec_args,
    add_wide_arg,
    check_here,
    for_cluster,
    images_arg,
    pipeline_store_arg,
    table_width,
)
from batchscale.core.experiment import ExperimentSpec
from batchscale.core.spec import SpecError, StudySpec


def add_commands(sub) -> None:
    """Register ``run``, ``compile`` and ``validate`` on the CLI's subparsers."""
    run = sub.add_parser("run", help="run a study (locally through kfp.local)")
    add_spec_args(run)
    run.add_argument("--local", action="store_true", help="run on this machine with kfp.local")
    run.add_argument("--work-dir", default=".batchscale", help="kfp outputs and logs (default: .batchscale)")
    add_wide_arg(run)
    run.set_defaults(func=cmd_run)
    comp = sub.add_parser("compile", help="write the pipeline YAML")
    add_spec_args(comp)
    comp.add_argument("--output", "-o", default="batchscale-study.yaml")
    comp.add_argument("--pipeline-store", help="default store_root run parameter (gs://...)")
    add_placement_args(comp)
    comp.set_defaults(func=cmd_compile)
    val = sub.add_parser("validate", help="check a spec and print it resolved, with its packs")
    add_spec_args(val)
    add_placement_args(val)
    val.set_defaults(func=cmd_validate)


def cmd_run(args: argparse.Namespace) -> int:
    if not args.local:
        raise SpecError("run: only --local runs are available here; use `batchscale compile` "
                        "and upload the YAML to Kubeflow Pipelines to run on a cluster")
    from batchscale.rounds.planner import check_recorded_rounds
    from batchscale.store.filesystem import check_no_escaping_links, check_store_writable
    from batchscale.store.layout import StudyStore

    spec = build_run_spec(args)
    if isinstance(spec, ExperimentSpec):
        from batchscale.cli.experiment import run_experiment

        return run_experiment(args, spec)
    spec = absolute_store(check_here(spec))
    check_refused_folder(spec)  # not an experiment's folder
    check_store_writable(spec.store)  # a file, a read-only folder: refused before anything runs
    check_no_escaping_links(spec.store, (spec.name, "datasets"))
    store = StudyStore(spec.store)
    store.check_compatible(spec)  # refuse before anything is written
    check_recorded_rounds(spec, store)  # rounds trials were trained from that no spec gives
    work, log_path, spec_path = run_files(args.work_dir, spec.name, spec.to_dict())

    total = len(spec.batch_sizes) * spec.trials_per_batch_size
    print(f"study {spec.name}: {spec.workload.label}"
          f", {total} trials, store {store.url()}")
    print(f"kfp task logs: {log_path}")
    started = time.time()
    return run_with_signals(lambda: run_pipeline(spec, store, work, log_path, spec_path, started,
                                                 table_width(args)))


def check_refused_folder(spec: StudySpec) -> None:
    """A study whose folder is an experiment's (``store.experiment_record``) is refused:
    its files would land among the experiment's studies."""
    from batchscale.store.experiment_record import is_experiment_folder

    try:
        taken = is_experiment_folder(f"{spec.store.rstrip('/')}/{spec.name}")
    except (OSError, ValueError):
        return  # an unreachable or odd store: the checks after this one say so
    if taken:
        raise SpecError(f"name: {spec.store.rstrip('/')}/{spec.name} is an experiment's folder "
                        "(it holds experiment.json); give the study another name or store")


def absolute_store(spec: StudySpec) -> StudySpec:
    """``spec`` with a local store, a model file and local data files as absolute paths
    (kfp.local's tasks run elsewhere; ``workload_spec.absolute_paths``). The spec is valid
    already: no second parse."""
    from batchscale.validation.workload_spec import absolute_paths

    spec = dataclasses.replace(spec, workload=absolute_paths(spec.workload))
    if spec.store.startswith("gs://"):
        return spec
    return dataclasses.replace(spec, store=os.path.abspath(os.path.expanduser(spec.store)))


def cmd_compile(args: argparse.Namespace) -> int:
    from batchscale.pipelines.pipeline_size import size as compiled_size
    from batchscale.pipelines.study import compile_pipeline

    spec = for_cluster(build_run_spec(args), args)
    if isinstance(spec, ExperimentSpec):
        from batchscale.cli.experiment import compile_experiment

        return compile_experiment(args, spec)
    images = images_arg(args)
    compile_pipeline(spec, args.output, store_root=pipeline_store_arg(args), preset=args.preset,
                     images=images, queue=args.queue)
    print(f"wrote {args.output} (study {spec.name}, {spec.parallelism} pack tasks at once, "
          f"preset {args.preset}): {compiled_size(args.output).line()}")
    if not (args.pipeline_store or spec.store.startswith("gs://")):
        print("note: the default store is a local folder; pass --pipeline-store gs://BUCKET/PREFIX "
              "or set store_root when starting the run on a cluster", file=sys.stderr)
    if images is None:
        print("note: no --images given, so the pipeline names placeholder images (*:dev); build "
              "them with `skaffold build --file-output build/images.json`", file=sys.stderr)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    """The resolved spec as JSON on stdout; how it is packed for ``--preset`` on stderr."""
    from batchscale.pipelines.placement import pack_size_for
    from batchscale.search.packs import make_packs

    spec = build_run_spec(args)
    if isinstance(spec, ExperimentSpec):
        from batchscale.cli.experiment import validate_experiment

        return validate_experiment(args, spec)
    spec = check_here(spec)
    print(json.dumps(spec.to_dict(), indent=2))
    sys.stdout.flush()  # a closed stdout ends the command here, before anything reaches stderr
    size = pack_size_for(spec, args.preset)
    how = "set by the spec" if spec.pack_size else f"for preset {args.preset}"
    packs = len(make_packs(spec, size))
    print(f"pack size {size} ({how}): {packs} packs for "
          f"{len(spec.batch_sizes) * spec.trials_per_batch_size} trials, round 1 in "
          f"{min(packs, spec.parallelism)} lane(s) (pack tasks at once: parallelism "
          f"{spec.parallelism})", file=sys.stderr)
    return 0
