"""The ``batchscale`` console script, run as a real process, ends cleanly on a closed pipe
and on Ctrl-C: the right exit status, at most one line on stderr, never a traceback, and
after ``run --local`` no process of the pipeline left running.

Each test starts ``.venv/bin/batchscale`` (the installed entry point, not ``main()``),
because what is tested is the process: Python's handling of SIGPIPE and SIGINT, the flush
at interpreter exit, the child process tree of ``run --local``.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from batchscale.cli.local_pipeline import RESUME_HINT
from batchscale.cli.main import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED
from tests.conftest import tiny_spec_dict

SCRIPT = Path(sys.executable).with_name("batchscale")
pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason=f"no console script at {SCRIPT}")


def _wait_for(condition, timeout: float, what: str, poll: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


def _as_from_a_terminal() -> None:
    """Start the CLI with SIGINT's default action, as a shell's foreground job gets it. A job
    started in the background by a non-interactive shell (a CI runner's, `cmd &`) inherits
    SIGINT ignored, and Python then never raises KeyboardInterrupt: Ctrl-C, which only
    ever reaches a foreground job, could not be tested there."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _alive(pids) -> list[int]:
    """The pids that still run (a zombie waiting for its reaper has stopped)."""
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def _in_group(pgid: int) -> list[int]:
    """Every live process of process group ``pgid``."""
    found = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid:
                found.append(proc.pid)
        except (ProcessLookupError, PermissionError):
            pass
    return _alive(found)


# ---- a closed pipe ------------------------------------------------------------------
def _env(buffered: bool) -> dict:
    """Python's stdout is block-buffered on a pipe unless PYTHONUNBUFFERED is set (as in
    some CI and container images): a closed pipe then shows at the print or at the flush."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return env if buffered else {**env, "PYTHONUNBUFFERED": "1"}


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("argv", [["workloads", "--json"], ["workloads"], ["presets"], ["validate"],
                                  ["--help"]], ids=" ".join)
def test_stdout_closed_before_the_output_exits_quietly(argv, buffered):
    """The reader is gone before batchscale writes (the read end is closed at once), so the
    output meets EPIPE every time: exit 141 as a tool ended by SIGPIPE, stderr empty.
    (Unbuffered, argparse itself swallows the error of writing --help and exits 0.)"""
    read_end, write_end = os.pipe()
    proc = subprocess.Popen([str(SCRIPT), *argv], stdout=write_end, stderr=subprocess.PIPE, text=True,
                            env=_env(buffered))
    os.close(write_end)
    os.close(read_end)
    _, err = proc.communicate(timeout=60)
    assert err == "", err
    assert proc.returncode == (0 if argv == ["--help"] and not buffered else EXIT_BROKEN_PIPE)


def test_workloads_json_piped_to_head():
    """The issue's case as a user types it; the head may close before or after batchscale
    has written everything (the output fits the pipe), so either 0 or 141, never a trace."""
    done = subprocess.run(["bash", "-c", f'"{SCRIPT}" workloads --json | head -1; '
                                         'echo "status ${PIPESTATUS[0]}" >&2'],
                          capture_output=True, text=True, timeout=60, env=_env(buffered=True))
    assert done.stdout == "[\n"
    assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1] in ("status 0", f"status {EXIT_BROKEN_PIPE}")


# ---- Ctrl-C -------------------------------------------------------------------------
def test_ctrl_c_in_a_command_exits_130_with_one_line(tmp_path):
    """``validate`` blocked reading its spec from a FIFO stands for any command that is
    busy: SIGINT gives exit 130 and exactly ``batchscale: interrupted``."""
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    proc = subprocess.Popen([str(SCRIPT), "validate", str(fifo)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_as_from_a_terminal)

    def reader_is_there():  # opening a FIFO's write end without a reader fails with ENXIO
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as err:
            assert err.errno == errno.ENXIO and proc.poll() is None, (err, proc.poll())
            return None

    writer = _wait_for(reader_is_there, 60, "batchscale to open the spec")
    try:
        time.sleep(0.2)  # into yaml's read, which blocks: the writer stays open, writes nothing
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        os.close(writer)
    assert proc.returncode == EXIT_INTERRUPTED
    assert err == "batchscale: interrupted\n" and out == ""


@pytest.fixture
def local_run(tmp_path):
    """Start `run --local` on the tiny study and wait until a trial trains; returns the CLI's
    Popen, local_run's pid and the pids of the tree then. Kills what a failing test leaves."""
    started, trees = [], []

    def start():
        spec = tmp_path / "tiny.yaml"
        # Long enough (an unreachable goal, 30,000 steps) that Ctrl-C lands while trials train.
        spec.write_text(yaml.safe_dump(tiny_spec_dict(
            str(tmp_path / "store"), batch_sizes=[16], max_steps=30000,
            goals=[{"metric": "classification_error", "value": 0.001}])))
        proc = subprocess.Popen([str(SCRIPT), "run", "--local", str(spec), "--work-dir", str(tmp_path / "w")],
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_as_from_a_terminal)
        started.append(proc)

        def training():  # kfp.local runs each task as `python -m kfp.dsl.executor_main ...`
            assert proc.poll() is None, proc.communicate()
            tree = psutil.Process(proc.pid).children(recursive=True)
            try:
                tasks = [p for p in tree if "--function_to_execute train_pack" in " ".join(p.cmdline())]
            except psutil.NoSuchProcess:
                return None
            return tree if tasks else None

        tree = _wait_for(training, 180, "a train_pack task of `run --local`", poll=0.05)
        trees.append(tree)
        [child] = psutil.Process(proc.pid).children()  # local_run, leader of the pipeline's group
        assert os.getpgid(child.pid) == child.pid
        return proc, child.pid, [p.pid for p in tree]  # tree: local_run and the task processes

    yield start
    for proc in started:
        try:
            leftovers = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            leftovers = []
        for process in leftovers + [p for tree in trees for p in tree]:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        proc.communicate()


def _training_started(tmp_path) -> bool:
    """A trial's measurements reached the store: its pack is past setup and compilation and
    trains (it flushes rows from inside the training loop only). Its INCOMPLETE metadata
    came too early: a stop then waits for the pack's other models to build and its step to
    compile, which on a loaded CI machine outlasted the CLI's 5 s grace, so the pack was
    killed before it could checkpoint anything."""
    return any(tmp_path.glob("store/tiny/digits/fc_32/nesterov_momentum/16/*/measurements.csv"))


def test_ctrl_c_stops_a_local_run_and_its_task_processes_then_resumes(local_run, tmp_path):
    proc, child, tree = local_run()
    _wait_for(lambda: _training_started(tmp_path), 120, "the pack to start training")
    proc.send_signal(signal.SIGINT)
    interrupted = time.monotonic()
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - interrupted < 5, "Ctrl-C must stop the run within 5 s"
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert err == f"batchscale: interrupted: {RESUME_HINT}\n", err
    assert out.startswith("study tiny: digits/fc_32/nesterov_momentum, 2 trials")
    # stop_child waited for local_run and killed its group before returning: nothing trains on
    assert _alive(tree) == [] and _in_group(child) == []
    assert list(tmp_path.glob("store/tiny/checkpoints/16/*.npz")), "SIGTERM must checkpoint"
    resumable = [p for p in tmp_path.glob("store/tiny/checkpoints/16/*.npz") if json.loads(
        (tmp_path / f"store/tiny/digits/fc_32/nesterov_momentum/16/{p.stem}/metadata.json")
        .read_text())["status"] == "INCOMPLETE"]
    assert resumable

    again = subprocess.run([str(SCRIPT), "run", "--local", str(tmp_path / "tiny.yaml"),
                            "--work-dir", str(tmp_path / "w")], cwd=tmp_path, capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    logs = "".join(p.read_text() for p in (tmp_path / "w" / "logs").glob("*.log"))
    assert "resumed from its checkpoint" in logs
    n = len(resumable)  # the console says so: in its last status and in one line of its own
    assert f", {n} resumed from checkpoints" in again.stdout, again.stdout
    assert f"] resumed {n} trial{'s' if n != 1 else ''} from checkpoints" in again.stdout, again.stdout
    for path in tmp_path.glob("store/tiny/checkpoints/16/*.npz"):  # kept by budget-stopped trials
        meta = tmp_path / f"store/tiny/digits/fc_32/nesterov_momentum/16/{path.stem}/metadata.json"
        assert json.loads(meta.read_text())["stop_reason"] == "budget"  # only


def test_sigterm_to_the_cli_stops_its_pipeline_and_exits_143(local_run, tmp_path):
    """``kill <cli>`` (a CI job's timeout, a process manager) is Ctrl-C's twin: the pipeline
    is stopped with its packs checkpointed, one line says how to resume, exit 128 + 15.
    A second SIGTERM while it stops must not cut the stop short."""
    proc, child, tree = local_run()
    _wait_for(lambda: _training_started(tmp_path), 120, "the pack to start training")
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err == f"batchscale: terminated (SIGTERM): {RESUME_HINT}\n", err
    assert _alive(tree) == [] and _in_group(child) == []
    assert list(tmp_path.glob("store/tiny/checkpoints/16/*.npz")), "the pack must checkpoint"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal: Linux")
def test_a_killed_cli_takes_its_local_run_along(local_run):
    """SIGKILL leaves the CLI no chance to stop its child: local_run's parent-death signal
    (SIGTERM, passed on to its process group) must."""
    proc, child, tree = local_run()
    proc.kill()
    proc.communicate(timeout=30)
    _wait_for(lambda: _alive(tree) == [] and _in_group(child) == [], 30, "the pipeline's processes to end")
