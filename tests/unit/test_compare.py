"""compare: studies side by side, numbers checked by hand against tests/paper_database.py.

Three copies of the paper-layout database under different workload names get different
default goals (PAPER_GOALS), so their steps to result differ:

- fashion_mnist/simple_cnn_base (goal classification_error<0.1): ANSWERS, B=2: 250, B=8: 100;
- cifar_10/resnet_8 (<0.3): B=2: trial 1's 0.25 at step 100 (trial 2's 0.3 is not strictly
  below) -> 100; B=8: trial 3's 0.15 at 50 -> 50;
- mnist/simple_cnn_base (<0.01): nothing in the database goes below 0.01 -> never reached.
"""

import argparse
import json
import math
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from batchscale.analysis.compare import (
    NORMALIZED,
    compare_studies,
    disambiguate,
    format_comparison,
    write_comparison,
)
from batchscale.analysis.statistics.intervals import regime_text
from batchscale.cli.analysis import DEFAULT_COMPARE_OUT
from batchscale.cli.analysis import add_commands as add_analysis_commands
from batchscale.core.critical_batch_size import DEFINITIONS
from batchscale.core.spec import SpecError
from batchscale.store.filesystem import open_root
from tests import paper_database as db

FM, CIFAR, MNIST = ("fashion_mnist/simple_cnn_base/momentum", "cifar_10/resnet_8/nesterov_momentum",
                    "mnist/simple_cnn_base/sgd")
FM_LABEL = f"{FM} (classification_error<0.1)"
CIFAR_LABEL = f"{CIFAR} (classification_error<0.3)"
MNIST_LABEL = f"{MNIST} (classification_error<0.01)"


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    base = tmp_path_factory.mktemp("compare")
    for name, workload in (("a", FM), ("b", CIFAR), ("c", MNIST), ("d", FM)):
        db.write_paper_database(str(base / name), workload)
    db.write_paper_database(str(base / "only2"), "cifar_10/resnet_8/sgd")
    shutil.rmtree(base / "only2" / "cifar_10/resnet_8/sgd" / "8")  # batch size 2 only
    return base


@pytest.fixture(scope="module")
def normalised(roots):
    return compare_studies([str(roots / "a"), str(roots / "b"), str(roots / "c")], normalize_at=8)


def steps(result, label_or_study, column="steps_to_result") -> dict:
    table = result.table
    rows = table[table["study"] == label_or_study]
    return {int(b): (None if math.isnan(v) else v) for b, v in zip(rows["batch_size"], rows[column])}


def test_default_goals_table_normalised_at_8(normalised):
    result = normalised
    assert [s.label for s in result.studies] == [FM_LABEL, CIFAR_LABEL, MNIST_LABEL]
    assert [s.goal for s in result.studies] == [
        "classification_error<0.1", "classification_error<0.3", "classification_error<0.01"]
    table = result.table
    assert list(table.columns) == ["study", "goal", "split", "batch_size", "trials", "reached",
                                   "steps_to_result", "examples_to_result", "best_trial", NORMALIZED]
    assert steps(result, FM) == {2: 250, 8: 100}
    assert steps(result, FM, "examples_to_result") == {2: 500, 8: 800}
    assert steps(result, CIFAR) == {2: 100, 8: 50}
    assert steps(result, CIFAR, "examples_to_result") == {2: 200, 8: 400}
    assert steps(result, MNIST) == {2: None, 8: None}
    assert steps(result, FM, NORMALIZED) == {2: 2.5, 8: 1.0}
    assert steps(result, CIFAR, NORMALIZED) == {2: 2.0, 8: 1.0}
    assert steps(result, MNIST, NORMALIZED) == {2: None, 8: None}
    assert table.query("study == @FM")["best_trial"].tolist() == [2, 3]
    assert table.query("study == @FM")["trials"].tolist() == [5, 3]
    wide = result.wide
    assert wide.index.tolist() == [2, 8] and list(wide.columns) == [FM_LABEL, CIFAR_LABEL, MNIST_LABEL]
    assert wide[CIFAR_LABEL].tolist() == [2.0, 1.0] and wide[MNIST_LABEL].isna().all()
    assert result.notes == [
        f"{MNIST_LABEL}: left out of the normalised comparison: the goal was not reached at batch size 8",
        f"{MNIST_LABEL}: no batch size reached the goal"]
    assert set(result.figures) == {"compare_steps_normalized.svg", "compare_steps.svg",
                                      "compare_examples.svg"}


def test_format_comparison_text(normalised):
    text = format_comparison(normalised)
    lines = text.splitlines()
    assert lines[0] == "validation steps to result, normalised to 1 at batch size 8:"
    assert lines[1].startswith(f"  {FM}: classification_error<0.1, ") and lines[1].endswith(f"a/{FM}")
    assert re.split(r"\s+", lines[4].strip()) == ["batch_size", FM, CIFAR, MNIST]  # by study name
    assert re.split(r"\s+", lines[5].strip()) == ["2", "2.5", "2", "n/a"]
    assert re.split(r"\s+", lines[6].strip()) == ["8", "1", "1", "n/a"]
    assert lines[7] == ("(— not reached; blank: batch size not measured; n/a: left out of the "
                        "normalisation (see the notes))")
    assert "note: " + normalised.notes[0] in lines


def test_goal_override_normalised_at_2_and_train_split(roots):
    result = compare_studies([str(roots / "a"), str(roots / "b")], goal="classification_error<0.2",
                             normalize_at=2)
    labels = [s.label for s in result.studies]
    assert labels == [f"{FM} (classification_error<0.2)", f"{CIFAR} (classification_error<0.2)"]
    want = {b: s for b, (s, _) in db.ANSWERS["classification_error<0.2"]["val"].items()}
    assert steps(result, FM) == steps(result, CIFAR) == want == {2: 120, 8: 50}
    assert steps(result, FM, NORMALIZED) == {2: 1.0, 8: 50 / 120}
    assert result.goal == "classification_error<0.2" and result.notes == []

    train = compare_studies([str(roots / "a")], split="train")
    assert steps(train, FM) == {b: s for b, (s, _) in db.ANSWERS["classification_error<0.1"]["train"].items()}
    assert set(train.table["split"]) == {"train"} and NORMALIZED not in train.table
    assert set(train.figures) == {"compare_steps.svg", "compare_examples.svg"}


def test_first_n_trials(roots):
    result = compare_studies([str(roots / "a")], goal="classification_error<0.2", num_trials=2)
    assert steps(result, FM) == {b: s for b, (s, _) in db.FIRST_TWO_VAL_02.items()}


def test_study_without_the_reference_batch_size_is_left_out(roots):
    only2 = "cifar_10/resnet_8/sgd"
    result = compare_studies([str(roots / "a"), str(roots / "only2")], normalize_at=8)
    assert steps(result, only2) == {2: 100}
    assert steps(result, only2, NORMALIZED) == {2: None}
    assert result.notes == [f"{only2} (classification_error<0.3): left out of the normalised "
                               "comparison: batch size 8 was not measured"]
    lines = format_comparison(result).splitlines()
    assert re.split(r"\s+", lines[4].strip()) == ["2", "2.5", "n/a"]
    assert re.split(r"\s+", lines[5].strip()) == ["8", "1"]  # blank: not measured
    plain = format_comparison(compare_studies([str(roots / "a"), str(roots / "only2")]))
    assert [re.split(r"\s+", line.strip()) for line in plain.splitlines()[3:6]] == [
        ["batch_size", FM, only2], ["2", "250", "100"], ["8", "100"]]


def test_duplicate_names_get_distinct_labels(roots):
    result = compare_studies([str(roots / "a"), str(roots / "d"), str(roots / "a")])
    studies = [s.study for s in result.studies]
    assert studies == [f"{FM} #1", f"{FM} [d]", f"{FM} #3"]
    assert len(set(result.table["study"])) == 3 and len(result.table) == 6
    header = format_comparison(result).splitlines()[4]
    assert all(f" {name}" in header for name in studies) and "[1]" not in header
    assert disambiguate(["x", "x"], ["/r/p/x", "/r/q/s/x"]) == ["x [p]", "x [q/s]"]
    assert disambiguate(["x", "y"], ["/a", "/a"]) == ["x", "y"]


def test_refusals(roots):
    with pytest.raises(SpecError, match=r"^normalize_at: batch size 4 was not measured by any study "
                                        r"\(measured: 2, 8\)$"):
        compare_studies([str(roots / "a")], normalize_at=4)
    with pytest.raises(SpecError, match="compare: give at least one study location"):
        compare_studies([])
    with pytest.raises(SpecError, match="split: 'test' must be one of val, train"):
        compare_studies([str(roots / "a")], split="test")
    with pytest.raises(SpecError, match="normalize_at: -2 must be a positive integer"):
        compare_studies([str(roots / "a")], normalize_at=-2)
    with pytest.raises(SpecError, match="goal: 'oops' must look like METRIC<VALUE"):
        compare_studies([str(roots / "a")], goal="oops")
    with pytest.raises(SpecError, match="nowhere is empty or does not exist"):
        compare_studies([str(roots / "nowhere")])


def check_outputs(fs, result):
    page = fs.read_text("compare.html")
    assert page.count('src="data:image/svg+xml;base64,') == len(result.figures) == page.count("<img")
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"<(link|script)\b", page)
    for name, png in result.figures.items():
        assert fs.read_bytes(name) == png
    doc = json.loads(fs.read_text("compare.json"))
    assert len(doc["rows"]) == len(result.table) and doc["notes"] == result.notes
    names = " | ".join(s.study for s in result.studies)  # columns headed by study name
    assert f"| batch_size | {names} |" in fs.read_text("compare.md")
    return page, doc


def test_write_comparison_local_leaves_other_files_alone(normalised, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    urls = write_comparison(normalised, str(out))
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["keep.txt", "compare.html", "compare.md", "compare.csv", "compare.json",
         "compare_steps.svg", "compare_steps_normalized.svg", "compare_examples.svg"])
    assert (out / "keep.txt").read_text() == "mine"
    assert urls["compare.html"] == str(out / "compare.html")
    _, doc = check_outputs(open_root(str(out)), normalised)
    assert doc["normalize_at"] == 8 and doc["studies"][0]["label"] == FM_LABEL
    # compare.json keeps its shape (keys in this order) whatever type carries the comparison
    assert list(doc) == ["goal", "split", "normalize_at", "num_trials", "notes", "studies", "rows",
                         "figures"]
    assert list(doc["studies"][0]) == ["label", "study", "name", "location", "title", "goal",
                                       "batch_sizes", "fit", "normalized"]
    assert doc["studies"][0]["fit"] is None and doc["studies"][2]["normalized"] is False
    csv = pd.read_csv(out / "compare.csv")
    assert csv.query("study == @CIFAR")[NORMALIZED].tolist() == [2.0, 1.0]


def parser():
    main = argparse.ArgumentParser(prog="batchscale")
    add_analysis_commands(main.add_subparsers(dest="command", required=True))
    return main


def test_cli_compare(roots, tmp_path, capsys):
    out = tmp_path / "cli-out"
    args = parser().parse_args(["compare", str(roots / "a"), str(roots / "b"), "--normalize-at", "8",
                                "--goal", "classification_error<0.2", "--out", str(out)])
    assert args.func(args) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "validation steps to result, normalised to 1 at batch size 8:"
    assert re.split(r"\s+", printed[4].strip()) == ["2", "2.4", "2.4"]  # 120 / 50
    assert printed[-1] == f"compare: {out / 'compare.html'}"
    assert (out / "compare.html").exists()
    defaults = parser().parse_args(["compare", "x"])
    assert (defaults.out, defaults.split, defaults.goal, defaults.normalize_at, defaults.trials,
            defaults.fit) == (DEFAULT_COMPARE_OUT, None, None, None, None, False)
    # The goal's split prefix chooses the split; an explicit --split may not contradict it.
    train = parser().parse_args(["compare", str(roots / "a"), "--goal", "train/classification_error<0.2",
                                 "--out", str(out)])
    assert train.func(train) == 0
    assert capsys.readouterr().out.startswith("training steps to result")
    clash = parser().parse_args(["compare", str(roots / "a"), "--goal", "train/classification_error<0.2",
                                 "--split", "val", "--out", str(out)])
    with pytest.raises(SpecError, match="split: 'val' contradicts the goal's prefix 'train/'"):
        clash.func(clash)
    bad = parser().parse_args(["compare", str(roots / "a"), "--normalize-at", "4", "--out", str(out)])
    with pytest.raises(SpecError, match="normalize_at: batch size 4 was not measured"):
        bad.func(bad)


def test_fit_with_three_batch_sizes(tmp_path):
    """A third batch size (32, a copy of 8's trials) lets the regime fit run and be drawn."""
    db.write_paper_database(str(tmp_path / "a"))
    base = tmp_path / "a" / FM
    shutil.copytree(base / "8", base / "32")
    meta = json.loads((base / "32" / "study.json").read_text())
    (base / "32" / "study.json").write_text(json.dumps({**meta, "batch_size": 32}))
    result = compare_studies([str(tmp_path / "a")], fit=True)
    assert steps(result, FM) == {2: 250, 8: 100, 32: 100}
    fit = result.studies[0].fit
    assert fit.fitted and fit.batch_sizes == (2, 8, 32)
    urls = write_comparison(result, str(tmp_path / "out"))
    assert "Regime fits" in open(urls["compare.html"]).read()
    markdown = open(urls["compare.md"]).read()  # the report's interval notation
    b_star = regime_text(fit.b_star, fit.batch_sizes, level=fit.level, short=True)
    assert f"| {FM} | classification_error<0.1 | " in markdown and f" {b_star} |" in markdown
    assert DEFINITIONS["b_star_fit"].definition in markdown  # which critical batch size B* is
    two = compare_studies([str(tmp_path / "a")], fit=True, goal="classification_error<0.09",
                          num_trials=1)
    assert steps(two, FM) == {2: None, 8: 100, 32: 100}  # trial 1 only: 0.09 at 400 is not < 0.09
    assert not two.studies[0].fit.fitted
    assert any("no regime fit" in n for n in two.notes)


def _machine_paths(tmp_path) -> list[str]:
    """Paths of this machine a written page must not name: the test's folder, the system's
    temporary folder, the home directory, the working directory, the repository, Python."""
    import os
    import sys
    import tempfile

    repository = str(Path(__file__).resolve().parents[2])
    paths = {str(tmp_path), tempfile.gettempdir(), os.path.expanduser("~"), os.getcwd(), repository,
             sys.prefix, "/tmp/"}
    return sorted(p for p in paths if p not in ("/", ""))


def test_no_page_names_a_path_of_this_machine(tmp_path, capsys):
    """report.html and compare.html (and their Markdown and JSON) of local stores, one of
    them with a damaged file a note names, hold no absolute path of this machine; the
    console, which serves this machine's user, says where the studies are."""
    from batchscale.analysis.reading.study_reader import load_study
    from batchscale.analysis.report import analyse, write_report
    from batchscale.cli.main import main
    from tests import report_store as qs
    from tests.unit.test_censoring import WORKLOAD

    one, two = qs.build(str(tmp_path / "store-one")), qs.build(str(tmp_path / "store-two"))
    (Path(two) / WORKLOAD / "8" / "2" / "measurements.csv").write_text("step,val/x\n0,")
    write_report(analyse(load_study(one), resamples=0))
    out = tmp_path / "compare"
    assert main(["compare", one, two, "--out", str(out)]) == 3  # the damaged file: exit 3
    console = capsys.readouterr()
    pages = {name: (tmp_path / "store-one" / "quickstart" / "report" / name).read_text()
             for name in ("report.html", "summary.md", "summary.json")}
    pages.update({name: (out / name).read_text() for name in ("compare.html", "compare.md", "compare.json")})
    for name, text in pages.items():
        text = re.sub(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=]+", "", text)  # figures: not text
        for path in _machine_paths(tmp_path):
            assert path not in text, (name, path)
    shown = f"quickstart/{WORKLOAD}"  # within its store
    assert f"quickstart [store-two]: classification_error&lt;0.08, <code>{shown}</code>" in pages[
        "compare.html"]
    assert f"{shown}/8/2/measurements.csv" in pages["compare.html"]
    assert json.loads(pages["compare.json"])["studies"][1]["location"] == shown
    assert f"{Path(two) / WORKLOAD}\n" in console.out  # the console: where it is
