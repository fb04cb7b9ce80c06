"""The CLI package's shape and its one way out, in-process.

The root (batchscale.cli.main) registers one module per command group; no command module
imports the root; what they share is public in options.py. main() turns an interrupt into
exit 130 and one line, a closed stdout into exit 141 and silence. ``run --local`` stops
its child's whole process group on Ctrl-C. The same, through real processes and signals:
tests/integration/test_cli_signals.py.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from batchscale.cli import (
    analysis,
    calibrate,
    catalog,
    cluster,
    images,
    local_pipeline,
    plan,
    settings,
    study,
)
from batchscale.cli.main import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, main, make_parser
from tests.import_graph import graph

root = importlib.import_module("batchscale.cli.main")  # the module (the package's `main` is the function)
REPO = Path(__file__).resolve().parents[2]
CLI = REPO / "batchscale" / "cli"
ROOT_MODULES = {"batchscale.cli", "batchscale.cli.main", "batchscale.cli.__main__"}
GROUPS = {  # the command groups of issue 11 and the commands each registers, in order
    study: ["run", "compile", "validate"],
    plan: ["plan"],
    calibrate: ["calibrate"],
    cluster: ["upload", "submit"],
    analysis: ["report", "compare"],
    catalog: ["workloads", "presets"],
    settings: ["gke-settings"],
    images: ["images"],
}


def _commands(parser) -> list[str]:
    [sub] = [a for a in parser._actions if a.dest == "command"]
    return list(sub.choices)


def test_each_group_registers_its_commands_and_the_root_registers_every_group():
    every = []
    for module, commands in GROUPS.items():
        parser = argparse.ArgumentParser()
        module.add_commands(parser.add_subparsers(dest="command"))
        assert _commands(parser) == commands, module.__name__
        every += commands
    assert _commands(make_parser()) == every


def test_no_command_module_imports_the_root():
    edges = graph(REPO)
    commands = {m: targets for m, targets in edges.items()
                if m.startswith("batchscale.cli.") and m not in ROOT_MODULES}
    assert {"batchscale.cli.options", "batchscale.cli.study", "batchscale.cli.cluster"} <= set(commands)
    offenders = {m: sorted(t & ROOT_MODULES) for m, t in commands.items() if t & ROOT_MODULES}
    assert not offenders
    assert {f"batchscale.cli.{g.__name__.rpartition('.')[2]}" for g in GROUPS} <= edges["batchscale.cli.main"]


def test_no_private_name_is_imported_across_cli_modules():
    imported = []
    for path in CLI.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("batchscale.cli"):
                imported += [f"{path.name}: {a.name}" for a in node.names if a.name.startswith("_")]
    assert not imported


def test_spec_flags_are_the_same_on_every_command_that_takes_a_study():
    parser = make_parser()
    [sub] = [a for a in parser._actions if a.dest == "command"]
    flags = {name: {o for a in sub.choices[name]._actions for o in a.option_strings}
             for name in ("run", "validate", "compile", "upload", "submit")}
    spec_flags = {"--workload", "--name", "--store", "--dataset", "--model", "--optimizer", "--batch-sizes",
                  "--trials", "--max-steps", "--goal", "--seed", "--backend", "--parallelism"}
    assert all(spec_flags <= f for f in flags.values()), flags
    assert all({"--preset", "--images"} <= flags[c] for c in ("compile", "upload", "submit"))


# ---- the one way out ----------------------------------------------------------------
def test_an_interrupt_in_any_command_exits_130_with_one_line(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(catalog, "cmd_presets", interrupted)
    assert main(["presets"]) == EXIT_INTERRUPTED == 130
    assert capsys.readouterr() == ("", "batchscale: interrupted\n")


def test_a_closed_stdout_exits_141_and_says_nothing(monkeypatch, capsys):
    def closed(args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(catalog, "cmd_workloads", closed)
    assert main(["workloads", "--json"]) == EXIT_BROKEN_PIPE == 141
    assert capsys.readouterr() == ("", "")


def test_only_a_closed_stdout_is_taken_for_the_reader_gone(monkeypatch, capsys):
    """A pipe without a reader polls POLLERR; with its reader it does not. A BrokenPipeError
    while stdout is fine (a broken connection) is not hidden: one line, exit 1."""
    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "w") as pipe:
        monkeypatch.setattr(sys, "stdout", pipe)
        assert not root._stdout_is_closed()
        os.close(read_end)
        assert root._stdout_is_closed()
        monkeypatch.setattr(root, "_stdout_is_closed", lambda: False)

        def broken_connection(args):
            raise BrokenPipeError(32, "Broken pipe")
        monkeypatch.setattr(catalog, "cmd_presets", broken_connection)
        assert main(["presets"]) == 1
        monkeypatch.undo()
    assert capsys.readouterr().err == "batchscale: error: Broken pipe\n"


def test_errors_stay_one_line_with_exit_2(capsys):
    assert main(["validate", "--batch-sizes", "8,x"]) == 2
    err = capsys.readouterr().err
    assert err == "batchscale: error: batch_sizes: '8,x' must be comma-separated integers\n"


# ---- run --local stops its child ----------------------------------------------------
class FakeChild:
    """local_run as local_pipeline.stop_child sees it: ends on signal ``ends_on`` (SIGKILL always ends it)."""

    pid = 4242

    def __init__(self, ends_on=signal.SIGTERM):
        self.ends_on, self.returncode, self.waits = ends_on, None, []

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        self.waits.append(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired("local_run", timeout)
        return self.returncode


@pytest.fixture
def signals(monkeypatch):
    """os.killpg, recorded as (pgid, signal); it ends the fake children the signal ends."""
    sent, children = [], []

    def killpg(pgid, signum):
        if signum:  # 0 only asks whether the group still has a process
            sent.append((pgid, signum))
        if all(c.returncode is not None for c in children):
            raise ProcessLookupError  # nothing left in the group
        for child in children:
            if signum in (child.ends_on, signal.SIGKILL) and child.returncode is None:
                child.returncode = -signum
    monkeypatch.setattr(local_pipeline.os, "killpg", killpg)
    return sent, children


@pytest.mark.parametrize("ends_on", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_stop_child_terminates_then_kills_the_group(signals, ends_on):
    sent, children = signals
    children.append(FakeChild(ends_on))
    local_pipeline.stop_child(children[0], grace=0.3)
    # SIGKILL goes to the group also when local_run ended on SIGTERM: a task may linger
    assert sent == [(4242, signal.SIGTERM), (4242, signal.SIGKILL)]
    assert children[0].waits == [None] and children[0].returncode == -ends_on


def test_a_second_ctrl_c_while_stopping_kills_at_once(signals, monkeypatch):
    sent, children = signals
    child = FakeChild(signal.SIGKILL)  # ignores SIGTERM: stop_child would wait the whole grace
    children.append(child)

    def impatient(_seconds):
        raise KeyboardInterrupt  # the second Ctrl-C, while stop_child waits
    monkeypatch.setattr(local_pipeline.time, "sleep", impatient)
    local_pipeline.stop_child(child, grace=60.0)
    assert [s for _, s in sent] == [signal.SIGTERM, signal.SIGKILL] and child.returncode == -signal.SIGKILL


def test_ctrl_c_in_run_local_stops_the_child_and_says_how_to_resume(signals, monkeypatch, tmp_path, capsys):
    sent, children = signals
    started = []

    def popen(command, **kwargs):
        started.append((command, kwargs))
        child = FakeChild()
        children.append(child)

        def wait(timeout=None):  # Ctrl-C while the progress loop waits for the pipeline
            if timeout is not None and child.returncode is None:
                raise KeyboardInterrupt
            return FakeChild.wait(child, timeout)
        child.wait = wait
        return child

    monkeypatch.setattr(local_pipeline.subprocess, "Popen", popen)
    code = main(["run", "--local", "--store", str(tmp_path / "store"), "--work-dir", str(tmp_path / "w")])
    out, err = capsys.readouterr()
    assert code == 130
    assert err == f"batchscale: interrupted: {local_pipeline.RESUME_HINT}\n"
    assert "re-used" in err and out.startswith("study quickstart:")
    [(command, kwargs)] = started
    assert command[1:3] == ["-m", "batchscale.pipelines.local_run"] and kwargs["start_new_session"]
    assert [s for _, s in sent] == [signal.SIGTERM, signal.SIGKILL]
    assert children[0].returncode == -signal.SIGTERM
