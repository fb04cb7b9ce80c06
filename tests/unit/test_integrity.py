"""No silent wrong answer from a damaged file: every single-file damage (cut mid-row, cut
inside the last number, cut to its first line, emptied, garbled, deleted) of every file kind
of a finished study (metadata.json, measurements.csv, study.json, study_spec.json) either
leaves every reported number as it was or is named in ``Study.damaged``; files without a
record (the paper's layout) are checked too; the CLI says so on stderr and exits 3. The
same on gs://: tests/integration/test_integrity_gcs.py."""

from __future__ import annotations

import json
import math
import random
from types import SimpleNamespace

import pytest

from batchscale.analysis.pages.report_sections import damaged_section
from batchscale.analysis.pages.sections import render_html, render_markdown
from batchscale.analysis.reading.study_files import Damage
from batchscale.analysis.reading.study_reader import load_study
from batchscale.analysis.statistics.regimes import fit_regimes
from batchscale.analysis.statistics.steps import crossings, steps_to_result
from batchscale.cli.analysis import EXIT_DAMAGED, print_damaged
from batchscale.cli.main import main
from batchscale.core.spec import TrialSpec
from batchscale.search.trials import make_trials
from batchscale.store.layout import StudyStore
from batchscale.training.trial_lifecycle import finish_trial
from batchscale.validation import default_spec_dict, parse_spec
from tests import paper_database as db


def damaged_html(analysis):  # the section, as the page shows it
    return render_html(damaged_section(analysis))


def damaged_markdown(analysis):
    return render_markdown(damaged_section(analysis))


S_MIN, B_STAR = 100, 32  # the fabricated curve: steps to result S(B) = S_MIN (1 + B_STAR / B)
BATCH_SIZES = (8, 16, 32, 64)
DAMAGED_BATCH, DAMAGED_TRIAL = 16, 1  # the best trial of a batch size the fit needs


def _rows(crossing: int) -> list[dict]:
    """A trial's evaluations: above the goal (0.08) until ``crossing``, below from there."""
    return [{"step": step, "val/classification_error": value, "wall_time": step / 100}
            for step, value in ((0, 0.9), (crossing // 2, 0.2), (crossing, 0.05),
                                (crossing + 40, 0.024))]


def finished_study(root: str):
    """A finished study of 4 batch sizes x 2 trials written through the trainer's
    ``finish_trial`` (no training): trial 1 reaches the goal at S(B), trial 2 10% later."""
    spec = parse_spec({**default_spec_dict(), "store": root, "batch_sizes": list(BATCH_SIZES),
                       "trials_per_batch_size": 2})
    store = StudyStore(root)
    store.register_study(spec)
    for trial in make_trials(spec):
        crossing = int(S_MIN * (1 + B_STAR / trial.batch_size) * (1 + 0.1 * (trial.trial_id - 1)))
        rows = _rows(crossing)
        metadata = {"trial_id": trial.trial_id, "batch_size": trial.batch_size,
                    "parameters": trial.parameters, "status": "INCOMPLETE"}
        finish_trial(store, spec, trial, metadata, rows, ("COMPLETE", "goal"), rows[-1]["step"],
                     4000, 1.0, 1.0, log=lambda *_: None)
    return spec, store


def numbers(location: str):
    """What the report states: (steps to result per batch size, the regime fit's S_min and
    B*) for the study's first goal on validation, and the damaged files' URLs."""
    study = load_study(location)
    goal = study.goals[0]
    steps = steps_to_result(study, goal, "val")
    per_batch = {int(b): (None if math.isnan(s) else int(s))
                 for b, s in zip(steps["batch_size"], steps["steps_to_result"])}
    fit = fit_regimes(crossings(study, goal, "val"), resamples=0)
    regime = (round(fit.s_min.value, 6), round(fit.b_star.value, 6)) if fit.fitted else None
    return (per_batch, regime), [d.file for d in study.damaged]


def _cut_mid_row(data: bytes) -> bytes:
    return data[:len(data) // 2]


def _cut_last_number(data: bytes) -> bytes:
    return data.rstrip(b"\r\n")[:-3]  # 0.024 -> 0.0 and no line end: the reported case


def _first_line(data: bytes) -> bytes:
    return data[:data.index(b"\n") + 1]


def _garble(data: bytes) -> bytes:
    return random.Random(len(data)).randbytes(len(data))


DAMAGES = {"cut_mid_row": _cut_mid_row, "cut_last_number": _cut_last_number,
           "first_line_only": _first_line, "empty": lambda data: b"", "garbled": _garble,
           "deleted": None}
TRIAL = f"{DAMAGED_BATCH}/{DAMAGED_TRIAL}"
FILES = {"metadata.json": f"{TRIAL}/metadata.json",
         "measurements.csv": f"{TRIAL}/measurements.csv",
         "study.json": f"{DAMAGED_BATCH}/study.json", "study_spec.json": None}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """The study's files as written, and the numbers the report states for them."""
    root = str(tmp_path_factory.mktemp("integrity") / "store")
    spec, store = finished_study(root)
    files = {p: store.fs.read_bytes(p) for p in store.fs.list_files("", recursive=True)}
    return spec, files, numbers(store.url(spec.name))


def test_the_fabricated_study_is_fitted_and_rests_on_the_trial_damaged_below(pristine, tmp_path):
    """The damages below would change the numbers if a damaged file were silently
    dropped or misread: trial 16/1 is the best of its batch size, batch size 16 is needed."""
    spec, files, ((per_batch, regime), damaged) = pristine
    assert per_batch == {8: 500, 16: 300, 32: 200, 64: 150} and damaged == []
    assert regime == pytest.approx((S_MIN, B_STAR), rel=1e-3)
    metadata = json.loads(files[f"{spec.name}/{_workload(spec)}/{TRIAL}/metadata.json"])
    assert metadata["measurements"]["rows"] == 4 and len(metadata["measurements"]["sha256"]) == 64
    store = StudyStore(str(tmp_path))
    for path, data in files.items():
        if f"/{TRIAL}/" not in path:
            store.fs.write_bytes(path, data)
    (without, _), _ = numbers(store.url(spec.name))
    assert without[DAMAGED_BATCH] != per_batch[DAMAGED_BATCH]


def _workload(spec) -> str:
    w = spec.workload
    return f"{w.dataset}/{w.model}/{w.optimizer}"


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("kind", FILES)
def test_a_damaged_file_changes_no_number_or_is_named(kind, damage, pristine, tmp_path):
    spec, files, before = pristine
    path = (f"{spec.name}/study_spec.json" if FILES[kind] is None
            else f"{spec.name}/{_workload(spec)}/{FILES[kind]}")
    store = StudyStore(str(tmp_path))
    for name, data in files.items():
        if name != path:
            store.fs.write_bytes(name, data)
        elif DAMAGES[damage] is not None:
            store.fs.write_bytes(name, DAMAGES[damage](data))
    after, damaged = numbers(store.url(spec.name))
    assert after == before[0] or store.url(path) in damaged, (after, damaged)
    assert damaged == [store.url(path)]  # each of these damages is caught, and only it


def test_a_listed_batch_size_without_a_folder_is_named(pristine, tmp_path):
    spec, files, _ = pristine
    store = StudyStore(str(tmp_path))
    for name, data in files.items():
        if f"/{DAMAGED_BATCH}/" not in name:
            store.fs.write_bytes(name, data)
    (per_batch, _), damaged = numbers(store.url(spec.name))
    assert DAMAGED_BATCH not in per_batch
    assert damaged == [store.url(f"{spec.name}/{_workload(spec)}/{DAMAGED_BATCH}/study.json")]



def test_a_trial_folder_outside_the_studys_rounds_is_named_and_left_out(pristine, tmp_path):
    """A finished trial whose id its batch size's rounds do not hold (a folder copied in
    under a new id, or trained by an older run from a forged round) would lower steps to
    result silently (50 steps where batch size 32's best is 200): it is named as damage
    and the numbers stay the study's own."""
    spec, files, before = pristine
    store = StudyStore(str(tmp_path))
    for name, data in files.items():
        store.fs.write_bytes(name, data)
    stray = TrialSpec(spec.name, 32, 7, make_trials(spec)[0].parameters)
    rows = _rows(50)
    finish_trial(store, spec, stray, {"trial_id": 7, "batch_size": 32,
                                      "parameters": stray.parameters, "status": "INCOMPLETE"},
                 rows, ("COMPLETE", "goal"), rows[-1]["step"], 4000, 1.0, 1.0, log=lambda *_: None)
    after, damaged = numbers(store.url(spec.name))
    metadata = store.url(f"{spec.name}/{_workload(spec)}/32/7/metadata.json")
    assert after == before[0] and damaged == [metadata]
    assert load_study(store.url(spec.name)).damaged[0].message == (
        f"{metadata} is trial 7, not one of the trials its batch size's search rounds hold "
        "(1–2); trial 32/7 left out")

PAPER_DAMAGES = {
    "cut inside the last number": (lambda text: text.rstrip("\n")[:-1], "ends in the middle"),
    "a cell that is not a number": (lambda text: text.replace("0.15", "0.l5", 1), "not a number"),
    "a row short of a field": (lambda text: text.replace(",0.15\n", "\n", 1), "has 2 fields"),
    "header only": (lambda text: text.split("\n")[0] + "\n", "no rows"),
    "empty": (lambda text: "", "is empty"),
}


@pytest.mark.parametrize("damage", PAPER_DAMAGES)
def test_measurements_without_a_record_are_checked(damage, tmp_path):
    """The paper's layout has no record: a file that cannot be whole is still named."""
    change, problem = PAPER_DAMAGES[damage]
    url = db.write_paper_database(str(tmp_path))
    path = tmp_path / db.WORKLOAD / "2" / "5" / "measurements.csv"  # B=2's best trial (<0.2)
    path.write_text(change(path.read_text()))
    study = load_study(url)
    assert [(d.file, d.trial_id) for d in study.damaged] == [(str(path), 5)]
    assert problem in study.damaged[0].problem
    assert 5 not in set(study.trials.query("batch_size == 2")["trial_id"])


def test_a_batch_folder_with_trials_but_no_study_json_is_named(tmp_path):
    url = db.write_paper_database(str(tmp_path))
    (tmp_path / db.WORKLOAD / "8" / "study.json").unlink()
    study = load_study(url)
    assert study.batch_sizes == [2]
    assert [d.message for d in study.damaged] == [
        f"{tmp_path / db.WORKLOAD / '8' / 'study.json'} is missing; batch size 8 left out "
        "(3 trial folders)"]


def test_a_trial_without_a_record_but_finished_needs_its_measurements(tmp_path):
    url = db.write_paper_database(str(tmp_path))
    (tmp_path / db.WORKLOAD / "8" / "3" / "measurements.csv").unlink()  # COMPLETE
    (tmp_path / db.WORKLOAD / "2" / "4" / "measurements.csv").unlink()  # INCOMPLETE: fine
    study = load_study(url)
    assert [(d.batch_size, d.trial_id) for d in study.damaged] == [(8, 3)]
    assert "is missing (the trial is COMPLETE)" in study.damaged[0].message


def test_the_cli_names_each_damaged_file_on_stderr_and_exits_3(pristine, tmp_path, capsys):
    """Nothing readable at all (the only batch size's study.json is garbage): no report, one
    warning per file and an error, exit 3; the warning printer itself, as run --local uses it."""
    spec, files, _ = pristine
    store = StudyStore(str(tmp_path))
    for name, data in files.items():
        if name.endswith("/study_spec.json") or f"/{_workload(spec)}/8/" in name:
            store.fs.write_bytes(name, data)
    spec_doc = json.loads(files[f"{spec.name}/study_spec.json"])
    store.fs.write_text(f"{spec.name}/study_spec.json", json.dumps({**spec_doc, "batch_sizes": [8]}))
    bad = f"{spec.name}/{_workload(spec)}/8/study.json"
    store.fs.write_bytes(bad, b"\x00{")
    assert main(["report", store.url(spec.name), "--resamples", "0"]) == EXIT_DAMAGED
    err = capsys.readouterr().err.splitlines()
    assert err == [f"batchscale: warning: {store.url(bad)} is not valid JSON (Expecting value: "
                   "line 1 column 1 (char 0)); batch size 8 left out (2 trial folders)",
                   f"batchscale: error: study: no readable batch-size folder under "
                   f"{store.url(f'{spec.name}/{_workload(spec)}')}"]
    damage = Damage("/s/16/1/measurements.csv", "is empty", "trial 16/1 left out", 16, 1)
    assert print_damaged([damage.to_dict()]) == EXIT_DAMAGED and print_damaged([]) == 0
    assert capsys.readouterr().err == (
        "batchscale: warning: /s/16/1/measurements.csv is empty; trial 16/1 left out\n")


def test_the_report_pages_list_the_damaged_files():
    damage = Damage("/s/16/1/metadata.json", "holds a JSON list, not an object",
                    "trial 16/1 left out", 16, 1)
    page = "".join(damaged_html(SimpleNamespace(damaged=[damage])))
    assert '<h2 id="damaged">Damaged or unreadable files</h2>' in page
    assert "<code>/s/16/1/metadata.json</code> holds a JSON list" in page
    markdown = damaged_markdown(SimpleNamespace(damaged=[damage]))
    assert "- `/s/16/1/metadata.json` holds a JSON list, not an object; trial 16/1 left out" in markdown
    assert damaged_html(SimpleNamespace(damaged=[])) == []


def test_a_bare_relative_study_folder_is_read_like_dot_slash(pristine, tmp_path, monkeypatch):
    spec, files, before = pristine
    store = StudyStore(str(tmp_path / "store"))
    for name, data in files.items():
        store.fs.write_bytes(name, data)
    monkeypatch.chdir(tmp_path / "store")
    assert numbers(spec.name) == before == numbers(f"./{spec.name}")
    monkeypatch.chdir(tmp_path / "store" / spec.name)
    assert numbers(".") == before

