"""The order a stage's pack tasks start in (``search.pack_order``, ``rounds.planner``):
longest expected first, by the study's step-time profile or, without one, by steps x
batch size; ties in batch-size order; the pack ids the same whatever the order."""

import pytest

from batchscale.core.spec import PackSpec
from batchscale.rounds.planner import plan_stage, profile_step_times
from batchscale.search.pack_order import expected_pack_seconds, longest_first
from batchscale.search.packs import split_trials
from batchscale.store.layout import StudyStore
from batchscale.store.profiles import write_step_times
from batchscale.validation import parse_spec
from tests.conftest import tiny_spec_dict


def _quiet(*_):
    pass


def _record(batch_size, seconds, kind="cpu", measured="2026-11-26T10:00:00Z", devices=1,
            precision="float32"):
    return {"batch_size": batch_size, "seconds_per_step": seconds, "steps": 100, "devices": devices,
            "device_kind": kind, "precision": precision, "preset": "local", "cpu_cores": 2,
            "measured": measured, "source": "probe"}


def _plan(tmp_path, records=(), **changes):
    root = str(tmp_path / "store")
    spec = parse_spec(tiny_spec_dict(root, batch_sizes=[16, 64, 128], trials_per_batch_size=3,
                                     max_steps={16: 800, 64: 500, 128: 100}, **changes))
    store = StudyStore(root)
    if records:
        write_step_times(store.fs, spec.name, list(records))
    return [(p.pack_id, p.trial_ids) for p in plan_stage(spec, store, 1, 2, log=_quiet)]


def test_without_a_profile_steps_times_batch_size_orders_the_packs(tmp_path):
    # examples per trial: 16 x 800 = 12,800; 64 x 500 = 32,000; 128 x 100 = 12,800
    assert _plan(tmp_path) == [("b64-t1-2", (1, 2)), ("b64-t3", (3,)),
                               ("b16-t1-2", (1, 2)), ("b128-t1-2", (1, 2)),  # ties: by batch size
                               ("b16-t3", (3,)), ("b128-t3", (3,))]


def test_the_profile_orders_the_packs_longest_first(tmp_path):
    # seconds per trial: 16: 800 x 1 ms = 0.8; 64: 500 x 0.9 ms = 0.45; 128: 100 x 10 ms = 1.0
    records = [_record(16, 0.001), _record(64, 0.0009), _record(128, 0.01)]
    packs = _plan(tmp_path, records)
    assert [p for p, _ in packs] == ["b128-t1-2", "b16-t1-2", "b128-t3", "b64-t1-2", "b16-t3",
                                     "b64-t3"]
    # the same store gives the same order; the ids and trials are the batch-size order's
    assert _plan(tmp_path / "again", records) == packs
    spec = parse_spec(tiny_spec_dict("/unused", batch_sizes=[16, 64, 128], trials_per_batch_size=3))
    assert sorted(packs) == sorted((p.pack_id, p.trial_ids) for b in spec.batch_sizes
                                   for p in split_trials(b, [1, 2, 3], 2))


def test_an_unmeasured_batch_size_is_timed_by_the_plans_interpolation():
    # 64 lies halfway (log-log) between 16 at 1 ms and 256 at 16 ms: 4 ms
    pack = PackSpec("b64-t1-2", 64, (1, 2))
    assert expected_pack_seconds(pack, {64: 100}, {16: 0.001, 256: 0.016}) == pytest.approx(2 * 100 * 0.004)
    assert expected_pack_seconds(pack, {64: 100}, {}) == 2 * 100 * 64  # no profile: examples
    # a mixed pack: every batch size's trials x its own budget x its own step time
    mixed = PackSpec("b16-t1-2+b256-t1", 16, (1, 2), more=((256, (1,)),))
    assert expected_pack_seconds(mixed, {16: 100, 256: 10}, {16: 0.001, 256: 0.016}) == \
        pytest.approx(2 * 100 * 0.001 + 1 * 10 * 0.016)
    ties = [PackSpec(f"b{b}-t1", b, (1,)) for b in (16, 32, 64)]
    assert longest_first(ties, lambda p: 1.0) == ties  # ties keep their order


def test_the_profile_read_is_one_device_at_the_spec_precision_of_the_kind_measured_last():
    records = [_record(16, 0.001, "cpu", "2026-11-26T10:00:00Z"),
               _record(64, 0.002, "cpu", "2026-11-26T10:00:00Z"),
               _record(16, 0.0001, "NVIDIA H100", "2026-11-26T12:00:00Z"),
               _record(16, 0.5, devices=2, measured="2026-11-27T00:00:00Z"),
               _record(16, 0.7, precision="mixed_bfloat16", measured="2026-11-27T00:00:00Z")]
    assert profile_step_times(records, "float32") == {16: 0.0001}
    assert profile_step_times(records[:2], "float32") == {16: 0.001, 64: 0.002}
    assert profile_step_times(records, "float16") == {}
