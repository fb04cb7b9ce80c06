"""Honest errors, fault by fault: each ends with one line on stderr naming the file and the
exit status of its kind (docs/bad-input.md#exit-statuses), the store byte-identical:
2 an input, 3 a damaged store, 1 a file that could not be read or written, 70 a bug (never
reported as bad input). The faults are made as a user or a crash would make them, in a
store in the paper's layout (tests/paper_database.py), through the real ``main``.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
from pathlib import Path

import pytest

import tests.paper_database as db
from batchscale.cli.local_pipeline import failure_reason
from batchscale.cli.main import main
from batchscale.pipelines.task_log import failures
from tests.integration.test_cli_bad_input import _snapshot

ROOT = importlib.import_module("batchscale.cli.main")  # the module (its package exports main)
LONG = "a" * 300  # longer than any file system's longest name (255 bytes)


@pytest.fixture
def paper(tmp_path):
    """A study in the paper's layout; returns (its URL, its folder)."""
    url = db.write_paper_database(str(tmp_path / "db"))
    return url, Path(url)


def _one_line(capsys, prefix: str) -> str:
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix), err
    return lines[0]


def test_a_file_where_the_report_folder_must_be_is_one_line_exit_3(paper, capsys):
    url, folder = paper
    (folder / "report").write_text("not a folder")
    before = _snapshot(folder)
    capsys.readouterr()
    assert main(["report", url, "--resamples", "0"]) == 3
    line = _one_line(capsys, "batchscale: error: ")
    assert line == (f"batchscale: error: {folder / 'report'} is a file where the report needs a "
                    "folder; move it away or delete it, then run the same command again (the "
                    "report is written anew from the trials)")
    assert _snapshot(folder) == before


def test_a_folder_where_summary_json_must_be_is_one_line_exit_3(paper, capsys):
    url, folder = paper
    (folder / "report" / "summary.json").mkdir(parents=True)
    before = _snapshot(folder)
    capsys.readouterr()
    assert main(["report", url, "--resamples", "0"]) == 3
    _one_line(capsys, f"batchscale: error: {folder / 'report' / 'summary.json'} is a folder where "
                      "the report writes a file; move it away")
    assert _snapshot(folder) == before  # no temp file left, no other report file rewritten


def test_an_out_that_is_a_file_is_bad_input(paper, tmp_path, capsys):
    url, folder = paper
    (tmp_path / "out").write_text("mine")
    before = _snapshot(folder)
    capsys.readouterr()
    assert main(["report", url, "--resamples", "0", "--out", str(tmp_path / "out")]) == 2
    _one_line(capsys, f"batchscale: error: --out: {tmp_path / 'out'} is a file where the report "
                      "needs a folder")
    assert _snapshot(folder) == before and (tmp_path / "out").read_text() == "mine"


def test_a_copied_trial_folder_is_named_not_an_ambiguous_series(paper, capsys):
    """A finished trial's folder copied to a new id: its metadata.json names the trial it
    came from. Two rows claimed one trial ("The truth value of a Series is ambiguous",
    exit 2); now the copy is a damaged file, left out and named, exit 3."""
    url, folder = paper
    trials = folder / "2"
    shutil.copytree(trials / "1", trials / "9")
    capsys.readouterr()
    assert main(["report", url, "--resamples", "0"]) == 3
    copied = trials / "9" / "metadata.json"
    assert capsys.readouterr().err == (
        f"batchscale: warning: {copied} has trial_id 1 but sits in the folder of trial_id 9 "
        "(copied from another trial?); trial 2/9 left out\n")


def test_report_goal_writes_beside_the_studys_own_report(paper, capsys):
    url, folder = paper
    assert main(["report", url, "--resamples", "0"]) == 0  # the study's own report
    before = _snapshot(folder / "report")
    capsys.readouterr()
    assert main(["report", url, "--goal", "classification_error<0.1", "--resamples", "0"]) == 0
    beside = folder / "report" / "goal-classification_error-below-0.1"
    assert f"report: {beside / 'report.html'}" in capsys.readouterr().out
    after = _snapshot(folder / "report")
    assert {k: v for k, v in after.items() if k in before} == before  # its own, byte-identical
    assert {k.split(os.sep)[0] for k in set(after) - set(before)} == {beside.name}
    assert (beside / "summary.json").exists()


def test_a_path_too_long_for_the_file_system_is_bad_input(tmp_path, capsys):
    study = tmp_path / LONG / "quickstart"
    assert main(["report", str(study)]) == 2
    _one_line(capsys, f"batchscale: error: {tmp_path / LONG}")
    assert main(["run", "--local", "--store", str(tmp_path / LONG)]) == 2  # before anything starts
    _one_line(capsys, f"batchscale: error: store: {tmp_path / LONG}: a folder name of 300 bytes is "
                      "longer than the file system allows")
    assert list(tmp_path.iterdir()) == []


def test_an_unreadable_file_is_one_line_naming_it_exit_1(monkeypatch, tmp_path, capsys):
    def denied(args):
        raise PermissionError(13, "Permission denied", str(tmp_path / "x.json"))
    monkeypatch.setattr(ROOT, "make_parser", _parser_running(denied))
    assert main(["report", "x"]) == 1
    assert capsys.readouterr().err == f"batchscale: error: {tmp_path / 'x.json'}: Permission denied\n"


def test_a_bug_is_not_bad_input(monkeypatch, capsys):
    """An internal ValueError (the Series bug's kind) is exit 70 with one line saying where
    the traceback went, not exit 2."""
    def bug(args):
        raise ValueError("The truth value of a Series is ambiguous.")
    monkeypatch.setattr(ROOT, "make_parser", _parser_running(bug))
    assert main(["report", "x"]) == 70
    line = _one_line(capsys, "batchscale: internal error: ValueError: The truth value of a Series "
                             "is ambiguous. (at ")
    assert "this is a bug in batchscale, not in your input; traceback: " in line
    path = re.search(r"traceback: (\S+)$", line).group(1)
    assert 'raise ValueError("The truth value' in Path(path).read_text()
    os.unlink(path)


def _parser_running(handler):
    """make_parser whose every command runs ``handler``."""
    import argparse

    def make():
        parser = argparse.ArgumentParser(prog="batchscale")
        parser.add_argument("words", nargs="*")
        parser.set_defaults(func=handler)
        return parser
    return make


KFP = ("18:05:50.100 - INFO - Executing task \x1b[96m'train-pack'\x1b[0m\n"
       "            trial 16/1: starts at step 0\n"
       "            pack of 1 at batch size 16: step 7797, best val/classification_error 0.1320\n")
END = "18:06:10.998 - ERROR - Task \x1b[96m'train-pack'\x1b[0m finished with status \x1b[91mFAILURE\x1b[0m\n"


@pytest.mark.parametrize("last,reason", [
    ("            Killed\n", "Killed (SIGKILL: out of memory, or kill -9)"),
    ("            Segmentation fault (core dumped)\n",
     "Segmentation fault (SIGSEGV: a crash in native code)"),
    ("            KeyError: 'x'\n            Killed\n", "Killed (SIGKILL: out of memory, or kill -9)"),
    ("            ValueError: bad\n", "ValueError: bad"),
    ("", "no error line; its last output: pack of 1 at batch size 16: step 7797, best "
         "val/classification_error 0.1320"),
])
def test_a_failed_pack_says_why_in_one_line(last, reason):
    """What kfp.local's log holds when a pack task's process is killed (the shell of its
    ``sh -ec`` prints the signal), crashes, raises, or ends without a word."""
    log = KFP + last + END
    assert [(e.task, e.detail) for e in failures(log)] == [("train-pack", reason)]
    assert failure_reason(log + "RuntimeError: Pipeline 'x' finished with status FAILURE\n") == (
        f"task train-pack failed: {reason}")
