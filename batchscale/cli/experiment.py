"""``run --local``, ``validate``, ``compile`` and ``report`` of an experiment.

The study commands (``cli.study``, ``cli.analysis``) hand an experiment here: a SPEC that
names one (``experiment:``; ``core.experiment``), or for ``report`` a folder holding
``experiment.json``. ``run --local`` checks every study as a study's run does, runs the
experiment's pipeline (``pipelines.experiment``) with the same console (one line over all
studies: each study's best steps per batch size), then prints the comparison: the
findings, each study's fit, and where each report and the comparison are. Running it
again re-uses every finished trial of every study.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from batchscale.core.experiment import ExperimentSpec


def build_run_spec(args: argparse.Namespace):
    """A StudySpec, or an ExperimentSpec where SPEC is an experiment (``core.experiment``):
    then ``--name``, ``--store`` and ``--parallelism`` are the experiment's, every other
    override flag applies to its base study (and so to each of its studies)."""
    from batchscale.cli.options import build_spec, with_flags
    from batchscale.validation import load_spec_dict, shipped_studies
    from batchscale.validation.experiment_spec import is_experiment, parse_experiment

    raw = load_spec_dict(args.spec) if args.workload is None and args.spec else None
    if not is_experiment(raw):
        return build_spec(args)
    for key in ("name", "store", "parallelism"):
        if getattr(args, key) is not None:
            raw["experiment" if key == "name" else key] = getattr(args, key)
    base = raw.get("base")
    if isinstance(base, str):  # a shipped study by name
        base = load_spec_dict(base) if base in shipped_studies() else base
    if isinstance(base, dict):
        base_args = argparse.Namespace(**{**vars(args), "name": None, "store": None, "parallelism": None})
        raw["base"] = with_flags(dict(base), base_args)
    return parse_experiment(raw)


def absolute_experiment(experiment: ExperimentSpec, args) -> ExperimentSpec:
    """``experiment`` with a local store as an absolute path (kfp.local's tasks run in
    another folder), every study re-derived from it, each checked on this machine."""
    from batchscale.cli.options import check_here
    from batchscale.validation.experiment_spec import parse_experiment

    raw = _absolute_base_paths(experiment)
    store = experiment.store
    if not store.startswith("gs://"):
        store = os.path.abspath(os.path.expanduser(store))
    experiment = parse_experiment(raw, store)
    for spec in experiment.specs:
        check_here(spec)
    return experiment


def _absolute_base_paths(experiment: ExperimentSpec) -> dict:
    """The raw experiment with its base's model file and local data files as absolute paths
    (``workload_spec.absolute_paths``), as a study's run hands them on. The axis's own
    values (a model axis of files) are left as written."""
    from batchscale.validation.workload_spec import absolute_paths

    raw = json.loads(json.dumps(experiment.raw))
    workload = raw["base"].get("workload") if isinstance(raw.get("base"), dict) else None
    if not isinstance(workload, dict):
        return raw
    first = experiment.specs[0].workload
    absolute = absolute_paths(first)
    if absolute.model != first.model and experiment.axis.kind != "model":
        workload["model"] = absolute.model
    if absolute.data is not None and isinstance(workload.get("dataset"), dict):
        workload["dataset"] = {**workload["dataset"], "path": absolute.data.path}
    return raw


def check_experiment_store(experiment: ExperimentSpec) -> None:
    """Refuse before anything is written: an unwritable store, a study folder in the
    experiment's place, a study whose stored spec or rounds differ (each study's own checks)."""
    from batchscale.rounds.planner import check_recorded_rounds
    from batchscale.store.experiment_record import refuse_study_folder
    from batchscale.store.filesystem import check_no_escaping_links, check_store_writable
    from batchscale.store.layout import StudyStore

    check_store_writable(experiment.store)
    refuse_study_folder(experiment.store, experiment.name)
    check_no_escaping_links(experiment.store, (experiment.name,))
    for spec in experiment.specs:
        check_no_escaping_links(spec.store, (spec.name, "datasets"))
        store = StudyStore(spec.store)
        store.check_compatible(spec)
        check_recorded_rounds(spec, store)


def run_experiment(args: argparse.Namespace, experiment: ExperimentSpec) -> int:
    """``batchscale run --local EXPERIMENT``: the pipeline through kfp.local, with progress."""
    from batchscale.cli.experiment_report import print_experiment
    from batchscale.cli.local_pipeline import polling_store, run_files, run_pipeline, run_with_signals
    from batchscale.cli.options import table_width
    from batchscale.pipelines.progress import ExperimentTracker
    from batchscale.store.layout import StudyStore

    experiment = absolute_experiment(experiment, args)
    check_experiment_store(experiment)
    work, log_path, spec_path = run_files(args.work_dir, experiment.name, experiment.to_dict(),
                                          "experiment")
    print(f"experiment {experiment.name}: {experiment.axis.label} over "
          f"{', '.join(s.label for s in experiment.studies)}; {experiment.trials} trials in round 1, "
          f"store {StudyStore(experiment.folder).url()}")
    print(f"kfp task logs: {log_path}")
    started = time.time()
    stores = {s.label: polling_store(s.spec) for s in experiment.studies}
    return run_with_signals(lambda: run_pipeline(
        experiment, StudyStore(experiment.folder), work, log_path, spec_path, started,
        tracker=ExperimentTracker(experiment, stores),
        finish=lambda elapsed: print_experiment(experiment, elapsed, table_width(args))))


def validate_experiment(args: argparse.Namespace, experiment: ExperimentSpec) -> int:
    """The resolved experiment as JSON on stdout (each study's resolved spec); how its
    studies are packed for ``--preset`` on stderr."""
    from batchscale.cli.options import check_here
    from batchscale.pipelines.placement import pack_size_for
    from batchscale.search.packs import make_packs

    for spec in experiment.specs:
        check_here(spec)
    print(json.dumps({"experiment": experiment.name, "axis": experiment.axis.to_dict(),
                      "normalize_at": experiment.normalize_at,
                      "robustness_k": experiment.robustness_k,
                      "parallelism": experiment.parallelism,
                      "studies": {s.label: s.spec.to_dict() for s in experiment.studies}}, indent=2))
    sys.stdout.flush()
    for study in experiment.studies:
        size = pack_size_for(study.spec, args.preset)
        trials = len(study.spec.batch_sizes) * study.spec.trials_per_batch_size
        print(f"{study.label}: pack size {size}: {len(make_packs(study.spec, size))} pack tasks for "
              f"{trials} trials", file=sys.stderr)
    return 0


def compile_experiment(args: argparse.Namespace, experiment: ExperimentSpec) -> int:
    """``batchscale compile EXPERIMENT``: one pipeline, one Kubeflow run per experiment."""
    from batchscale.cli.options import images_arg, pipeline_store_arg
    from batchscale.pipelines.experiment import compile_experiment_pipeline
    from batchscale.pipelines.pipeline_size import size as compiled_size

    images = images_arg(args)
    output = args.output if args.output != "batchscale-study.yaml" else "batchscale-experiment.yaml"
    compile_experiment_pipeline(experiment, output, store_root=pipeline_store_arg(args),
                                preset=args.preset, images=images, queue=args.queue)
    print(f"wrote {output} (experiment {experiment.name}: {len(experiment.studies)} studies, "
          f"{experiment.parallelism} pack tasks at once, preset {args.preset}): "
          f"{compiled_size(output).line()}")
    if not (args.pipeline_store or experiment.store.startswith("gs://")):
        print("note: the default store is a local folder; pass --pipeline-store gs://BUCKET/PREFIX "
              "or set store_root when starting the run on a cluster", file=sys.stderr)
    return 0
