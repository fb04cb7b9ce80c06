"""The ``batchscale`` command: run a study locally, compile the pipeline, read reports.

  batchscale run --local [SPEC]     the pipeline through kfp.local, with a progress line
  batchscale compile [SPEC]         the pipeline YAML for Kubeflow Pipelines
  batchscale validate [SPEC]        check a spec (and its flags) without running anything
  batchscale plan [SPEC]            before a sweep: noise scale, proposed batch sizes, cost estimate
  batchscale upload [SPEC] --preset P   the compiled pipeline to Kubeflow Pipelines (idempotent)
  batchscale submit [SPEC] --preset P   upload, then start a run; prints the run's URL
  batchscale report STUDY           analyse a study (ours or the paper's layout), write its report
  batchscale compare STUDY...       overlay several studies' steps to result (optionally normalised)
  batchscale workloads [--json]     the workloads with defaults: goal, search space, budgets
  batchscale presets                the trainer placement presets (GPU, TPU, CPU node pools)
  batchscale gke-settings ...       manifests/base/settings.env for your project and cluster

SPEC is a YAML file; without it the embedded default study (quickstart) is used. Flags
override fields of the spec. A bad spec exits with status 2 and one line naming the
field; nothing is written to the store before the spec is valid.

This module is the root of the CLI package: it builds the top parser, lets each command
group (study, plan, cluster, analysis, catalog, settings) register its commands, and runs the
chosen handler with the one way out every command shares:

- SpecError, ValueError, FileNotFoundError: ``batchscale: error: <one line>``, exit 2;
- Ctrl-C: ``batchscale: interrupted[: what was stopped]``, exit 130 (128 + SIGINT);
- stdout closed by its reader (``batchscale workloads --json | head -1``): no output, no
  traceback, exit 141 (128 + SIGPIPE), what the shell reports for a tool that SIGPIPE
  ended, so ``set -o pipefail`` scripts see batchscale as they see ``cat`` or ``yes``.

Command modules import options.py, never this module.
"""

from __future__ import annotations

import argparse
import os
import select
import sys

from batchscale.core.errors import SpecError

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE


def make_parser() -> argparse.ArgumentParser:
    """The top parser with every command group's commands."""
    # The command modules are imported here, not at the top, so that a Ctrl-C while they
    # (and numpy, kfp, ...) load is handled by main like one during a command.
    from batchscale.cli import analysis, catalog, cluster, plan, settings, study

    parser = argparse.ArgumentParser(prog="batchscale", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (study, plan, cluster, analysis, catalog, settings):
        group.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default: sys.argv[1:]), run the command, return its exit status."""
    try:
        return _run(argv)
    except (SpecError, FileNotFoundError, ValueError) as err:
        _say(f"batchscale: error: {err}")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as err:
        _say("batchscale: interrupted" + (f": {err}" if str(err) else ""))
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        if not _stdout_is_closed():
            raise  # a connection (KFP, GCS) broke, not our reader: not ours to hide
        _discard_stdout()
        return EXIT_BROKEN_PIPE


def _run(argv: list[str] | None) -> int:
    try:
        args = make_parser().parse_args(argv)
    except SystemExit:  # --help or a usage error: argparse has written its text
        sys.stdout.flush()  # a closed stdout shows here, not at interpreter exit
        raise
    code = args.func(args)
    sys.stdout.flush()  # a closed pipe shows here, not as a traceback at interpreter exit
    return code


def _say(line: str) -> None:
    """One line on stderr; nothing if stderr itself is gone (``2>&1 | head``)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (BrokenPipeError, ValueError):
        pass


def _stdout_is_closed() -> bool:
    """Whether nobody reads our stdout any more (a pipe polls POLLERR once its reader is
    gone). True where that cannot be asked (no file descriptor, no poll)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return True


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so that Python's flush of what is still buffered at exit
    does not raise a second BrokenPipeError (the recipe of the ``signal`` module's docs).
    We do not restore SIGPIPE's default action instead: that would also kill the process
    on a write to a closed socket (KFP client, GCS), with no message."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # stdout is not a file descriptor (e.g. captured in-process): nothing to flush


if __name__ == "__main__":
    sys.exit(main())
