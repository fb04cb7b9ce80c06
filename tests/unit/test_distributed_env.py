"""A multi-host pack's process reads its place from the environment (``distributed``), and
refuses a missing or wrong variable in one line before it joins anything or writes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from batchscale.training import distributed_pack
from batchscale.training.distributed import ProcessEnv, Team, process_env
from batchscale.training.keras_setup import process_rows

GOOD = {"BATCHSCALE_COORDINATOR": "trial-0.trial:8476", "BATCHSCALE_NUM_PROCESSES": "4",
        "BATCHSCALE_PROCESS_ID": "2"}


def test_the_place_comes_from_the_environment():
    assert process_env(GOOD) == ProcessEnv("trial-0.trial:8476", 4, 2)
    indexed = {**GOOD, "BATCHSCALE_PROCESS_ID": "", "JOB_COMPLETION_INDEX": "3"}
    assert process_env(indexed).process_id == 3  # an Indexed Job's pod
    assert process_env({**GOOD, "JOB_COMPLETION_INDEX": "3"}).process_id == 2  # ours wins
    assert process_env({**GOOD, "BATCHSCALE_COORDINATOR": "[::1]:99"}).coordinator == "[::1]:99"


@pytest.mark.parametrize("change, named", [
    ({"BATCHSCALE_COORDINATOR": None}, "BATCHSCALE_COORDINATOR=''"),
    ({"BATCHSCALE_COORDINATOR": "trial-0"}, "BATCHSCALE_COORDINATOR='trial-0': must be HOST:PORT"),
    ({"BATCHSCALE_COORDINATOR": "h:70000"}, "a port from 1 to 65535"),
    ({"BATCHSCALE_NUM_PROCESSES": "two"}, "BATCHSCALE_NUM_PROCESSES='two': must be the number"),
    ({"BATCHSCALE_NUM_PROCESSES": "0"}, "BATCHSCALE_NUM_PROCESSES=0: the number of processes must be >= 1"),
    ({"BATCHSCALE_PROCESS_ID": None}, "BATCHSCALE_PROCESS_ID (or JOB_COMPLETION_INDEX"),
    ({"BATCHSCALE_PROCESS_ID": "4"}, "BATCHSCALE_PROCESS_ID=4: this process's index must be 0 to 3"),
    ({"BATCHSCALE_PROCESS_ID": None, "JOB_COMPLETION_INDEX": "x"}, "JOB_COMPLETION_INDEX='x'"),
])
def test_a_missing_or_wrong_variable_is_named_in_one_line(change, named):
    env = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    with pytest.raises(ValueError) as err:
        process_env(env)
    assert named in str(err.value) and "\n" not in str(err.value)


def test_one_process_agrees_with_itself_without_jax():
    team = Team.solo()
    assert team.writer and team.label == ""
    row = {"step": 3, "val/x": 0.1}
    assert team.same_row(row) is row
    assert team.chunk(False, True, 0.5) == (False, True, 0.5)
    assert team.same_choice(("COMPLETE", "goal"), ()) == ("COMPLETE", "goal")
    assert process_rows(32) == slice(None)  # not joined: the whole batch


def test_a_row_travels_bit_for_bit(monkeypatch):
    """Rows go between processes as the bits of float64s (JAX without x64 would round them
    to float32, and a goal's threshold could then be crossed in one process only)."""
    team = Team(1, 2)
    monkeypatch.setattr(team, "_broadcast", lambda values: values.copy())  # the writer's own
    row = {"step": 7, "val/cross_entropy_error": 2.3615704140878835, "train/x": float("nan"),
           "wall_time": 1e-300}
    agreed = team.same_row(row)
    assert agreed["step"] == 7 and isinstance(agreed["step"], int)
    assert np.array([agreed["val/cross_entropy_error"], agreed["wall_time"]]).tobytes() == \
        np.array([row["val/cross_entropy_error"], row["wall_time"]]).tobytes()
    assert np.isnan(agreed["train/x"])


def test_the_entry_refuses_bad_input_before_joining(monkeypatch, capsys, tmp_path):
    for name, value in GOOD.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("BATCHSCALE_NUM_PROCESSES", "many")
    assert distributed_pack.main(["{}", "{}"]) == 2
    assert capsys.readouterr().err.strip() == \
        "BATCHSCALE_NUM_PROCESSES='many': must be the number of processes, an integer >= 1"

    monkeypatch.setenv("BATCHSCALE_NUM_PROCESSES", "4")
    assert distributed_pack.main(["{}"]) == 2
    assert capsys.readouterr().err.strip() == distributed_pack.USAGE
    assert distributed_pack.main(["{not json", "{}"]) == 2
    assert capsys.readouterr().err.strip().startswith("SPEC_JSON: not JSON")
    spec = {"name": "s", "store": str(tmp_path / "store"), "backend": "tensorflow",
            "workload": {"dataset": "digits", "model": "fc_32", "optimizer": "sgd"},
            "batch_sizes": [32], "trials_per_batch_size": 1,
            "search_space": {"learning_rate": {"scale": "log", "min": 0.01, "max": 0.1}},
            "goals": [{"metric": "classification_error", "value": 0.2}], "max_steps": 10}
    pack = {"pack_id": "p", "batch_size": 32, "trial_ids": [1]}
    assert distributed_pack.main([json.dumps(spec), json.dumps(pack)]) == 2
    assert "backend: 'tensorflow'" in capsys.readouterr().err
    assert distributed_pack.main([json.dumps({**spec, "backend": "jax"}), "[]"]) == 2
    assert "PACK_JSON: must be a JSON object" in capsys.readouterr().err
    assert not (tmp_path / "store").exists()  # nothing written


@pytest.mark.parametrize("pack,words", [
    ({"pack_id": "p", "batch_size": 64, "trial_ids": [1]}, "batch size 64 is not one of the study's"),
    ({"pack_id": "p", "batch_size": 32, "trial_ids": [7]}, "trial id 7 belongs to no search round"),
])
def test_the_entry_refuses_a_pack_of_trials_the_study_does_not_hold_in_one_line(
        pack, words, monkeypatch, capsys, tmp_path):
    """A pack the study cannot hold (a batch size not its own, a trial no search round
    gives) is bad input as the rest: exit 2, one line, nothing written (it was a
    traceback)."""
    for name, value in {**GOOD, "BATCHSCALE_NUM_PROCESSES": "1", "BATCHSCALE_PROCESS_ID": "0"}.items():
        monkeypatch.setenv(name, value)
    spec = {"name": "s", "store": str(tmp_path / "store"), "backend": "jax",
            "workload": {"dataset": "digits", "model": "fc_32", "optimizer": "sgd"},
            "batch_sizes": [32], "trials_per_batch_size": 1,
            "search_space": {"learning_rate": {"scale": "log", "min": 0.01, "max": 0.1}},
            "goals": [{"metric": "classification_error", "value": 0.2}], "max_steps": 10}
    assert distributed_pack.main([json.dumps(spec), json.dumps(pack)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("PACK_JSON: ") and words in err[0], err
    assert not (tmp_path / "store").exists()  # nothing written
