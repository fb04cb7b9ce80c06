"""Packs: every trial exactly once, small even packs of one batch size, trial specs
re-derived from the study spec equal to the unpacked trial list."""

import json

import pytest

from batchscale.core.spec import PackSpec
from batchscale.search.packs import make_packs, pack_trials, split_ids
from batchscale.search.trials import make_trials
from batchscale.validation import default_spec_dict, parse_spec
from tests.conftest import tiny_spec_dict


def _spec(**changes):
    return parse_spec(tiny_spec_dict("/tmp/unused", **changes))


@pytest.mark.parametrize("count,size", [(1, 1), (2, 8), (7, 3), (100, 8), (100, 16), (16, 16),
                                        (17, 16), (5, 1)])
def test_split_ids_covers_every_trial_once_in_even_consecutive_runs(count, size):
    runs = split_ids(count, size)
    assert [t for run in runs for t in run] == list(range(1, count + 1))
    assert all(1 <= len(run) <= size for run in runs)
    assert len(runs) == -(-count // size)  # no more packs than needed
    assert max(map(len, runs)) - min(map(len, runs)) <= 1


def test_split_ids_refuses_an_empty_pack_size():
    with pytest.raises(ValueError, match="pack size 0"):
        split_ids(4, 0)


def test_packs_hold_one_batch_size_each_and_reproduce_make_trials():
    spec = _spec(batch_sizes=[16, 32, 128], trials_per_batch_size=7)
    packs = make_packs(spec, 3)
    assert [(p.batch_size, p.trial_ids) for p in packs[:3]] == [
        (16, (1, 2)), (16, (3, 4, 5)), (16, (6, 7))]  # 7 trials: 2 + 3 + 2, not 3 + 3 + 1
    assert [p.pack_id for p in packs[:3]] == ["b16-t1-2", "b16-t3-5", "b16-t6-7"]
    assert len({p.pack_id for p in packs}) == len(packs) == 9
    derived = [t for p in packs for t in pack_trials(spec, p)]
    assert derived == make_trials(spec)  # same ids, batch sizes and metaparameters, in order


def test_a_pack_crossing_kfp_as_a_dict_gives_the_same_trials():
    """KFP hands a loop item over as JSON (ints may come back as floats)."""
    spec = _spec(trials_per_batch_size=5)
    pack = make_packs(spec, 2)[-1]
    raw = json.loads(json.dumps(pack.to_dict()).replace('"batch_size": 128', '"batch_size": 128.0'))
    again = PackSpec.from_dict(raw)
    assert again == pack and pack.trial_ids == (4, 5)
    assert pack_trials(spec, again) == make_trials(spec)[-2:]
    assert make_packs(spec, 1)[0].pack_id == "b16-t1"


def test_pack_trials_refuses_a_pack_of_another_study():
    spec = _spec()
    with pytest.raises(ValueError, match="batch size 64 is not one of the study's"):
        pack_trials(spec, PackSpec("b64-t1", 64, (1,)))
    with pytest.raises(ValueError, match="trial ids"):
        pack_trials(spec, PackSpec("b16-t0", 16, (0,)))


def test_pack_size_and_checkpoint_interval_do_not_change_the_fingerprint():
    base = _spec()
    changed = _spec(pack_size=4, checkpoint_seconds=30)
    assert (changed.pack_size, changed.checkpoint_seconds) == (4, 30.0)
    assert changed.fingerprint() == base.fingerprint()
    assert parse_spec(changed.to_dict()) == changed  # survives the dict round trip
    assert base.fingerprint() != _spec(seed=1).fingerprint()  # the fingerprint still sees meaning


def _workload_spec(dataset, model, **changes):
    return parse_spec({"name": "w", "store": "/tmp/unused",
                       "workload": {"dataset": dataset, "model": model}, **changes})


def test_pack_size_comes_from_the_workload_and_the_preset():
    from batchscale.pipelines.placement import pack_size_for

    cifar = _workload_spec("cifar_10", "resnet_8")  # 14 batch sizes x 100 trials
    assert [pack_size_for(cifar, p) for p in ("cpu", "nvidia-l4", "tpu-v5e-1x1")] == [16, 16, 16]
    assert pack_size_for(_workload_spec("mnist", "simple_cnn_base"), "nvidia-h100-80gb") == 32
    assert pack_size_for(_workload_spec("mnist", "simple_cnn_base"), "cpu") == 16  # cpu's cap
    assert pack_size_for(parse_spec(default_spec_dict()), "cpu") == 10  # all 10 trials of a size
    assert pack_size_for(_workload_spec("cifar_10", "resnet_8", pack_size=3), "cpu") == 3


def test_one_trial_per_accelerator_still_fits_in_a_bounded_number_of_pack_tasks():
    """ImageNet: one trial per accelerator, but 1,100 pods would be too many; the pack
    grows (its trials then train one after another) until the study fits."""
    from batchscale.pipelines.placement import MAX_PACK_TASKS, PRESETS, pack_size_for
    from batchscale.workloads.defaults import WORKLOADS

    imagenet = _workload_spec("imagenet", "resnet_50")
    size = pack_size_for(imagenet, "nvidia-h100-80gb")
    assert len(make_packs(imagenet, size)) <= MAX_PACK_TASKS < len(make_packs(imagenet, size - 1))
    for w in WORKLOADS:
        spec = _workload_spec(w.dataset, w.model)
        for preset in PRESETS:
            packs = make_packs(spec, pack_size_for(spec, preset))
            assert len(packs) <= MAX_PACK_TASKS, (w.key, preset)
            assert len(json.dumps([p.to_dict() for p in packs])) < 16 * 1024, (w.key, preset)


def test_pack_capacity_of_a_workload_without_defaults_follows_its_model_family():
    from batchscale.workloads.defaults import pack_capacity

    assert pack_capacity("cifar_10", "resnet_8") == 16 and pack_capacity("imagenet", "resnet_50") == 1
    assert pack_capacity("mnist", "fc_32") == 64  # no mnist/fc_* defaults: the fc family
    assert pack_capacity("cifar_10", "simple_cnn_wide") == 32
    assert pack_capacity("cifar_10", "vgg_11") == 1
