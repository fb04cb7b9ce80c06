"""The local pipeline's run: the child process, its console, and how it stops.

``run --local`` (a study: ``cli.study``; an experiment: ``cli.experiment``) starts the
pipeline in a child process (``python -m batchscale.pipelines.local_run``) so that kfp's
per-task logs go to a file while this process shows progress (``run_console``: a live
bar on a terminal, a line per change elsewhere) and what the log says at once: the phase,
a task that failed, a host that cannot be reached (``pipelines.task_log``). The child
leads its own process group: on Ctrl-C, SIGTERM or SIGHUP (or any other way out of the
progress loop) the whole group, the kfp task processes included, is terminated, then
killed after STOP_GRACE_SECONDS, so nothing keeps training. The store is written
atomically per trial, so running the same command again resumes.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

from batchscale.core.spec import StudySpec

POLL_SECONDS = 3.0
POLL_RETRY_SECONDS = 4.0  # the progress line's store calls: an outage shows within ~10 s
STOP_GRACE_SECONDS = 5.0
RESUME_HINT = ("the local pipeline was stopped; run the same command again to resume "
               "(finished trials are re-used)")


class Terminated(BaseException):
    """SIGTERM or SIGHUP reached ``run --local`` (a ``kill``, a closed terminal, a CI job's
    timeout): stop the pipeline as Ctrl-C does, then exit 128 + the signal. A
    BaseException, like KeyboardInterrupt: the progress loop's ``except Exception`` (a store
    call that failed) must not swallow a signal that arrives during a poll."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


# The signal that asked ``run --local`` to stop, kept beside the exception: a signal's
# exception is raised wherever the main thread happens to be, and some library code there
# swallows every exception (Cython's memoryview set-up, run inside the first import of
# numpy.random during a progress poll, does ``Sequence.register(...)`` under a bare
# ``except: pass``). The progress loop checks this after every poll (``raise_if_terminated``).
_requested: list[int] = []


def _raise_terminated(signum, frame):
    for other in (signal.SIGTERM, signal.SIGHUP):  # a second signal must not cut the stop short
        signal.signal(other, signal.SIG_IGN)
    _requested.append(signum)
    raise Terminated(signum)


def raise_if_terminated() -> None:
    """Raise the Terminated a signal asked for, if some code swallowed the first one."""
    if _requested:
        raise Terminated(_requested[0])


def run_pipeline(spec: StudySpec, store, work: str, log_path: str, spec_path: str,
                  started: float, width: int | None = None, tracker=None, finish=None) -> int:
    """Start local_run, show progress until it ends, print the report (its table fitted to
    ``width``). Any way out of the progress loop (Ctrl-C, SIGTERM, an error) stops the
    pipeline's whole process group. An experiment (``cli.experiment``) passes itself as
    ``spec``, its ``tracker`` (``ExperimentTracker``) and ``finish(elapsed) -> exit
    status``, what it prints at the end."""
    from batchscale.cli.analysis import print_stored_report
    from batchscale.cli.run_console import RunConsole, RunWatch, picked_up_line
    from batchscale.pipelines.progress import ProgressTracker

    tracker = tracker or ProgressTracker(spec, polling_store(spec))
    _baseline(tracker)
    with open(log_path, "w") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "batchscale.pipelines.local_run", spec_path,
             os.path.join(work, "kfp-outputs")],
            stdout=log, stderr=subprocess.STDOUT, cwd=work,
            # task output reaches the log at once; a user's module found through a relative
            # PYTHONPATH entry is found from the tasks' folder too
            env={**os.environ, "PYTHONUNBUFFERED": "1", **absolute_pythonpath(os.environ)},
            start_new_session=True,  # its own process group: stop_child ends the whole tree
        )
        console = RunConsole()
        try:
            watch = RunWatch(spec, store, log_path, console, started)
            while child.poll() is None:
                try:
                    child.wait(timeout=POLL_SECONDS)  # returns as soon as the pipeline ends
                except subprocess.TimeoutExpired:
                    pass
                watch.log_events()
                watch.poll(tracker)
                raise_if_terminated()
        except KeyboardInterrupt:
            console.close()
            stop_child(child)
            raise KeyboardInterrupt(RESUME_HINT) from None
        finally:  # any other way out (SIGTERM, stdout closed): the pipeline must not run on
            console.close()
            if child.poll() is None:
                stop_child(child)
    elapsed = time.time() - started
    if child.returncode != 0:
        reason = failure_reason(open(log_path).read())
        print(f"batchscale: error: the local pipeline failed after {elapsed:.0f}s: {reason}; "
              f"full log: {log_path}", file=sys.stderr)
        return 1
    final = watch.with_resumed(tracker.poll())
    print(f"[{elapsed:7.0f}s] {final.line()}")
    if picked_up := picked_up_line(final):
        print(f"[{elapsed:7.0f}s] {picked_up}")
    if finish is not None:
        return finish(elapsed)
    return print_stored_report(spec, store, elapsed=elapsed, width=width)


def _baseline(tracker) -> None:
    """Poll once before the pipeline starts: what is finished then is what this run
    re-uses (the console's ``re-used N``). Polled later, a quick first pack (a lane that
    resumes two trials and finishes them in seconds) would count as re-used too. An
    unreachable store leaves it to the first poll of the run."""
    try:
        tracker.poll()
    except Exception:  # noqa: BLE001  (the run's own polls say what is wrong with the store)
        pass


def polling_store(spec: StudySpec):
    """The store as the progress line reads it: on GCS with calls that give up after
    ``POLL_RETRY_SECONDS``, so an outage shows on the console within seconds (the
    pipeline's own calls keep retrying far longer)."""
    from batchscale.store.layout import StudyStore

    store = StudyStore(spec.store)
    if hasattr(store.fs, "retrying"):
        store.fs = store.fs.retrying(POLL_RETRY_SECONDS)
    return store


def stop_child(child: subprocess.Popen, grace: float = STOP_GRACE_SECONDS) -> None:
    """Terminate the child's process group (local_run and the kfp task it is running), wait
    up to ``grace`` seconds for the whole group to end (a training pack checkpoints its
    trials on SIGTERM, then exits), then kill whatever is left of it. A second Ctrl-C while
    waiting skips the rest of the grace period."""
    _signal_group(child, signal.SIGTERM)
    deadline = time.monotonic() + grace
    try:
        while time.monotonic() < deadline:
            child.poll()  # reap local_run, so that only live processes keep the group alive
            if not _group_alive(child):
                break
            time.sleep(0.05)
    except KeyboardInterrupt:
        pass
    _signal_group(child, signal.SIGKILL)  # stragglers: task processes that outlived SIGTERM
    child.wait()


def _group_alive(child: subprocess.Popen) -> bool:
    try:
        os.killpg(child.pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _signal_group(child: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(child.pid, signum)  # start_new_session: the group's id is the child's pid
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


def failure_reason(log_text: str) -> str:
    """Why the pipeline failed, in one line: the first failed task and its reason
    (``task_log``: its last exception or signal line, or its last output), else the first
    exception line in the log (not kfp's summary)."""
    from batchscale.pipelines.task_log import failures

    for failed in failures(log_text):
        if failed.detail:
            return f"task {failed.task} failed: {failed.detail}"
    for line in log_text.splitlines():
        match = re.match(r"^\s*([A-Za-z_.]*(Error|Exception)): (.*)$", line)
        if match and "RuntimeError: Pipeline" not in line:
            return f"{match.group(1)}: {match.group(3).strip()}"
    failed = failures(log_text)
    return f"task {failed[0].task} failed without a line of output" if failed else "see the log"


def absolute_pythonpath(environ) -> dict:
    """``{"PYTHONPATH": ...}`` with each relative entry (``.``, ``src``; an empty one is the
    current folder) made absolute against this process's folder, or ``{}`` when unset. The
    check before the run imports a user's ``module:function`` here; kfp.local's tasks run in
    another folder, where a relative entry would name another place and the pack would fail
    after the data was prepared."""
    entries = environ.get("PYTHONPATH")
    if not entries:
        return {}
    return {"PYTHONPATH": os.pathsep.join(os.path.abspath(e or os.curdir)
                                          for e in entries.split(os.pathsep))}


def run_files(work_dir: str, name: str, spec: dict, kind: str = "spec") -> tuple[str, str, str]:
    """The run's work folder, its kfp task log and the spec handed to the child
    (``<name>-<time>.<kind>.json``), the folders made and the spec written."""
    import json

    work = os.path.abspath(work_dir)
    os.makedirs(os.path.join(work, "logs"), exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log_path = os.path.join(work, "logs", f"{name}-{stamp}.log")
    spec_path = os.path.join(work, f"{name}-{stamp}.{kind}.json")
    with open(spec_path, "w") as fh:
        json.dump(spec, fh)
    return work, log_path, spec_path


def run_with_signals(body) -> int:
    """``body()``'s exit status, with SIGTERM and SIGHUP turned into a clean stop (as
    Ctrl-C): the pipeline is ended, the resume hint said, the status 128 + the signal."""
    _requested.clear()
    previous = {signum: signal.signal(signum, _raise_terminated)
                for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        code = body()
        raise_if_terminated()  # a signal swallowed while the report was printed
        return code
    except Terminated as stopped:
        try:  # after SIGHUP the terminal may be gone
            print(f"batchscale: terminated ({signal.Signals(stopped.signum).name}): "
                  f"{RESUME_HINT}", file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass
        return 128 + stopped.signum
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
