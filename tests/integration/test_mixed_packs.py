"""Mixed-batch packs: trials of batch sizes 2, 4 and 8 trained in one vmapped step padded
to 8 (``training.mixed_step``) give each trial the measurements of training it alone
(packs of one, one batch size after another), with its own budget and evaluation grid,
status, steps and stop reason; stopped and run again, a mixed pack resumes step for step.

Tolerance: 1e-5 relative. Each trial's loss is the mean over its own rows, the padding's
gradient exactly 0; what may differ is float32 rounding (a sum over 8 rows of which 6
are 0 may be added in another order, a matrix product at another shape may round
otherwise), and SGD amplifies a last-bit difference over steps (``test_pack_equivalence``
allows 1e-4 over 150 steps at other pack widths). On this CPU the runs agree bit for bit;
the bound is for other XLA versions and devices.
"""

from __future__ import annotations

import math
import os

import pytest

from batchscale.search.trials import make_trials
from batchscale.store.layout import StudyStore
from batchscale.store.profiles import write_pack_mode, write_step_times
from batchscale.training.keras_setup import hardware
from batchscale.training.mixed_probe import mode_record
from batchscale.training.packs import run_pack
from batchscale.validation import parse_spec
from tests.conftest import StopAfter, share_datasets, tiny_spec_dict, trial_histories

SIZES = [2, 4, 8]
STOP_LATE = 75  # stop checks (one after each chunk, one before each evaluation) until the second
# stop: the batch-4 and -8 trials have finished, trial 2/2 has not (60, 80 and 100 did; 48 and 150 did not)


def _study(digits_store, root: str, mode: str):
    """A study of 2 trials at each of ``SIZES`` (budgets 70, 50, 40 steps: grids differ)
    whose pack-mode record says ``mode`` for them (as a probe would have written), with
    step-time records of them (a mixed pack's step-time probes, tested elsewhere, skipped)."""
    os.makedirs(root)
    share_datasets(digits_store, root)
    spec = parse_spec(tiny_spec_dict(
        root, batch_sizes=SIZES, trials_per_batch_size=2, max_steps={2: 70, 4: 50, 8: 40},
        goals=[{"metric": "classification_error", "value": 0.5}], checkpoint_seconds=1000))
    store = StudyStore(root)
    store.register_study(spec)
    write_pack_mode(store.fs, spec.name, mode_record(
        spec, SIZES, {"mixed": 1.0, "separate": 1.0}, mode, "2026-11-26T00:00:00Z", "test"))
    write_step_times(store.fs, spec.name, [{
        "batch_size": b, "devices": 1, "seconds_per_step": 1e-4, "steps": 30, **hardware(1),
        "precision": spec.workload.precision, "measured": "2026-11-26T00:00:00Z", "source": "test"}
        for b in SIZES])
    return spec, store


def _histories(spec, store) -> dict:
    return trial_histories(store, spec, by_batch_size=True)


@pytest.fixture(scope="module")
def runs(digits_store, tmp_path_factory):
    """mode -> (spec, store, each trial's metadata as run_pack returned it)."""
    out = {}
    for mode in ("separate", "mixed"):
        spec, store = _study(digits_store, str(tmp_path_factory.mktemp("mixed") / mode), mode)
        out[mode] = spec, store, run_pack(spec, make_trials(spec), store, log=lambda *_: None)
    return out


def test_a_mixed_pack_gives_each_trial_its_measurements_alone(runs):
    spec, _, metas = runs["mixed"]
    trials = make_trials(spec)
    assert [(m["batch_size"], m["trial_id"]) for m in metas] == [
        (t.batch_size, t.trial_id) for t in trials]  # in the order given, ids repeat
    assert {(m["vmap_width"], m["padded_batch"]) for m in metas} == {(3, 8)}
    assert {m["vmap_width"] for m in runs["separate"][2]} == {1}
    alone, mixed = _histories(*runs["separate"][:2]), _histories(*runs["mixed"][:2])
    reasons = set()
    for key, (status, steps, reason, rows) in alone.items():
        assert mixed[key][:3] == (status, steps, reason), key
        assert [r["step"] for r in mixed[key][3]] == [r["step"] for r in rows], key
        for row, other in zip(rows, mixed[key][3]):
            for name, value in row.items():
                if math.isfinite(value):
                    assert other[name] == pytest.approx(value, rel=1e-5, abs=1e-12), (key, name)
        reasons.add(reason)
    assert reasons == {"goal", "budget"}  # trials that end early and at their own budgets


def test_a_stopped_mixed_pack_resumes_step_for_step(runs, digits_store, tmp_path):
    """Stopped twice: first while the first group (trials 2/1, 4/1, 8/1) trains; run again,
    the second group (fresh: ``pack_groups`` puts fresh groups first) trains and is stopped
    after its batch-4 and batch-8 trials finished. Run a third time, trial 2/2 goes on in a
    group still padded to 8, at its place (fillers at the finished trials'), and the first
    group resumes where it stopped. The result equals the uninterrupted mixed pack's."""
    from batchscale.training.pack_loop import train_together
    from batchscale.training.packs import _open
    from batchscale.training.signals import Stopped

    spec, store = _study(digits_store, str(tmp_path / "stopped"), "mixed")
    trials = make_trials(spec)
    pipeline = _open(spec, store)
    order = sorted(trials, key=lambda t: (t.trial_id, t.batch_size))  # as run_pack orders them
    with pytest.raises(Stopped):
        train_together(spec, order, store, pipeline, lambda *_: None, StopAfter(4), 3)
    assert {m["status"] for m in (store.read_metadata(spec, t) for t in trials)} == {"INCOMPLETE"}
    with pytest.raises(Stopped):
        train_together(spec, order, store, pipeline, lambda *_: None, StopAfter(STOP_LATE), 3)
    unfinished = {(t.batch_size, t.trial_id) for t in trials
                  if store.read_metadata(spec, t)["status"] == "INCOMPLETE"}
    assert unfinished == {(2, 1), (4, 1), (8, 1), (2, 2)}
    run_pack(spec, trials, store, log=lambda *_: None)
    assert _histories(spec, store) == _histories(*runs["mixed"][:2])
