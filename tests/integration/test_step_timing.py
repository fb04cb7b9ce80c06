"""Step times: what a trial records about its own timing, and the timing probe a vmapped
pack ends with (its trials shared each step, so none of them timed one run alone)."""

from __future__ import annotations

import pytest

from batchscale.search.trials import make_trials
from batchscale.store.layout import StudyStore
from batchscale.store.profiles import read_step_times
from batchscale.training.packs import run_pack
from batchscale.training.step_timing import TIME_MAX_STEPS, TIME_MIN_STEPS
from batchscale.validation import parse_spec
from batchscale.workloads.prepare import prepare_dataset
from tests.conftest import tiny_spec_dict


def _quiet(*_):
    pass


@pytest.fixture()
def study(tmp_path):
    spec = parse_spec(tiny_spec_dict(str(tmp_path), batch_sizes=[16, 32], trials_per_batch_size=2,
                                     max_steps=60))
    store = StudyStore(str(tmp_path))
    prepare_dataset(store, "digits", log=_quiet)
    store.register_study(spec)
    return spec, store


def test_solo_trials_time_themselves_and_a_vmapped_pack_is_probed_once(study):
    spec, store = study
    at16 = [t for t in make_trials(spec) if t.batch_size == 16]
    at32 = [t for t in make_trials(spec) if t.batch_size == 32]
    run_pack(spec, at16, store, log=_quiet, width=1)  # one at a time: each times itself
    for trial in at16:
        meta = store.read_metadata(spec, trial)
        assert meta["trained_together"] == 1 and meta["devices"] == 1
        assert meta["device_kind"] == "cpu" and meta["preset"] == "local" and meta["cpu_cores"] >= 1
        assert 0 < meta["train_seconds"] < meta["wall_time"] < 600  # seconds, not a timestamp
        assert all(0 <= r["wall_time"] < 600 for r in store.read_measurements(spec, trial))
        assert meta["examples_per_second"] == pytest.approx(
            meta["steps"] * 16 / meta["train_seconds"])
    assert read_step_times(store.fs, spec.name) == []  # no probe needed

    logged = []
    run_pack(spec, at32, store, log=logged.append, width=2)  # vmapped: a shared step
    assert {store.read_metadata(spec, t)["trained_together"] for t in at32} == {2}
    records = read_step_times(store.fs, spec.name)
    assert [(r["batch_size"], r["devices"], r["source"]) for r in records] == [(32, 1, "probe")]
    record = records[0]
    assert TIME_MIN_STEPS <= record["steps"] <= TIME_MAX_STEPS and record["seconds_per_step"] > 0
    assert record["device_kind"] == "cpu" and record["precision"] == spec.workload.precision
    assert any("step time at batch size 32" in line for line in logged)

    # the same batch size on the same devices is not probed again (a later pack, a re-run)
    for trial in at32:  # make the pack train again
        store.fs.delete(f"{store.trial_dir(spec, trial)}/metadata.json")
    logged.clear()
    run_pack(spec, at32, store, log=logged.append, width=2)
    assert read_step_times(store.fs, spec.name) == records
    assert not any("step time at" in line for line in logged)


def test_a_trials_initial_model_does_not_depend_on_other_threads_drawing_random_numbers():
    """Keras seeds unseeded initializers and dropout from Python's ``random``; a draw by
    another thread between seeding and building (a storage client's retry jitter) must
    not change the model (seed_keras gives Keras a private stream)."""
    import random

    import numpy as np

    from batchscale.training.keras_setup import seed_keras
    from batchscale.workloads import build_model

    def weights(interfere: bool):
        seed_keras(11, "jax")
        if interfere:
            random.random()  # what another thread might draw meanwhile
        model = build_model("fc_32", (8, 8, 1), 10, task="classification")
        return [np.asarray(v) for v in model.weights]

    plain, disturbed = weights(False), weights(True)
    assert all(np.array_equal(a, b) for a, b in zip(plain, disturbed))
