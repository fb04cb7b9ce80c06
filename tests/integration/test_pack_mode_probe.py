"""The pack mode measured for real: a pack's probe through its own step, its record in the
study's profile, a later pack reading it, and a resumed trial keeping its checkpoint's mode."""

from __future__ import annotations

import os

import pytest

from batchscale.analysis.reading.study_reader import load_study
from batchscale.analysis.statistics.pack_modes import pack_mode_table
from batchscale.search.trials import make_trials
from batchscale.store.checkpoints import checkpoint_path
from batchscale.store.layout import StudyStore
from batchscale.store.profiles import read_pack_modes
from batchscale.training.pack_mode import MODE_VARIABLE, TURNS, VMAPPED
from batchscale.training.packs import run_pack
from batchscale.training.trial_lifecycle import TrialLife
from batchscale.validation import parse_spec
from tests.conftest import share_datasets, tiny_spec_dict


def _study(digits_store, tmp_path, trials: int, **changes):
    root = str(tmp_path / "store")
    os.makedirs(root)
    share_datasets(digits_store, root)
    spec = parse_spec(tiny_spec_dict(root, batch_sizes=[16], trials_per_batch_size=trials,
                                     max_steps=20, **changes))
    store = StudyStore(root)
    store.register_study(spec)
    return spec, store


def test_a_pack_measures_its_mode_once_and_records_it(digits_store, tmp_path, monkeypatch):
    monkeypatch.delenv(MODE_VARIABLE)
    spec, store = _study(digits_store, tmp_path, 2)
    said = []
    metas = run_pack(spec, make_trials(spec), store, log=said.append)
    [record] = read_pack_modes(store.fs, spec.name)
    assert (record["batch_sizes"], record["width"], record["model"]) == ([16], 2, "fc_32")
    assert set(record["rates"]) == {VMAPPED, TURNS} and min(record["rates"].values()) > 0
    assert record["chosen"] in (VMAPPED, TURNS) and record["evaluations"] > 1
    width = 2 if record["chosen"] == VMAPPED else 1
    for meta in metas:
        assert (meta["pack_mode"], meta["pack_mode_source"], meta["vmap_width"]) == (
            record["chosen"], "probe", width)
        assert meta["pack_mode_rates"] == record["rates"]
        assert store.fs.exists(f"{spec.name}/{meta['pack_mode_record']}")
    assert any(line.startswith("pack mode at batch size 16:") and "probe" in line for line in said)

    for trial in make_trials(spec):  # the same pack afresh: the profile's choice, no probe
        store.fs.delete(f"{store.trial_dir(spec, trial)}/metadata.json")
        if store.fs.exists(checkpoint_path(spec, trial)):  # kept by a stop at the budget
            store.fs.delete(checkpoint_path(spec, trial))
    said.clear()
    metas = run_pack(spec, make_trials(spec), store, log=said.append)
    assert read_pack_modes(store.fs, spec.name) == [record]
    assert {(m["pack_mode"], m["pack_mode_source"]) for m in metas} == {(record["chosen"], "profile")}
    assert any("the study's profile" in line for line in said)

    # the report's "Pack modes" table: the mode the trials trained in beside the rates
    table, notes = pack_mode_table(load_study(f"{spec.store}/{spec.name}"))
    [row] = table.to_dict("records")
    assert (row["batch sizes"], row["trained in"], row["chosen"], notes) == (
        "16", f"{record['chosen']}: 2", record["chosen"], [])
    assert row["trial-steps/s (measured)"] == (f"turns {record['rates'][TURNS]:,.0f}; "
                                              f"vmapped {record['rates'][VMAPPED]:,.0f}")


class _Killed(BaseException):
    """Stands for kill -9: no handler in the pack catches it."""


def test_a_resumed_trial_keeps_the_mode_it_started_in(digits_store, tmp_path, monkeypatch):
    spec, store = _study(digits_store, tmp_path, 3, checkpoint_seconds=0.001)
    write = TrialLife._write_checkpoint

    def write_then_die(self, snapshot):
        write(self, snapshot)
        raise _Killed

    monkeypatch.setattr(TrialLife, "_write_checkpoint", write_then_die)
    with pytest.raises(_Killed):  # taking turns (tests/conftest.py): trial 1 checkpointed alone
        run_pack(spec, make_trials(spec), store, log=lambda *_: None)
    monkeypatch.undo()
    trials = make_trials(spec)
    assert [store.fs.exists(checkpoint_path(spec, t)) for t in trials] == [True, False, False]
    monkeypatch.setenv(MODE_VARIABLE, VMAPPED)  # the pack's mode now: vmapped
    metas = run_pack(spec, trials, store, log=lambda *_: None)
    assert [(m["pack_mode"], m["pack_mode_source"], m["vmap_width"]) for m in metas] == [
        (TURNS, "checkpoint", 1), (VMAPPED, MODE_VARIABLE, 2), (VMAPPED, MODE_VARIABLE, 2)]
