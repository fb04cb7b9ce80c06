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
import os

from batchscale.core.errors import InputError


def add_commands(sub) -> None:
    """Register ``calibrate`` on the CLI's subparsers."""
    from batchscale.cli.plan import add_probe_args

    cal = sub.add_parser("calibrate", help="every critical-batch-size predictor against every "
                         "finished study of a store: predicted / fitted, with the compute spent")
    cal.add_argument("store", metavar="STORE", help="a study store (local folder or gs://)")
    add_probe_args(cal)
    cal.add_argument("--rerun", action="store_true",
                     help="probe every study again instead of re-using earlier probes")
    cal.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from batchscale.cli.plan import probe_environment, probe_options, progress
    from batchscale.planning.calibrate_store import calibrate_store, study_folders
    from batchscale.planning.calibration_pages import console_lines, write_pages
    from batchscale.store.filesystem import check_store_writable, open_root

    options = probe_options(args)
    root = args.store if args.store.startswith("gs://") else os.path.abspath(
        os.path.expanduser(args.store))
    if "://" not in root and not os.path.isdir(root):
        raise InputError(f"STORE: {args.store} is not a folder; give the store root a study "
                         "or experiment was run into")
    fs = open_root(root)
    if not study_folders(fs):
        raise InputError(f"STORE: {fs.url('')} holds no study (a folder with study_spec.json, "
                         "or an experiment's); give the store root a study or experiment was "
                         "run into")
    check_store_writable(root)
    with probe_environment():
        calibration = calibrate_store(root, rerun=args.rerun, log=progress, **options)
    url = write_pages(fs, calibration)
    print("\n".join(console_lines(calibration)))
    print(f"calibration written to {url.rpartition('/')[0]}/ ({calibration.seconds:.0f}s)")
    return 0
