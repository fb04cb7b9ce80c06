"""Fault injection: damaged trial files before the round planner, and step times outside
physical bounds. Each case builds the store state a crash, a cut or a forger leaves, runs
the real planner (``plan_stage``, what each stage of ``run`` runs) or the real ``batchscale
report``, and checks that it ends with the uninterrupted result or one line naming the
file, never a silent change. Nothing trains: trials are finished through the trainer's own
``finish_trial``, as in tests/unit/test_integrity.py."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from batchscale.analysis.reading.study_reader import load_study
from batchscale.analysis.statistics.step_times import read_probes, step_time_profile
from batchscale.cli.analysis import EXIT_DAMAGED
from batchscale.cli.main import main
from batchscale.rounds.planner import plan_stage, planned_trials
from batchscale.store.layout import StudyStore
from batchscale.store.profiles import read_step_times, write_step_times
from batchscale.training.trial_lifecycle import finish_trial
from batchscale.validation import default_spec_dict, parse_spec
from tests import report_store
from tests.unit.test_censoring import WORKLOAD
from tests.unit.test_integrity import finished_study

pytestmark = pytest.mark.timeout(60)  # a planner or report that loops fails, never blocks


# ---- the round planner never plans from files the report rejects -------------------------

def _spec(root: str):
    return parse_spec({**default_spec_dict(), "store": root, "batch_sizes": [64],
                       "trials_per_batch_size": 4, "max_steps": 100, "search_space": {
                           "learning_rate": {"scale": "log", "min": 0.01, "max": 0.1},
                           "momentum": {"scale": "reverse_log", "min": 0.8, "max": 0.97}}})


def _rows(step: int) -> list[dict]:
    return [{"step": 0, "val/classification_error": 0.9, "wall_time": 0.0},
            {"step": step, "val/classification_error": 0.05, "wall_time": 1.0}]


def _finish(store, spec, trial, step):
    finish_trial(store, spec, trial, {"trial_id": trial.trial_id, "batch_size": 64,
                                      "parameters": trial.parameters, "status": "INCOMPLETE"},
                 _rows(step), ("COMPLETE", "goal"), step, 4000, 1.0, 1.0, log=lambda *_: None)


def _round_one_finished(root: str):
    """Round 1 of a batch size, every trial finished: the one with the largest learning
    rate (at the top of its range) reaches the goal first, so round 2 re-searches around it."""
    spec, store = _spec(root), StudyStore(root)
    plan_stage(spec, store, 1, 4, log=lambda *_: None)
    trials = planned_trials(spec, store)
    best = max(trials, key=lambda t: t.parameters["learning_rate"])
    for trial in trials:
        _finish(store, spec, trial, 40 if trial is best else 80)
    return spec, store, best


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """Stage 2 of the undamaged study: its packs and the rounds it records."""
    spec, store, best = _round_one_finished(str(tmp_path_factory.mktemp("planner") / "store"))
    packs = plan_stage(spec, store, 2, 4, log=lambda *_: None)
    assert [p.trial_ids for p in packs] == [(5, 6, 7, 8)]
    rounds = store.read_rounds(spec, 64)
    assert f"best trial {best.trial_id}'s learning_rate" in rounds[1].reason
    return packs, rounds


def _forge(data: bytes) -> bytes:  # the best trial "never reached" the goal
    return data.replace(b",0.05,", b",0.5,")


DAMAGES = {
    "forged": ("measurements.csv", _forge, "does not match metadata.json's record"),
    "cut mid-row": ("measurements.csv", lambda d: d[:-7], "does not match metadata.json's record"),
    "deleted": ("measurements.csv", None, "is missing (the trial is COMPLETE)"),
    "malformed record": ("metadata.json", lambda d: json.dumps(
        {**json.loads(d), "measurements": "none"}).encode(), "malformed measurements record"),
    "another trial's folder copied in": ("metadata.json", lambda d: json.dumps(
        {**json.loads(d), "trial_id": 99}).encode(), "has trial_id 99 but sits in the folder"),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_the_planner_plans_no_round_from_a_trial_the_report_leaves_out(damage, uninterrupted,
                                                                       tmp_path):
    spec, store, best = _round_one_finished(str(tmp_path / "store"))
    name, change, problem = DAMAGES[damage]
    path = f"{store.trial_dir(spec, best)}/{name}"
    if change is None:
        store.fs.delete(path)
    else:
        store.fs.write_bytes(path, change(store.fs.read_bytes(path)))
    lines = []
    assert plan_stage(spec, store, 2, 4, log=lines.append) == []  # no round planned from it
    assert len(store.read_rounds(spec, 64)) == 1
    assert lines == [line for line in lines if store.url(path) in line] and len(lines) == 1
    assert problem in lines[0] and f"the round planner leaves trial 64/{best.trial_id} out" in lines[0]
    # the report rejects the very same file
    assert [d.file for d in load_study(store.url(spec.name)).damaged] == [store.url(path)]
    assert plan_stage(spec, store, 3, 4, log=lambda *_: None) == []  # a later stage: still none
    # repaired as docs/store.md says (delete the trial's folder, run the study again): the
    # trial trains anew, then the next stage plans what the undamaged study planned
    shutil.rmtree(f"{store.root}/{store.trial_dir(spec, best)}")
    assert [p.trial_ids for p in plan_stage(spec, store, 1, 4, log=lambda *_: None)] == [
        (best.trial_id,)]
    _finish(store, spec, best, 40)
    packs, rounds = uninterrupted
    assert plan_stage(spec, store, 2, 4, log=lambda *_: None) == packs
    assert store.read_rounds(spec, 64) == rounds


# ---- step-time probes outside physical bounds ---------------------------------------------

PROBE = {"devices": 1, "steps": 100, "precision": "float32", "device_kind": "cpu",
         "preset": "local", "cpu_cores": 2, "measured": "2026-11-26T00:00:00Z", "source": "probe"}
BAD_PROBES = {"1e300": "1e+300, outside physical bounds", "0": "0, outside physical bounds",
              "-1": "-1, outside physical bounds", "NaN": "nan, outside physical bounds",
              '"fast"': "'fast', not a number", "1e-300": "1e-300, outside physical bounds"}


def _report(store, name: str, capsys) -> tuple[int, list[str], list]:
    """``batchscale report``'s exit status, stderr lines and time-to-result rows."""
    code = main(["report", store.url(name), "--resamples", "0"])
    err = capsys.readouterr().err.splitlines()
    doc = json.loads(store.fs.read_text(f"{name}/report/summary.json"))
    rows = [(r["batch_size"], r["seconds_per_step"], r["step_time_source"], r["time_seconds"])
            for r in doc["time_and_cost"]["per_batch_size"]]
    return code, err, rows


def _profile(location: str):
    """What the report's time to result rests on: the damaged files the reader names and
    the step-time profile (``step_time_profile`` of the trials' metadata and the probes)."""
    study = load_study(location)
    return ([d.message for d in study.damaged],
            step_time_profile(study.metadata, read_probes(study)).table)


def _copy(files: dict, root: str) -> StudyStore:
    store = StudyStore(root)
    for path, data in files.items():
        store.fs.write_bytes(path, data)
    return store


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """A finished study whose trials trained in packs (no solo timing): its step times
    are its probes', one per batch size, 20 ms each; and its profile without the probe of
    batch size 16 (the uninterrupted result of a study whose probe there is left out)."""
    root = tmp_path_factory.mktemp("probed")
    spec, store = finished_study(str(root / "store"))
    write_step_times(store.fs, spec.name, [{**PROBE, "batch_size": b, "seconds_per_step": 0.02}
                                           for b in spec.batch_sizes])
    files = {p: store.fs.read_bytes(p) for p in store.fs.list_files("", recursive=True)}
    without = _copy(files, str(root / "without"))
    without.fs.delete(PROBE_16.format(study=spec.name))
    damaged, profile = _profile(without.url(spec.name))
    packed = "packed only (not a solo time)"
    assert damaged == [] and list(profile["source"]) == ["probe", packed, "probe", "probe"]
    return spec, files, without, profile


PROBE_16 = "{study}/profile/step_times/16-1-cpu-float32.json"


def _forged_probe(files, spec, root, value) -> tuple[StudyStore, str]:
    store, probe = _copy(files, root), PROBE_16.format(study=spec.name)
    record = json.dumps({**PROBE, "batch_size": 16, "seconds_per_step": "VALUE"})
    store.fs.write_text(probe, record.replace('"VALUE"', value))
    return store, probe


@pytest.mark.parametrize("value", BAD_PROBES)
def test_a_probe_outside_physical_bounds_is_named_and_left_out(value, probed, tmp_path):
    spec, files, _, expected = probed
    store, probe = _forged_probe(files, spec, str(tmp_path), value)
    damaged, profile = _profile(store.url(spec.name))
    assert len(damaged) == 1 and damaged[0].startswith(
        f"{store.url(probe)} has seconds_per_step {BAD_PROBES[value]}")
    pd.testing.assert_frame_equal(profile, expected)
    # the packs' reader leaves it out too, in one line, so their next probe replaces it
    lines = []
    assert 16 not in {r["batch_size"] for r in read_step_times(store.fs, spec.name, lines.append)}
    assert len(lines) == 1 and store.url(probe) in lines[0]


def test_the_report_names_a_probe_of_1e300_seconds_and_exits_3(probed, tmp_path, capsys):
    """The issue's case: a probe of 10^300 s per step gave a time to result of 6.56e+298 h."""
    spec, files, _, _ = probed
    store, probe = _forged_probe(files, spec, str(tmp_path), "1e300")
    code, err, rows = _report(store, spec.name, capsys)
    # the other batch sizes' steps to result (500, 200, 150) x 20 ms; none at 16
    assert rows == [(8, 0.02, "probe", 10.0), (16, None, "packed only (not a solo time)", None),
                    (32, 0.02, "probe", 4.0), (64, 0.02, "probe", 3.0)]
    assert code == EXIT_DAMAGED and len(err) == 1
    assert err[0].startswith(f"batchscale: warning: {store.url(probe)} has seconds_per_step 1e+300")


def test_a_probe_outside_physical_bounds_is_never_written(tmp_path):
    store = StudyStore(str(tmp_path))
    good = {**PROBE, "batch_size": 8, "seconds_per_step": 0.02}
    for bad in ({**good, "seconds_per_step": 1e300}, {**good, "steps": 0}):
        with pytest.raises(ValueError, match="nothing written"):
            write_step_times(store.fs, "s", [good, bad])
        assert store.fs.list_files("s", recursive=True) == []
    write_step_times(store.fs, "s", [good])
    assert read_step_times(store.fs, "s") == [good]


# ---- trial timings outside physical bounds -----------------------------------------------

BAD_TIMINGS = {"1e300": "has train_seconds 1e+300 over", "-5": "has train_seconds -5, not",
               "0.0": None, "NaN": "has train_seconds nan, not", "Infinity": "has train_seconds inf",
               '"slow"': "has train_seconds 'slow', not", "1e-12": "has train_seconds 1e-12 over"}
TIMED = f"{report_store.NAME}/{WORKLOAD}/64/2/metadata.json"  # a solo trial's timing


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
    """A study whose trials all trained alone (tests/report_store.py), and its profile
    with trial 64/2 untimed (the uninterrupted result once its timing is left out)."""
    root = tmp_path_factory.mktemp("timed")
    report_store.build(str(root / "store"))
    files = {p: StudyStore(str(root / "store")).fs.read_bytes(p)
             for p in StudyStore(str(root / "store")).fs.list_files("", recursive=True)}
    without = _copy(files, str(root / "without"))
    meta = json.loads(files[TIMED])
    without.fs.write_text(TIMED, json.dumps({k: v for k, v in meta.items()
                                             if k not in ("train_seconds", "examples_per_second")}))
    damaged, profile = _profile(without.url(report_store.NAME))
    sources = dict(zip(profile["batch_size"], profile["source"]))
    assert damaged == [] and sources.pop(64) == "trials (few)"  # 2 solo timings left there
    assert set(sources.values()) == {"trials"}
    return files, without, profile


def _forged_timing(files, root, value) -> StudyStore:
    store = _copy(files, root)
    meta = json.loads(files[TIMED])
    store.fs.write_text(TIMED, json.dumps({**meta, "train_seconds": "VALUE"}).replace('"VALUE"', value))
    return store


@pytest.mark.parametrize("value", BAD_TIMINGS)
def test_a_trial_timing_outside_physical_bounds_is_named_and_left_out(value, timed, tmp_path):
    """A solo trial's train_seconds forged in its metadata.json: only its timing is left
    out (its steps to result still count), as if it had never been timed."""
    files, _, expected = timed
    store = _forged_timing(files, str(tmp_path), value)
    damaged, profile = _profile(store.url(report_store.NAME))
    pd.testing.assert_frame_equal(profile, expected)
    if BAD_TIMINGS[value] is None:  # 0: not timed, as older writers left it; no damage
        assert damaged == []
        return
    assert len(damaged) == 1 and damaged[0].startswith(f"{store.url(TIMED)} {BAD_TIMINGS[value]}")
    assert "trial 64/2's timing left out" in damaged[0]
    assert len(load_study(store.url(report_store.NAME)).trials) == 4 * len(report_store.BATCH_SIZES)


def test_the_report_names_an_absurd_train_seconds_and_exits_3(timed, tmp_path, capsys):
    files, _, profile = timed
    store = _forged_timing(files, str(tmp_path), "1e300")
    code, err, rows = _report(store, report_store.NAME, capsys)
    assert [(r[0], r[2]) for r in rows] == list(zip(profile["batch_size"], profile["source"]))
    assert [r[1] for r in rows] == pytest.approx(list(profile["seconds_per_step"]))
    assert all(0 < r[3] < 60 for r in rows)  # seconds to result, as the trials timed them
    assert code == EXIT_DAMAGED and len(err) == 1
    assert err[0].startswith(f"batchscale: warning: {store.url(TIMED)} has train_seconds 1e+300")


def test_a_trial_damaged_after_its_batch_size_planned_a_round_is_named_at_the_next_stage(tmp_path):
    """Round 2 is recorded, then a trial of round 1 is cut: the stage that re-derives the
    rounds (``rounds.derivation``) cannot read it, names it in one line and plans nothing
    from it; the recorded round is kept, not rewritten."""
    spec, store, best = _round_one_finished(str(tmp_path / "store"))
    plan_stage(spec, store, 2, 4, log=lambda *_: None)
    rounds = store.read_rounds(spec, 64)
    path = f"{store.trial_dir(spec, best)}/measurements.csv"
    store.fs.write_bytes(path, store.fs.read_bytes(path)[:-7])
    lines = []
    plan_stage(spec, store, 3, 4, log=lines.append)
    assert len(lines) == 1 and lines[0].startswith(f"batch size 64: {store.url(path)} does not match")
    assert store.read_rounds(spec, 64) == rounds
