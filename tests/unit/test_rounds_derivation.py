"""Rounds recorded before ``planned_with`` existed, in a study whose budget grew since.

Such a round records no budget, and the trials before it that stopped at the old budget
have since continued: their rows past the old budget would plan another round. The
derivation (``batchscale.rounds.derivation``) tries each budget those trials ran under, so a
legitimate older round is kept as recorded; when none reproduces it and its trials were
trained, the run refuses in one line: a round is never dropped with its trained trials.
No training: trials are written through the trainer's ``finish_trial``.
"""

from __future__ import annotations

import json

import pytest

from batchscale.cli.main import main
from batchscale.rounds.derivation import DamagedRoundsError
from batchscale.rounds.planner import plan_stage, planned_trials
from batchscale.store.layout import StudyStore
from batchscale.training.trial_lifecycle import finish_trial
from batchscale.validation import default_spec_dict, parse_spec

pytestmark = pytest.mark.timeout(60)
BATCH = 64


def _spec(root: str, budget: int):
    return parse_spec({**default_spec_dict(), "store": root, "batch_sizes": [BATCH],
                       "trials_per_batch_size": 4, "max_steps": budget, "max_rounds": 3,
                       "search_space": {"learning_rate": {"scale": "log", "min": 0.01, "max": 0.1}},
                       "fixed": {"momentum": 0.9}})


def _finish(store, spec, trial, rows, outcome):
    metadata = {"trial_id": trial.trial_id, "batch_size": BATCH, "parameters": trial.parameters,
                "status": "INCOMPLETE", "max_steps": spec.max_steps[BATCH]}
    finish_trial(store, spec, trial, metadata, rows, outcome, rows[-1]["step"], 4000, 1.0, 1.0,
                 log=lambda *_: None)


def _row(step: int, error: float) -> dict:
    return {"step": step, "val/classification_error": error, "wall_time": step / 100}


def _legacy_study(root: str, first_diverges: bool):
    """Round 1 under a budget of 100: no trial reaches the goal (trial 1 diverges, or not),
    so round 2 re-searches around the closest; its record then loses ``planned_with`` (as
    rounds were recorded before), its trials finish; then the budget grows to 200 and round
    1's budget-stopped trials continue, the closest reaching the goal at 200."""
    spec, store = _spec(root, 100), StudyStore(root)
    plan_stage(spec, store, 1, 4, log=lambda *_: None)
    first = planned_trials(spec, store)
    for trial in first:
        error = 0.1 + 0.01 * trial.trial_id
        if first_diverges and trial.trial_id == 1:
            _finish(store, spec, trial, [_row(0, 0.9), _row(10, float("nan"))],
                    ("INFEASIBLE", "diverged"))
        else:
            _finish(store, spec, trial, [_row(0, 0.9), _row(100, error)], ("COMPLETE", "budget"))
    plan_stage(spec, store, 2, 4, log=lambda *_: None)
    path = f"{store.batch_dir(spec, BATCH)}/study.json"
    study_json = json.loads(store.fs.read_text(path))
    assert "no trial reached" in study_json["search_rounds"][1]["reason"]
    del study_json["search_rounds"][1]["planned_with"]
    store.fs.write_text(path, json.dumps(study_json))
    for trial in planned_trials(spec, store)[4:]:
        _finish(store, spec, trial, [_row(0, 0.9), _row(60, 0.05)], ("COMPLETE", "goal"))
    grown = _spec(root, 200)
    for trial in first:
        if not (first_diverges and trial.trial_id == 1):
            meta = store.read_metadata(grown, trial)
            rows = [_row(0, 0.9), _row(100, 0.1 + 0.01 * trial.trial_id),
                    _row(200, 0.05 if trial.trial_id == 2 else 0.1)]
            _finish(store, grown, trial, rows, ("COMPLETE", "goal" if trial.trial_id == 2
                                               else "budget"))
            assert store.read_metadata(grown, trial)["steps"] == 200 != meta["steps"]
    return grown, store, path


def _rounds(store, path: str) -> list[dict]:
    return json.loads(store.fs.read_text(path))["search_rounds"]


def test_an_older_round_is_kept_when_a_budget_its_trials_ran_under_reproduces_it(tmp_path):
    spec, store, path = _legacy_study(str(tmp_path), first_diverges=True)
    before = _rounds(store, path)
    lines = []
    plan_stage(spec, store, 1, 4, log=lines.append)
    assert lines == [] and _rounds(store, path) == before
    assert [t.trial_id for t in planned_trials(spec, store)] == list(range(1, 9))


def test_an_older_round_no_budget_reproduces_is_refused_not_dropped(tmp_path):
    """Every trial before it continued (none records the old budget): the round cannot be
    derived, and its trials were trained, so the run refuses in one line naming the file."""
    spec, store, path = _legacy_study(str(tmp_path), first_diverges=False)
    before = _rounds(store, path)
    with pytest.raises(DamagedRoundsError) as refused:
        plan_stage(spec, store, 1, 4, log=lambda *_: None)
    message = str(refused.value)
    assert message.startswith(f"{store.url(path)}: search round 2") and "\n" not in message
    assert "trial 5 was already trained from it" in message
    assert _rounds(store, path) == before


def test_run_local_refuses_before_it_starts_exit_3(tmp_path, capsys):
    """The same refusal at the command line: before kfp starts or anything is written, one
    line naming the file, exit 3 (a damaged store, not bad input)."""
    spec, store, path = _legacy_study(str(tmp_path / "store"), first_diverges=False)
    spec_file = tmp_path / "spec.json"  # JSON is YAML
    spec_file.write_text(json.dumps(spec.to_dict()))
    files = {p: store.fs.read_bytes(p) for p in store.fs.list_files("", recursive=True)}
    capsys.readouterr()
    assert main(["run", "--local", str(spec_file), "--work-dir", str(tmp_path / "work")]) == 3
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"batchscale: error: {store.url(path)}: search round 2")
    assert {p: store.fs.read_bytes(p) for p in store.fs.list_files("", recursive=True)} == files
