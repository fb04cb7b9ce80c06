"""A ``--goal`` whose comparison the shell swallowed: unquoted, ``--goal metric>0.9`` reaches
batchscale as ``--goal metric`` (``>0.9`` became a redirection to a new empty file named
``0.9``). Every command taking ``--goal`` refuses it in one line that says to quote it."""

import os
import time

import pytest

from batchscale.cli.main import main
from batchscale.cli.options import check_goal_flags
from batchscale.core.spec import SpecError

ERROR = "batchscale: error: "


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(ERROR), err
    return err[len(ERROR):].rstrip("\n")


@pytest.mark.parametrize("argv", [
    ["validate", "--goal", "classification_error"],
    ["run", "--local", "--goal", "classification_error"],
    ["report", "some/study", "--goal", "classification_error"],
    ["compare", "a", "b", "--goal", "classification_error"],
])
def test_a_bare_metric_gets_a_hint_to_quote_the_goal(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no file the shell made here
    assert main(argv) == 2
    assert _error(capsys) == (
        "--goal: 'classification_error' has no comparison; the shell may have taken '<VALUE' or "
        "'>VALUE' as a redirection: quote the goal, --goal 'classification_error<VALUE'")
    assert os.listdir(tmp_path) == []  # nothing written: refused before the store is touched


def test_the_hint_writes_the_metrics_own_direction_and_keeps_the_split(tmp_path):
    with pytest.raises(SpecError, match=r"--goal 'val/average_precision>VALUE'$"):
        check_goal_flags(["classification_error<0.1", " val/average_precision "], folder=str(tmp_path))


def test_the_empty_file_a_redirection_just_made_is_named_and_gives_the_value(tmp_path):
    (tmp_path / "0.9").write_bytes(b"")  # what `--goal average_precision>0.9` leaves
    with pytest.raises(SpecError) as err:
        check_goal_flags(["average_precision"], folder=str(tmp_path))
    message = str(err.value)
    assert message.startswith("--goal: 'average_precision' has no comparison; the shell likely "
                              "took '>0.9' as a redirection (an empty file '0.9' was made in this "
                              "folder ")
    assert message.endswith("s ago; delete it): quote the goal, --goal 'average_precision>0.9'")
    with pytest.raises(SpecError, match=r"--goal 'classification_error<0.9'$"):  # its direction
        check_goal_flags(["classification_error"], folder=str(tmp_path))


@pytest.mark.parametrize("name, content, age", [
    ("0.9", b"", 3600),         # made an hour ago: not this command's
    ("0.9", b"kept\n", 0),      # has content: not a redirection of a refused command
    ("notes", b"", 0),          # not a number
])
def test_files_that_no_redirection_of_this_command_made_are_not_named(tmp_path, name, content, age):
    path = tmp_path / name
    path.write_bytes(content)
    then = time.time() - age
    os.utime(path, (then, then))
    with pytest.raises(SpecError, match=r"may have taken '<VALUE' or '>VALUE'"):
        check_goal_flags(["classification_error"], folder=str(tmp_path))


def test_goals_with_a_comparison_pass_to_the_one_goal_syntax(tmp_path):
    check_goal_flags(["classification_error<0.1", "val/average_precision>0.3", "x=1"], folder=str(tmp_path))
    check_goal_flags(None)
    check_goal_flags("classification_error<0.1")  # compare's --goal is one string
