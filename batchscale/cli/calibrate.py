"""``batchscale calibrate STORE``: how good each critical-batch-size predictor has been.

  batchscale calibrate STORE [--probe-seconds S] [--branch-...] [--rerun]

For every finished study of the store (its own folders and every experiment's), the
predictors ``batchscale plan`` runs before a sweep (the noise scale B_simple, the branched
estimate B_branch) against the sweep's fitted B*, with their intervals and the compute each
predictor spent as a share of the sweep's (``planning.calibrate_store``). A study that had
a plan before its sweep is judged by that plan; any other is probed now, on this machine.
The result goes to ``STORE/calibration/`` and ``batchscale plan`` in that store uses the
best-calibrated predictor from then on. Nothing of a study is written or changed.
"""

from __future__ import annotations

import argparse
import contextlib
import os

from batchscale.cli.options import positive_seconds
from batchscale.core.errors import InputError

DEFAULT_PROBE_SECONDS = 60.0


def add_commands(sub) -> None:
    """Register ``calibrate`` on the CLI's subparsers."""
    from batchscale.cli.plan import add_branch_args

    cal = sub.add_parser("calibrate", help="every critical-batch-size predictor against every "
                         "finished study of a store: predicted / fitted, with the compute spent")
    cal.add_argument("store", metavar="STORE", help="a study store (local folder or gs://)")
    cal.add_argument("--probe-seconds", type=float, default=DEFAULT_PROBE_SECONDS, metavar="S",
                     help="at most this long for each study's noise probe (default 60)")
    add_branch_args(cal)
    cal.add_argument("--rerun", action="store_true",
                     help="probe every study again instead of re-using earlier probes")
    cal.set_defaults(func=cmd_calibrate)


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


def cmd_calibrate(args: argparse.Namespace) -> int:
    from batchscale.cli.plan import branch_options, progress
    from batchscale.planning.calibrate_store import calibrate_store, study_folders
    from batchscale.planning.calibration_pages import console_lines, write_pages
    from batchscale.store.filesystem import check_store_writable, open_root

    positive_seconds("--probe-seconds", args.probe_seconds)
    options = branch_options(args)
    root = args.store if args.store.startswith("gs://") else os.path.abspath(
        os.path.expanduser(args.store))
    fs = open_root(root)
    if not study_folders(fs):
        raise InputError(f"{fs.url('')}: no study here (a folder with study_spec.json, or an "
                         "experiment's); give the store root a study or experiment was run into")
    check_store_writable(root)
    with probe_environment():
        calibration = calibrate_store(root, probe_seconds=args.probe_seconds,
                                      branch_options=options, rerun=args.rerun, log=progress)
    url = write_pages(fs, calibration)
    print("\n".join(console_lines(calibration)))
    print(f"calibration written to {url.rpartition('/')[0]}/ ({calibration.seconds:.0f}s)")
    return 0
