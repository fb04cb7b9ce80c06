"""The results table fits the terminal: at 80 columns the steps-to-result table of a
quickstart-like study (tests/report_store.py, eleven columns, about 155 characters) stacks
its headers and leaves out, and names, the columns it cannot fit; ``--wide`` (or no width)
prints every column as before."""

from __future__ import annotations

import pytest

from batchscale.analysis.pages.console_tables import fit_table
from batchscale.analysis.pages.report_sections import STEP_COLUMNS
from batchscale.analysis.reading.study_reader import load_study
from batchscale.analysis.statistics.steps import all_steps_to_result
from batchscale.cli.analysis import print_summary
from batchscale.cli.main import make_parser
from batchscale.cli.options import table_width
from tests import report_store as qs


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    """What ``report`` prints its table from: the study's steps to result (the rest of the
    report, figures included, is not needed here)."""
    study = load_study(qs.build(str(tmp_path_factory.mktemp("tables") / "store")))
    return all_steps_to_result(study), {}


def _table(out: str) -> list[str]:
    """The lines of the table printed: after its title, up to the report's location."""
    lines = out.splitlines()
    assert lines[0] == "goal classification_error<0.08 (val)"
    end = next(i for i, line in enumerate(lines) if line.startswith("report: "))
    return lines[1:end]


def _printed(summary, width, capsys) -> list[str]:
    print_summary(*summary, "/r/report.html", width=width)
    return _table(capsys.readouterr().out)


def test_a_table_that_fits_keeps_its_one_line_header():
    lines = fit_table(["batch_size", "steps"], [["8", "770"], ["4000", "32"]], width=80)
    assert lines == ["batch_size  steps", "         8    770", "      4000     32"]


def test_headers_stack_and_columns_go_empty_first_then_named_then_from_the_right():
    columns = ["batch_size", "steps_to_result", "censored", "reached", "learning_rate", "momentum"]
    rows = [["8", "770", "", "2", "0.01", "0.9"], ["4000", "32", "", "3", "0.003456", "0.95"]]
    lines = fit_table(columns, rows, width=34, leave_out_first=["reached"], more="; --wide")
    assert lines == [
        "        steps",
        "batch      to  learning",
        " size  result      rate  momentum",
        "    8     770      0.01       0.9",
        " 4000      32  0.003456      0.95",
        "(not shown, to fit 34 columns:",
        "censored (empty), reached; --wide)",
    ]
    narrower = fit_table(columns, rows, width=30, leave_out_first=["reached"])
    assert narrower[2] == " size  result      rate" and narrower[-1].endswith("momentum)")


def test_values_are_never_cut_the_first_column_always_stays():
    lines = fit_table(["b", "x"], [["123456789", "1"]], width=4)
    assert lines[:2] == ["        b", "123456789"]  # wider than asked: a value is never cut


def test_the_results_table_fits_80_columns(summary, capsys):
    table = _printed(summary, 80, capsys)
    assert max(len(line) for line in table) <= 80
    rows = [line.split() for line in table if line.split() and line.split()[0].isdigit()]
    assert [int(r[0]) for r in rows] == list(qs.BATCH_SIZES)  # every batch size, whole
    assert [int(r[1]) for r in rows] == [qs.steps_at(b) for b in qs.BATCH_SIZES]
    note = " ".join(line for line in table if not line.split() or not line.split()[0].isdigit())
    assert ("(not shown, to fit 80 columns: censored (empty), examples_to_result, complete; "
            "--wide shows every column)") in note


def test_wide_or_a_wide_terminal_shows_every_column(summary, capsys):
    wide = _printed(summary, None, capsys)
    assert wide[0].split() == STEP_COLUMNS and len(wide) == 1 + len(qs.BATCH_SIZES)
    assert max(len(line) for line in wide) > 80
    assert _printed(summary, 200, capsys) == wide


@pytest.mark.parametrize("argv", [["report", "s"], ["run", "--local"]])
def test_the_width_is_the_terminals_unless_wide(argv, monkeypatch):
    parser = make_parser()
    monkeypatch.setenv("COLUMNS", "80")  # what shutil.get_terminal_size reads first
    assert table_width(parser.parse_args(argv)) == 80
    monkeypatch.setenv("COLUMNS", "132")
    assert table_width(parser.parse_args(argv)) == 132
    assert table_width(parser.parse_args([*argv, "--wide"])) is None
