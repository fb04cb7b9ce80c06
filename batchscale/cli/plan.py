"""``batchscale plan``: before any sweep, measure and estimate on this machine.

  batchscale plan [SPEC] [--probe-seconds S] [--branch-rule R] [--branch-tolerance T]
                  [--branch-seconds S]           probe here, print the plan, write plan.json
  batchscale plan [SPEC] --compile FILE --preset P   the plan pipeline for a cluster instead
  batchscale plan [SPEC] --submit --store gs://B/P --preset P <connection>
                  probe here and write the plan, then start the study on Kubeflow
                  Pipelines as ``batchscale submit`` does (the same flags and code:
                  ``cli.cluster``'s checks before the probes, ``submit_checked`` after)

The probes (``batchscale.planning.probe``) train a few short runs at the spec's smallest
batch size to measure the gradient noise scale B_simple, branch short runs from checkpoints of one
of them at k times that batch size for the branched local critical batch size
(``batchscale.planning.branched_probe``), and time a few hundred steps at
every batch size; ``batchscale.planning.plan`` turns them into a proposed batch-size grid
and an estimate of the study's trials, steps, device-hours, wall time and cost. Nothing
of the study's trials is touched: the plan goes to ``<store>/<study>/plan/plan.json`` and
the step times to ``<study>/profile/step_times/``, where the study's report finds them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from batchscale.cli.options import (
    add_placement_args,
    add_spec_args,
    build_spec,
    check_here,
    for_cluster,
    images_arg,
    pipeline_store_arg,
)
from batchscale.core.spec import SpecError
from batchscale.planning.branched_estimate import (
    DEFAULT_RULE,
    RULES,
    TOLERANCE,
    check_rule,
    check_tolerance,
)

DEFAULT_PROBE_SECONDS = 60.0
DEFAULT_BRANCH_SECONDS = 60.0


def add_commands(sub) -> None:
    """Register ``plan`` on the CLI's subparsers."""
    plan = sub.add_parser("plan", help="before a sweep: the critical batch size predicted two "
                          "ways, proposed batch sizes and budgets, and the study's estimated "
                          "steps, time and cost")
    add_spec_args(plan)
    add_probe_args(plan)
    plan.add_argument("--compile", metavar="FILE",
                      help="write the plan pipeline (for the cluster, on --preset) instead of probing here")
    plan.add_argument("--pipeline-store", help="default store_root run parameter (gs://...)")
    add_placement_args(plan)
    plan.add_argument("--submit", action="store_true",
                      help="then start the study on Kubeflow Pipelines, as `batchscale submit` "
                           "does (its connection and run flags below)")
    from batchscale.cli.cluster import add_run_args
    from batchscale.pipelines.kfp_connect import add_connection_args

    add_connection_args(plan)
    add_run_args(plan)
    plan.set_defaults(func=cmd_plan)


def add_probe_args(parser) -> None:
    """The probes' flags, shared by ``plan`` and ``calibrate``."""
    parser.add_argument("--probe-seconds", type=float, default=DEFAULT_PROBE_SECONDS, metavar="S",
                        help="at most this long for the noise probe's training runs (default 60)")
    parser.add_argument("--branch-rule", default=DEFAULT_RULE, metavar="RULE",
                        help=f"the branched probe's learning rate at k x B: {', '.join(RULES)}: "
                        "lr x sqrt(k) (Merrill et al. 2025), lr x k, lr "
                        f"(default {DEFAULT_RULE})")
    parser.add_argument("--branch-tolerance", type=float, default=TOLERANCE, metavar="T",
                        help="a branch keeps up when its loss is at most the base run's x (1 + T) "
                        f"(default {TOLERANCE:g})")
    parser.add_argument("--branch-seconds", type=float, default=DEFAULT_BRANCH_SECONDS,
                        metavar="S", help="at most this long for the branched probe (default 60)")


def probe_options(args: argparse.Namespace) -> dict:
    """The probes' flags, checked (one line naming the flag and what is allowed), as
    keyword arguments of ``plan_study`` / ``probe_predictions``."""
    for flag, seconds in (("--probe-seconds", args.probe_seconds),
                          ("--branch-seconds", args.branch_seconds)):
        if not 0 < seconds <= 24 * 3600:
            raise SpecError(f"{flag}: {seconds:g} is not allowed; allowed: a "
                            "number of seconds > 0 and at most 86400")
    check_rule(args.branch_rule)
    check_tolerance(args.branch_tolerance)
    return {"probe_seconds": args.probe_seconds, "branch_rule": args.branch_rule,
            "branch_tolerance": args.branch_tolerance, "branch_seconds": args.branch_seconds}


@contextlib.contextmanager
def probe_environment(parallelism: int = 1):
    """Time and probe as a local run's pack tasks train (one XLA thread each where they
    share the cores): XLA_FLAGS set before anything here initialises JAX, restored after."""
    from batchscale.pipelines.local_run import task_environment

    before = os.environ.get("XLA_FLAGS")
    os.environ.update(task_environment(parallelism, os.cpu_count() or 1, os.environ))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("XLA_FLAGS", None)
        else:
            os.environ["XLA_FLAGS"] = before


def cmd_plan(args: argparse.Namespace) -> int:
    if args.compile and args.submit:
        raise SpecError("--compile and --submit: give one (--compile writes the plan pipeline; "
                        "--submit plans here, then starts the study on the cluster)")
    if not args.submit and (args.host or args.port_forward):
        raise SpecError("--host/--port-forward: only with --submit (plan here, then start the "
                        "study on Kubeflow Pipelines)")
    from batchscale.cli.cluster import check_submit, connection_options, submit_checked
    from batchscale.pipelines.kfp_connect import ConnectOptions

    # Refused before any probe: a run that could not start, and a secret given on the
    # command line (with or without --submit: `ps` has shown it).
    connection = connection_options(args) if args.submit else ConnectOptions.from_args(args)
    spec = build_spec(args)
    study = for_cluster(spec, args)  # what submit sends: the cluster's parallelism
    if args.submit:
        check_submit(args, study)
    if args.compile:
        from batchscale.pipelines.plan import compile_plan_pipeline

        compile_plan_pipeline(spec, args.compile, store_root=pipeline_store_arg(args),
                              preset=args.preset, images=images_arg(args))
        print(f"wrote {args.compile} (the plan of study {spec.name} on preset {args.preset})")
        return 0
    options = probe_options(args)
    from batchscale.cli.study import absolute_store
    from batchscale.planning.plan import plan_study
    from batchscale.store.filesystem import check_store_writable
    from batchscale.store.layout import StudyStore

    with probe_environment(spec.parallelism):
        spec = absolute_store(check_here(spec))  # the probes build the user's model here
        check_store_writable(spec.store)
        store = StudyStore(spec.store)
        store.check_compatible(spec)  # a plan for another study under this name: refused
        plan = plan_study(spec, store, log=progress, **options)
    print("\n".join(plan.lines()))
    if args.submit:  # the study as submit sends it (the probes ran the spec as given)
        return submit_checked(args, study, connection)
    return 0


def progress(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)
