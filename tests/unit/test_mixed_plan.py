"""Mixed-batch packs on the planning side: the descriptor of a pack of several batch sizes
(its dict form, its id, its trials), the planner's grouping from hand-written pack-mode
records (groups only where a record of this device, model and precision says mixing pays
once budgets are counted), a plan without records unchanged, and the pack task's page."""

import json

import pytest

from batchscale.core.spec import PackSpec
from batchscale.pipelines.placement import pack_size_for
from batchscale.rounds.mixing import mixed_groups
from batchscale.rounds.planner import plan_stage
from batchscale.search.packs import make_packs, mix_trials, pack_trials, split_trials
from batchscale.search.trials import make_trials
from batchscale.store.layout import StudyStore
from batchscale.store.profiles import write_pack_mode
from batchscale.training.pack_summary import summarize_pack
from batchscale.validation import default_spec_dict, parse_spec
from tests.conftest import tiny_spec_dict

SMALL = [2, 4, 8, 64]
BUDGETS = {"2": 400, "4": 400, "8": 360, "64": 100}


def _spec(root="/tmp/unused", **changes):
    return parse_spec(tiny_spec_dict(root, batch_sizes=SMALL, trials_per_batch_size=5,
                                     max_steps=BUDGETS, **changes))


def _record(spec, sizes=(2, 4, 8), mixed=3.0, separate=1.0, **changes):
    record = {"batch_sizes": list(sizes), "width": 15, "rates": {"mixed": mixed, "separate": separate},
              "chosen": "mixed" if mixed > separate else "separate", "device_kind": "NVIDIA H100 80GB HBM3",
              "precision": spec.workload.precision, "model": spec.workload.model,
              "measured": "2026-11-26T20:00:00+00:00", "source": "probe"}
    record.update(changes)
    return record


def test_a_pack_of_one_batch_size_keeps_its_dict_and_a_mixed_one_round_trips():
    old = {"pack_id": "b16-t1-3", "batch_size": 16, "trial_ids": [1, 2, 3]}
    assert PackSpec.from_dict(old).to_dict() == old  # what compiled pipelines and stores hold
    assert not PackSpec.from_dict(old).mixed
    mixed = mix_trials({2: [1, 2, 3], 8: [1, 2, 3], 4: [1, 2, 3]}, 16)[0]
    assert mixed.pack_id == "b2+4+8-t1-3" and mixed.batch_sizes == (2, 4, 8) and mixed.size == 9
    raw = json.loads(json.dumps(mixed.to_dict()).replace('"batch_size": 8', '"batch_size": 8.0'))
    assert raw["more"][1]["batch_size"] == 8.0  # KFP may hand ints back as floats
    assert PackSpec.from_dict(raw) == mixed
    with pytest.raises(ValueError, match=r"batch sizes \[2, 4, 2\] repeat"):
        PackSpec("x", 2, (1,), ((4, (1,)), (2, (2,))))


def test_mixed_packs_hold_every_trial_once_evenly_and_derive_the_same_trials():
    todo = {2: list(range(1, 11)), 4: [3, 4], 8: list(range(1, 6))}
    packs = mix_trials(todo, 8)
    assert [p.pack_id for p in packs] == ["b2-t1-3+b4-t3+b8-t1-2", "b2-t4-7+b8-t3",
                                          "b2-t8-10+b4-t4+b8-t4-5"]
    assert [p.size for p in packs] == [6, 5, 6]  # 17 trials, at most 8 a pack: 3 even packs
    held = sorted((b, t) for p in packs for b, ids in p.parts for t in ids)
    assert held == sorted((b, t) for b, ids in todo.items() for t in ids)
    assert [p.mixed for p in mix_trials({8: [1, 2], 16: [1, 2]}, 1)] == [False] * 4  # 1 a pack
    spec = _spec()
    pack = mix_trials({2: [1, 2], 8: [4, 5]}, 4)[0]
    by_size = {t.batch_size: t for t in make_trials(spec)}
    assert {(t.batch_size, t.trial_id) for t in pack_trials(spec, pack, {})} == {
        (2, 1), (2, 2), (8, 4), (8, 5)}
    assert pack_trials(spec, pack, {})[2].parameters == [
        t for t in make_trials(spec) if (t.batch_size, t.trial_id) == (8, 4)][0].parameters
    assert by_size  # the study has the batch sizes the pack names
    with pytest.raises(ValueError, match="needs the rounds of each batch size"):
        pack_trials(spec, pack, [])
    with pytest.raises(ValueError, match="batch size 16 is not one of the study's"):
        pack_trials(spec, PackSpec("b2+16-t1", 2, (1,), ((16, (1,)),)), {})


def test_the_grouping_follows_the_measurement_of_this_device_model_and_precision():
    spec = _spec()
    todo = {b: [1, 2, 3, 4, 5] for b in SMALL}
    assert mixed_groups(spec, [_record(spec)], todo) == [(2, 4, 8)]
    assert mixed_groups(spec, [], todo) == []  # no measurement: no mixed pack
    assert mixed_groups(spec, [_record(spec, mixed=1.0, separate=2.0)], todo) == []  # separate won
    assert mixed_groups(spec, [_record(spec, model="fc_128_128")], todo) == []
    assert mixed_groups(spec, [_record(spec, precision="mixed_float16")], todo) == []
    assert mixed_groups(spec, [_record(spec, sizes=(2, 4, 16))], todo) == []  # 16: not the study's
    assert mixed_groups(spec, [_record(spec)], {**todo, 4: []}) == []  # a part of the set: as before
    # measured on another device, since replaced by a newer record of this one (a CPU run)
    cpu = _record(spec, sizes=(64,), mixed=1.0, device_kind="cpu", measured="2026-11-26T21:00:00")
    assert mixed_groups(spec, [_record(spec), cpu], todo) == []
    # a newer measurement of the same batch sizes (another width) that chose separate wins
    newer = _record(spec, mixed=1.0, separate=2.0, width=64, measured="2026-11-26T20:30:00+00:00")
    assert mixed_groups(spec, [newer, _record(spec)], todo) == []
    # budgets 400, 400, 360: 97% of the slot-steps train, so 1.02x measured does not pay
    assert mixed_groups(spec, [_record(spec, mixed=1.02)], todo) == []
    assert mixed_groups(spec, [_record(spec, mixed=1.05)], todo) == [(2, 4, 8)]
    # overlapping records: the larger gain first, a batch size in one group at most
    both = [_record(spec, sizes=(2, 4), mixed=2.0), _record(spec, sizes=(4, 8), mixed=2.5)]
    assert mixed_groups(spec, both, todo) == [(4, 8)]


@pytest.mark.parametrize("bad", [
    {"batch_sizes": [2]}, {"batch_sizes": "2,4"}, {"batch_sizes": [2, 2]}, {"batch_sizes": [2, True]},
    {"batch_sizes": [2.0, 4.0]}, {"rates": {"mixed": float("nan"), "separate": 1.0}},
    {"rates": {"mixed": 3.0}}, {"rates": [3.0, 1.0]}, {"rates": {"mixed": "3", "separate": 1}},
    {"chosen": None}, {"chosen": "vmapped"}, {"device_kind": 7}, {"model": None}])
def test_a_malformed_record_is_never_believed(bad):
    spec = _spec()
    assert mixed_groups(spec, [_record(spec, **bad)], {b: [1] for b in SMALL}) == []


def test_without_a_record_the_default_study_plans_the_packs_it_always_planned(tmp_path):
    spec = parse_spec({**default_spec_dict(), "store": str(tmp_path)})
    size = pack_size_for(spec, "cpu")
    planned = plan_stage(spec, StudyStore(spec.store), 1, size, log=lambda *_: None)
    # the same packs (their start order is the planner's longest-first: test_pack_order)
    assert sorted(planned, key=lambda p: p.pack_id) == sorted(make_packs(spec, size),
                                                                key=lambda p: p.pack_id)


def _batch_order(pack):
    """Packs in batch-size order (the planner starts them longest first)."""
    return (pack.batch_size, pack.trial_ids)


def test_a_stage_mixes_the_measured_batch_sizes_and_the_task_names_them(tmp_path):
    spec, lines = _spec(str(tmp_path)), []
    store = StudyStore(spec.store)
    write_pack_mode(store.fs, spec.name, _record(spec, sizes=(2, 8)))
    store.fs.write_text(f"{spec.name}/profile/pack_modes/torn.json", '{"batch_sizes": [4, 6')
    packs = sorted(plan_stage(spec, store, 1, 4, log=lines.append), key=_batch_order)
    assert any("profile/pack_modes/torn.json" in line and "left out" in line for line in lines)
    assert [p.pack_id for p in packs] == ["b2-t1-2+b8-t1", "b2-t3-4+b8-t2-3", "b2-t5+b8-t4-5",
                                          "b4-t1-2", "b4-t3-5", "b64-t1-2", "b64-t3-5"]
    assert packs[3:] == split_trials(4, [1, 2, 3, 4, 5], 4) + split_trials(64, [1, 2, 3, 4, 5], 4)
    assert lines[-1].startswith("batch sizes 2, 8: 3 mixed pack(s) (b2-t1-2+b8-t1, ")
    derived = [t for p in packs for t in pack_trials(spec, p, {b: store.read_rounds(spec, b) for b in SMALL})]
    assert sorted(derived, key=lambda t: (t.batch_size, t.trial_id)) == make_trials(spec)

    pack, trials = packs[1], pack_trials(spec, packs[1], {})
    for trial in trials:
        store.write_measurements(spec, trial, [{"step": 0, "val/classification_error": 0.9},
                                               {"step": 40, "val/classification_error": 0.1}])
    metas = [{"status": "COMPLETE", "steps": 40, "stop_reason": "goal", "train_seconds": 1.0}] * 4
    shown = summarize_pack(spec, pack, trials, metas, store)
    page = shown.markdown.splitlines()
    assert page[0] == ("### Pack b2-t3-4+b8-t2-3: batch sizes 2 (trials 3, 4), 8 (trials 2, 3), "
                       "planned as one mixed pack")
    assert "batch size 2: **40**; batch size 8: **40**." in page[2]
    assert page[4].startswith("| batch size | trial | status |")
    assert page[6].startswith("| 2 | 3 | COMPLETE |")
    assert {"b2_trial_3_steps_to_result", "b8_trial_3_steps_to_result", "b8_trial_2_steps_to_result",
            "b2_best_steps_to_result", "b8_best_steps_to_result"} <= set(shown.metrics)
    assert "trial_3_steps_to_result" not in shown.metrics  # trial 3 of which batch size?
    assert shown.metrics["reached_goal"] == 4 and shown.line == "b2-t3-4+b8-t2-3: 4 COMPLETE"
