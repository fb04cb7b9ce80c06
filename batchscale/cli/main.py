"""The ``batchscale`` command: run a study locally, compile the pipeline, read reports.

  batchscale run --local [SPEC]     the pipeline through kfp.local, with a progress line
  batchscale compile [SPEC]         the pipeline YAML for Kubeflow Pipelines
  batchscale validate [SPEC]        check a spec (and its flags) without running anything
  batchscale plan [SPEC]            before a sweep: critical batch size predicted, batch sizes, cost
  batchscale calibrate STORE        how far each critical-batch-size predictor was from fitted B*
  batchscale upload [SPEC] --preset P   the compiled pipeline to Kubeflow Pipelines (idempotent)
  batchscale submit [SPEC] --preset P   upload, then start a run; prints the run's URL
  batchscale report STUDY           analyse a study (ours or the paper's layout), write its report
  batchscale compare STUDY...       overlay several studies' steps to result (optionally normalised)
  batchscale workloads [--json]     the workloads with defaults: goal, search space, budgets
  batchscale presets                the trainer placement presets (GPU, TPU, CPU node pools)
  batchscale gke-settings ...       manifests/base/settings.env for your project and cluster
  batchscale images --registry R    build and push a preset's images, write the --images file

SPEC is a YAML file; without it the embedded default study (quickstart) is used. Flags
override fields of the spec. A bad spec exits with status 2 and one line naming the
field; nothing is written to the store before the spec is valid.

This module is the root of the CLI package: it builds the top parser, lets each command
group (study, plan, cluster, analysis, catalog, settings) register its commands, and runs the
chosen handler with the one way out every command shares (docs/bad-input.md#exit-statuses):

- 0: done; 1: the command failed: ``run --local``'s pipeline failed (its line says why),
  or CommandFailed (a measurement gave nothing usable): ``batchscale: error: <one line>``;
- InputError (SpecError and every other deliberate refusal of an input: a flag, a path
  given on the command line, a setting): ``batchscale: error: <one line>``, exit 2; an
  OSError whose path is too long for the file system (ENAMETOOLONG) is one too;
- StoreDamaged (a file or folder of the store that is not what the layout says, e.g. a
  file where the report's folder must be), and ``report``/``compare`` reading damaged
  files: ``batchscale: error: <one line naming it>``, exit 3;
- any other OSError (a file that could not be read or written: permission, disk full):
  ``batchscale: error: PATH: <reason>``, exit 1;
- any other exception is a bug in batchscale, never reported as bad input:
  ``batchscale: internal error: <Type>: <message> (at FILE:LINE); ... traceback: PATH``,
  the traceback saved to a file in the temp folder, exit 70 (EX_SOFTWARE of sysexits.h);
- Ctrl-C: ``batchscale: interrupted[: what was stopped]``, exit 130 (128 + SIGINT);
- stdout closed by its reader (``batchscale workloads --json | head -1``): no output, no
  traceback, exit 141 (128 + SIGPIPE), what the shell reports for a tool that SIGPIPE
  ended, so ``set -o pipefail`` scripts see batchscale as they see ``cat`` or ``yes``.

Command modules import options.py, never this module.
"""

from __future__ import annotations

import argparse
import errno
import os
import select
import sys
import tempfile
import time
import traceback

from batchscale.core.errors import CommandFailed, InputError, StoreDamaged

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_DAMAGED = 3  # a file of the store is damaged (report/compare: some were left out)
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug in batchscale
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE


def make_parser() -> argparse.ArgumentParser:
    """The top parser with every command group's commands."""
    # The command modules are imported here, not at the top, so that a Ctrl-C while they
    # (and numpy, kfp, ...) load is handled by main like one during a command.
    from batchscale.cli import analysis, calibrate, catalog, cluster, images, plan, settings, study

    parser = argparse.ArgumentParser(prog="batchscale", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (study, plan, calibrate, cluster, analysis, catalog, settings, images):
        group.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default: sys.argv[1:]), run the command, return its exit status."""
    try:
        return _run(argv)
    except InputError as err:
        _say(f"batchscale: error: {err}")
        return EXIT_BAD_INPUT
    except StoreDamaged as err:
        _say(f"batchscale: error: {err}")
        return EXIT_DAMAGED
    except CommandFailed as err:
        _say(f"batchscale: error: {err}")
        return EXIT_FAILED
    except KeyboardInterrupt as err:
        _say("batchscale: interrupted" + (f": {err}" if str(err) else ""))
        return EXIT_INTERRUPTED
    except BrokenPipeError as err:
        if not _stdout_is_closed():  # a connection (KFP, GCS) broke, not our reader
            return os_error(err)
        _discard_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as err:
        return os_error(err)
    except Exception as err:  # noqa: BLE001 - the one place a bug is told apart from input
        return internal_error(err)


def _run(argv: list[str] | None) -> int:
    try:
        args = make_parser().parse_args(argv)
    except SystemExit:  # --help or a usage error: argparse has written its text
        sys.stdout.flush()  # a closed stdout shows here, not at interpreter exit
        raise
    code = args.func(args)
    sys.stdout.flush()  # a closed pipe shows here, not as a traceback at interpreter exit
    return code


def os_error(err: OSError) -> int:
    """One line naming the file an OSError is about; exit 2 for a path too long for the
    file system (an input: the store, a study or --out given too long), else 1."""
    paths = [p for p in (err.filename, err.filename2) if p is not None]
    where = f"{os.fsdecode(paths[-1])}: " if paths else ""
    if err.errno == errno.ENAMETOOLONG:
        _say(f"batchscale: error: {where}a name in this path is longer than the file system "
             f"allows ({_name_max(paths)} bytes); allowed: a shorter path")
        return EXIT_BAD_INPUT
    _say(f"batchscale: error: {where}{err.strerror or err}")
    return EXIT_FAILED


def _name_max(paths: list) -> int:
    """The longest file name the file system under ``paths[-1]`` allows (255 if unknown)."""
    folder = os.fsdecode(paths[-1]) if paths else os.curdir
    while folder and not os.path.isdir(folder):
        parent = os.path.dirname(folder)
        folder = parent if parent != folder else ""
    try:
        return os.pathconf(folder or os.curdir, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def internal_error(err: BaseException) -> int:
    """A bug: one line saying so, where it happened and where its traceback was saved (the
    temp folder; on stderr instead if that cannot be written); exit 70."""
    text = "".join(traceback.format_exception(err))
    frames = traceback.extract_tb(err.__traceback__)
    ours = [f for f in frames if f"{os.sep}batchscale{os.sep}" in f.filename] or frames
    at = ""
    if ours:
        name = ours[-1].filename
        cut = name.rfind(f"{os.sep}batchscale{os.sep}")
        at = f" (at {name[cut + 1:] if cut >= 0 else name}:{ours[-1].lineno})"
    path = os.path.join(tempfile.gettempdir(),
                        f"batchscale-traceback-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt")
    try:
        with open(path, "w") as fh:
            fh.write(text)
        where = f"traceback: {path}"
    except OSError:
        _say(text.rstrip())
        where = "traceback above"
    message = (str(err).splitlines() or [""])[0]
    _say(f"batchscale: internal error: {type(err).__name__}: {message}{at}; this is a bug in "
         f"batchscale, not in your input; {where}")
    return EXIT_INTERNAL


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
