"""A trial's one commit point (``training/trial_lifecycle.py``): whatever write a crash
interrupts, the trial is left finished or resumable, never stuck, under either engine.

The narrowest window: a trial stopped at its budget writes the checkpoint a larger budget
continues from, then its final measurements, then its final metadata (the commit). A
process killed between the first and the last leaves an INCOMPLETE trial whose
checkpoint already holds its last evaluation: run again, it must finish at once, with
the measurements and outcome the uninterrupted run recorded.
"""

from __future__ import annotations

import os

import pytest

from batchscale.search.trials import make_trials
from batchscale.store.checkpoints import checkpoint_path
from batchscale.store.layout import StudyStore
from batchscale.training.packs import run_pack
from batchscale.training.trainer import run_trial
from batchscale.validation import parse_spec
from tests.conftest import share_datasets, tiny_spec_dict

FINAL = ("status", "stop_reason", "steps", "max_steps", "trainer", "measurements")


def quiet(*_):
    pass


@pytest.mark.parametrize("engine", ["fit", "pack"])
def test_a_trial_killed_before_its_final_metadata_finishes_when_run_again(engine, digits_store,
                                                                           tmp_path):
    root = str(tmp_path / engine)
    os.makedirs(root)
    share_datasets(digits_store, root)
    spec = parse_spec(tiny_spec_dict(root, batch_sizes=[16], trials_per_batch_size=1, max_steps=30,
                                     goals=[{"metric": "classification_error", "value": 0.0}]))
    store = StudyStore(root)
    store.register_study(spec)
    [trial] = make_trials(spec)
    train = (lambda: run_trial(spec, trial, store, log=quiet)) if engine == "fit" else (
        lambda: run_pack(spec, [trial], store, log=quiet)[0])

    done = train()
    rows = store.read_measurements(spec, trial)
    assert (done["status"], done["stop_reason"], done["steps"]) == ("COMPLETE", "budget", 30)
    assert store.fs.exists(checkpoint_path(spec, trial))  # kept for a larger budget

    # killed after the budget's checkpoint, before the final metadata: INCOMPLETE on disk
    store.write_metadata(spec, trial, {k: v for k, v in done.items()
                                       if k not in ("stop_reason", "measurements")}
                         | {"status": "INCOMPLETE"})
    again = train()
    assert {k: again.get(k) for k in FINAL} == {k: done.get(k) for k in FINAL}
    assert store.read_metadata(spec, trial)["status"] == "COMPLETE"
    assert store.read_measurements(spec, trial) == rows
    assert store.fs.exists(checkpoint_path(spec, trial))
