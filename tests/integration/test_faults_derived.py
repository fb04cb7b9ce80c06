"""Derived files forged or damaged as a user or a copy would: race crossings and study.json's
search rounds. Each study ends with the uninterrupted study's result, the file named in one
line, or a one-line refusal naming it - never a silently changed result.

A tiny ``race`` study (digits, batch size 16, 4 trials, up to 2 rounds: its round 2 is a
re-search) run stage by stage as the pipeline runs it (``plan_stage``, ``run_pack``);
crossings of INFEASIBLE, unfinished and damaged trials, which need no training, are
tests/unit/test_crossing_checks.py.
"""

from __future__ import annotations

import json
import shutil

import pytest

from batchscale.analysis.reading.study_reader import load_study
from batchscale.analysis.statistics.steps import steps_to_result
from batchscale.rounds.derivation import DamagedRoundsError
from batchscale.rounds.planner import plan_stage, planned_trials
from batchscale.search.packs import pack_trials
from batchscale.store.layout import StudyStore
from batchscale.training.packs import run_pack
from batchscale.validation import parse_spec
from tests.conftest import share_datasets, tiny_spec_dict

pytestmark = pytest.mark.timeout(300)
BATCH = 16


def _spec(root: str, **changes):
    study = dict(protocol="race", batch_sizes=[BATCH], trials_per_batch_size=4, max_steps=300,
                 max_rounds=2)
    return parse_spec(tiny_spec_dict(root, **{**study, **changes}))


def _run(spec, store: StudyStore, lines: list[str]):
    """Every stage, as kfp.local runs the pipeline; ``lines`` gets what the run logs."""
    log = lines.append
    for stage in range(1, spec.max_rounds + 1):
        for pack in plan_stage(spec, store, stage, pack_size=4, log=log):
            run_pack(spec, pack_trials(spec, pack, store.read_rounds(spec, BATCH)), store, log=log)


def _result(spec, store: StudyStore):
    """Steps to result and best trial, and every trial's (id, parameters, steps, stop)."""
    table = steps_to_result(load_study(f"{store.root}/{spec.name}"), spec.goals[0])
    trials = [(t.trial_id, t.parameters, store.read_metadata(spec, t)["steps"],
               store.read_metadata(spec, t)["stop_reason"]) for t in planned_trials(spec, store)]
    return table[["batch_size", "steps_to_result", "best_trial"]].to_dict("records"), trials


def _study(tmp_path, digits_store, name: str, **changes):
    root = str(tmp_path / name)
    share_datasets(digits_store, root)
    return _spec(root, **changes), StudyStore(root)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, digits_store):
    spec, store = _study(tmp_path_factory.mktemp("clean"), digits_store, "clean")
    _run(spec, store, [])
    result = _result(spec, store)
    assert len(result[1]) == 8 and result[0][0]["steps_to_result"] > 0, result  # 2 rounds, a goal
    return result


def _study_json(spec, store: StudyStore) -> str:
    return f"{store.batch_dir(spec, BATCH)}/study.json"


def _recorded(spec, store: StudyStore) -> list:
    """Each recorded round's ids and range, as the spec writes it."""
    rounds = json.loads(store.fs.read_text(_study_json(spec, store)))["search_rounds"]
    return [(r["trial_ids"], r["search_space"]) for r in rounds]


def _edit_rounds(spec, store: StudyStore, change) -> None:
    path = _study_json(spec, store)
    study_json = json.loads(store.fs.read_text(path))
    change(study_json["search_rounds"])
    store.fs.write_text(path, json.dumps(study_json, indent=2))


@pytest.mark.parametrize("forged", ["g0-s10-t99", "g0-s10-t1", "g7-s10-t1", "g0-sx-t1"])
def test_a_forged_crossing_is_named_once_and_stops_nobody(tmp_path, digits_store, capsys,
                                                          uninterrupted, forged):
    """A crossing naming a trial that does not exist, a step at which the trial never
    crossed (trial 1 never reaches the goal), a goal the study does not have, or no
    crossing's name at all."""
    spec, store = _study(tmp_path, digits_store, "forged")
    store.fs.write_bytes(f"{spec.name}/crossings/{BATCH}/{forged}", b"")
    _run(spec, store, [])
    assert _result(spec, store) == uninterrupted
    named = [line for line in capsys.readouterr().out.splitlines() if forged in line]
    assert named and all("ignored: " in line for line in named), named


def test_a_round_range_changed_before_training_is_derived_again(tmp_path, digits_store,
                                                                 uninterrupted):
    spec, store = _study(tmp_path, digits_store, "range")
    store.register_study(spec)
    _edit_rounds(spec, store, lambda rounds: rounds[0]["search_space"]["learning_rate"].update(
        min=2.0, max=20.0))  # every trial would diverge
    lines = []
    _run(spec, store, lines)
    assert _result(spec, store) == uninterrupted
    [named] = [line for line in lines if "rewritten" in line]
    assert named.startswith(store.url(_study_json(spec, store))) and "search round 1" in named
    assert "search_space (learning_rate)" in named


def test_changed_trial_ids_train_no_extra_trial(tmp_path, digits_store, uninterrupted):
    spec, store = _study(tmp_path, digits_store, "ids")
    store.register_study(spec)
    _edit_rounds(spec, store, lambda rounds: rounds[0].update(trial_ids=[1, 9]))
    lines = []
    _run(spec, store, lines)
    assert _result(spec, store) == uninterrupted
    assert any("trial_ids [1, 9]" in line and "[1, 4]" in line for line in lines), lines
    assert not store.fs.exists(f"{store.batch_dir(spec, BATCH)}/9/metadata.json")


@pytest.mark.parametrize("edit", ["range", "ids", "deleted"])
def test_a_finished_study_whose_rounds_were_edited_heals_without_training(
        tmp_path, digits_store, uninterrupted, edit):
    spec, store = _study(tmp_path, digits_store, edit)
    _run(spec, store, [])
    before = store.fs.read_text(_study_json(spec, store))
    changes = {
        "range": lambda rounds: rounds[1]["search_space"]["learning_rate"].update(max=9.0),
        "ids": lambda rounds: rounds[1].update(trial_ids=[5, 12]),
        "deleted": lambda rounds: rounds.pop(),
    }
    _edit_rounds(spec, store, changes[edit])
    lines = []
    _run(spec, store, lines)
    assert _result(spec, store) == uninterrupted
    assert store.fs.read_text(_study_json(spec, store)) == before
    assert not [line for line in lines if "starts at step 0" in line or "resumed" in line], lines
    if edit != "deleted":  # a deleted round is planned again, as the planner plans any round
        assert [line for line in lines if "search round 2" in line], lines


def test_a_round_its_trials_were_trained_from_is_refused_in_one_line(tmp_path, digits_store,
                                                                     uninterrupted):
    """Trials already trained from a wrong round (as the code before the check trained them):
    the run refuses, naming study.json and the trial, and changes nothing; repaired as the
    line says (delete the folders of the trials from that round on, run again), the study
    ends with the uninterrupted result."""
    spec, store = _study(tmp_path, digits_store, "trained")
    _run(spec, store, [])
    _edit_rounds(spec, store, lambda rounds: rounds[1]["search_space"]["learning_rate"].update(
        max=9.0))
    trial = planned_trials(spec, store)[4]  # trial 5, the first of round 2
    meta = store.read_metadata(spec, trial)
    store.write_metadata(spec, trial, {**meta, "parameters": {**meta["parameters"],
                                                             "learning_rate": 5.0}})
    before = _recorded(spec, store)
    with pytest.raises(DamagedRoundsError) as refused:
        _run(spec, store, [])
    message = str(refused.value)
    assert "\n" not in message and message.startswith(store.url(_study_json(spec, store)))
    assert "trial 5" in message and "search round 2" in message
    assert _recorded(spec, store) == before  # the forged round stays for inspection
    assert store.read_metadata(spec, trial)["parameters"]["learning_rate"] == 5.0
    for later in planned_trials(spec, store)[4:]:  # the repair, as the line says
        shutil.rmtree(f"{store.root}/{store.trial_dir(spec, later)}")
    _run(spec, store, [])
    assert _result(spec, store) == uninterrupted


def test_a_grown_study_keeps_its_rounds(tmp_path, digits_store):
    """What a study may grow by (budget, trials per batch size) never reads as a changed
    round: the rounds were planned under the smaller values they record."""
    spec, store = _study(tmp_path, digits_store, "grown")
    _run(spec, store, [])
    rounds = store.read_rounds(spec, BATCH)
    grown = _spec(store.root, max_steps=400, trials_per_batch_size=5, max_rounds=3)
    lines = []
    _run(grown, store, lines)
    assert store.read_rounds(grown, BATCH)[:2] == rounds
    assert not [line for line in lines if "study.json" in line], lines
