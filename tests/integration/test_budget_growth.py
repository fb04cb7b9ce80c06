"""A budget that grows continues the trials that stopped at the old one (issue 13).

Trials trained to a 40-step budget, then the same study with 160 steps: every trial that
stopped at its budget trains on from the checkpoint it kept, up to 160 steps, and its
measurements then equal, row for row at every step both evaluated, those of the same
trial trained to 160 steps from the start (same data order, same constant schedule);
the 40-step run's rows are a prefix of it. A trial that reached its goal is re-used as it
was. Both trainers: the pack loop (JAX, one compiled step for the pack) and the per-trial
``fit`` trainer (``run_trial``), on a local store and (pack) on the GCS emulator. No
checkpoint is left but those of trials stopped at a budget.
"""

from __future__ import annotations

import pytest

from batchscale.search.trials import make_trials
from batchscale.store.checkpoints import read_checkpoint
from batchscale.store.layout import StudyStore
from batchscale.training.packs import run_pack
from batchscale.training.trainer import run_trial
from batchscale.validation import parse_spec
from batchscale.workloads.prepare import prepare_dataset
from tests.conftest import tiny_spec_dict

SHORT, LONG = 40, 160


def quiet(*_):
    pass


def train(root: str, max_steps: int, trainer: str) -> tuple:
    spec = parse_spec(tiny_spec_dict(
        root, batch_sizes=[16], trials_per_batch_size=4, max_steps=max_steps,
        search_space={"learning_rate": {"scale": "log", "min": 0.001, "max": 0.5}},
        goals=[{"metric": "classification_error", "value": 0.25}]))
    store = StudyStore(root)
    prepare_dataset(store, "digits", log=quiet)
    store.register_study(spec)
    trials = make_trials(spec)
    if trainer == "pack":
        run_pack(spec, trials, store, log=quiet)
    else:
        for trial in trials:
            run_trial(spec, trial, store, log=quiet)
    return spec, store, trials


def rows_by_step(rows):
    return {row["step"]: {k: v for k, v in row.items() if k != "wall_time"} for row in rows}


@pytest.mark.parametrize("trainer, where", [("pack", "local"), ("fit", "local"), ("pack", "gcs")])
def test_a_larger_budget_continues_budget_stopped_trials(tmp_path, trainer, where, request):
    grown = request.getfixturevalue("gcs_root") if where == "gcs" else str(tmp_path / "grown")
    spec, store, trials = train(grown, SHORT, trainer)
    before = {t.trial_id: (store.read_metadata(spec, t), store.read_measurements(spec, t))
              for t in trials}
    stopped = [t for t in trials if before[t.trial_id][0]["stop_reason"] == "budget"]
    reached = [t for t in trials if before[t.trial_id][0]["stop_reason"] == "goal"]
    assert stopped and reached, {t: m["stop_reason"] for t, (m, _) in before.items()}
    for t in stopped:
        assert read_checkpoint(store, spec, t, quiet).state["step"] == SHORT
    for t in reached:
        assert read_checkpoint(store, spec, t, quiet) is None

    spec, store, trials = train(grown, LONG, trainer)
    fresh_spec, fresh_store, _ = train(str(tmp_path / "fresh"), LONG, trainer)
    for t in trials:
        meta, rows = store.read_metadata(spec, t), store.read_measurements(spec, t)
        old_meta, old_rows = before[t.trial_id]
        if t in reached:
            assert meta == old_meta and rows == old_rows  # re-used as it was
            continue
        assert meta["max_steps"] == LONG and meta["status"] == "COMPLETE"
        assert rows[:len(old_rows)] == old_rows  # the 40-step run's rows, kept
        fresh = rows_by_step(fresh_store.read_measurements(fresh_spec, t))
        grown_rows = rows_by_step(rows)
        assert set(fresh) <= set(grown_rows)  # plus the old budget's own evaluation
        assert {s: grown_rows[s] for s in fresh} == fresh
        assert meta["steps"] == fresh_store.read_metadata(fresh_spec, t)["steps"]
        budget_stopped = meta["stop_reason"] == "budget"
        assert (read_checkpoint(store, spec, t, quiet) is not None) is budget_stopped
