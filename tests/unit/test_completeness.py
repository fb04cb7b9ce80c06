"""Unfinished trials read from a local store written by hand (COMPLETE, INFEASIBLE,
INCOMPLETE with and without a checkpoint, a damaged checkpoint, missing), their rendering in
the report pages and the CLI line, and the study reader never taking ``checkpoints/`` for a
data set. The whole report of such a study: tests/integration/test_report.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from batchscale.analysis.pages.report_sections import unfinished_section
from batchscale.analysis.pages.sections import render_html, render_markdown
from batchscale.analysis.reading.completeness import (
    RESUME_HINT,
    UnfinishedTrial,
    id_ranges,
    unfinished_line,
    unfinished_table,
    unfinished_trials,
)
from batchscale.analysis.reading.study_reader import load_study
from batchscale.cli.analysis import print_summary
from batchscale.search.trials import make_trials
from batchscale.store.checkpoints import checkpoint_path, write_checkpoint
from batchscale.store.layout import StudyStore
from batchscale.validation import default_spec_dict, parse_spec


def unfinished_html(analysis):  # the section, as the page shows it
    return render_html(unfinished_section(analysis))


def unfinished_markdown(analysis):
    return render_markdown(unfinished_section(analysis))


ROWS = [{"step": 0, "val/classification_error": 0.9, "wall_time": 0.0},
        {"step": 50, "val/classification_error": 0.05, "wall_time": 1.0}]
# (batch size, trial id) -> status written by hand; every other trial of the spec is missing
WRITTEN = {(16, 1): "COMPLETE", (16, 2): "INCOMPLETE", (16, 3): "INFEASIBLE", (16, 4): "INCOMPLETE",
           (64, 1): "COMPLETE", (64, 2): "INCOMPLETE"}


def partial_study(root: str):
    """A study of 2 batch sizes x 5 trials of which only WRITTEN have metadata; 16/2 and
    64/5 (missing) have checkpoints, 64/2 a damaged one."""
    spec = parse_spec({**default_spec_dict(), "store": root, "batch_sizes": [16, 64],
                       "trials_per_batch_size": 5})
    store = StudyStore(root)
    store.register_study(spec)
    trials = {(t.batch_size, t.trial_id): t for t in make_trials(spec)}
    for key, status in WRITTEN.items():
        trial = trials[key]
        store.write_metadata(spec, trial, {"trial_id": trial.trial_id, "status": status,
                                           "parameters": trial.parameters, "steps": 50})
        store.write_measurements(spec, trial, ROWS)
    write_checkpoint(store, spec, trials[16, 2], {"w": np.ones(4)}, {"step": 120})
    write_checkpoint(store, spec, trials[64, 5], {"w": np.ones(4)}, {"step": 30})
    write_checkpoint(store, spec, trials[64, 2], {"w": np.ones(4)}, {"step": 7})
    path = checkpoint_path(spec, trials[64, 2])
    store.fs.write_bytes(path, store.fs.read_bytes(path)[:-40])  # truncated
    return spec, store


def test_unfinished_trials_name_missing_and_incomplete_with_their_checkpoints(tmp_path):
    spec, store = partial_study(str(tmp_path / "store"))
    got = unfinished_trials(spec, store)
    assert [(u.batch_size, u.trial_id, u.status, u.resume_step) for u in got] == [
        (16, 2, "INCOMPLETE", 120), (16, 4, "INCOMPLETE", None), (16, 5, "MISSING", None),
        (64, 2, "INCOMPLETE", None), (64, 3, "MISSING", None), (64, 4, "MISSING", None),
        (64, 5, "MISSING", 30)]
    assert got[0].note == "checkpoint at step 120" and got[1].note == "no checkpoint"
    damaged = got[3].note
    assert damaged.startswith(f"checkpoint {store.url(f'{spec.name}/checkpoints/64/2.npz')} "
                              "is damaged (")
    # statuses already read (the study reader's) are taken as given, not read again
    known = {(16, 2): "COMPLETE", (64, 3): "INFEASIBLE", (64, 1): "INCOMPLETE"}
    again = {(u.batch_size, u.trial_id) for u in unfinished_trials(spec, store, known)}
    assert again == {(16, 4), (16, 5), (64, 1), (64, 2), (64, 4), (64, 5)}


def test_a_finished_study_has_nothing_unfinished(tmp_path):
    spec = parse_spec({**default_spec_dict(), "store": str(tmp_path), "batch_sizes": [8],
                       "trials_per_batch_size": 2})
    store = StudyStore(str(tmp_path))
    store.register_study(spec)
    for trial, status in zip(make_trials(spec), ("COMPLETE", "INFEASIBLE")):
        store.write_metadata(spec, trial, {"trial_id": trial.trial_id, "status": status})
    assert unfinished_trials(spec, store) == []
    assert unfinished_line([], 2) == "All 2 trials of the study are finished."


def test_compact_ids_and_the_table_per_batch_size():
    assert id_ranges([7, 1, 2, 3, 5, 8, 2]) == "1–3, 5, 7–8"
    assert id_ranges([4]) == "4" and id_ranges([]) == ""
    unfinished = [UnfinishedTrial(16, 1, "MISSING"), UnfinishedTrial(16, 2, "MISSING"),
                  UnfinishedTrial(16, 3, "INCOMPLETE", 40, "checkpoint at step 40"),
                  UnfinishedTrial(32, 9, "INCOMPLETE")]
    table = unfinished_table(unfinished)
    assert list(table.columns) == ["batch_size", "unfinished", "missing", "incomplete",
                                   "resumable (trial@step)"]
    assert table.fillna("—").values.tolist() == [[16, 3, "1–2", "3", "3@40"],
                                                 [32, 1, "—", "9", "—"]]
    assert unfinished_line(unfinished, 10) == (
        "4 of 10 trials are unfinished (2 MISSING, 2 INCOMPLETE; 1 resumable from a "
        "checkpoint); the report counts only the finished ones.")


def test_the_pages_name_the_trials_and_say_how_to_resume(tmp_path):
    spec, store = partial_study(str(tmp_path / "store"))
    analysis = SimpleNamespace(unfinished=unfinished_trials(spec, store), expected_trials=10)
    markdown = "\n".join(unfinished_markdown(analysis))
    assert "## Unfinished trials" in markdown
    assert "| 16 | 3 | 5 | 2, 4 | 2@120 |" in markdown
    assert "| 64 | 4 | 3–5 | 2 | 5@30 |" in markdown
    assert "- batch size 64, trial 2: checkpoint " in markdown and "is damaged" in markdown
    assert f"To finish them, {RESUME_HINT}." in markdown
    assert "batchscale run --local SPEC" in RESUME_HINT
    page = "".join(unfinished_html(analysis))
    assert '<h2 id="unfinished">Unfinished trials</h2>' in page
    assert "<td>3–5</td>" in page and "<td>2@120</td>" in page and "same store on a cluster" in page
    done = SimpleNamespace(unfinished=[], expected_trials=10)
    assert unfinished_markdown(done) == ["All 10 trials of the study are finished.", ""]
    assert "Unfinished" not in "".join(unfinished_html(done))
    paper = SimpleNamespace(unfinished=[], expected_trials=None)  # no spec: nothing to say
    assert unfinished_markdown(paper) == [] and unfinished_html(paper) == []


def test_the_cli_prints_one_line_about_unfinished_trials(capsys):
    import pandas as pd

    steps = pd.DataFrame(columns=["goal", "split", "batch_size", "steps_to_result"])
    doc = {"expected_trials": 10, "unfinished": [
        UnfinishedTrial(16, 5, "MISSING").to_dict(), UnfinishedTrial(16, 2, "INCOMPLETE", 9).to_dict()]}
    print_summary(steps, doc, "/r/report.html")
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2:] == [
        "unfinished: 2 of 10 trials (1 resumable from a checkpoint), listed under 'Unfinished "
        "trials' in the report; run the same study again to finish them", "report: /r/report.html"]
    print_summary(steps, {"expected_trials": 10, "unfinished": []}, "/r/report.html")
    assert "unfinished" not in capsys.readouterr().out


@pytest.mark.parametrize("with_spec", [True, False])
def test_the_study_reader_never_takes_checkpoints_for_a_data_set(tmp_path, with_spec):
    spec, store = partial_study(str(tmp_path / "store"))
    if not with_spec:  # a copy without our spec: the reader walks the folders
        store.fs.delete(f"{spec.name}/study_spec.json")
    assert store.fs.list_dirs(spec.name) == ["checkpoints", "mnist_5k"]
    study = load_study(store.url(spec.name), goals=["classification_error<0.1"])
    assert study.location == store.url(f"{spec.name}/mnist_5k/fc_128_128/nesterov_momentum")
    assert study.layout == ("batchscale" if with_spec else "paper")
    assert set(map(tuple, study.trials[["batch_size", "trial_id"]].values.tolist())) == set(WRITTEN)
