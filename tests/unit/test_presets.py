"""The placement presets are one table (batchscale.core.presets): the pods, the prices,
the CLI's choices and the local pseudo-preset all read it, so none can name a preset the
others do not know."""

from __future__ import annotations

import pytest

from batchscale.core import presets, prices
from batchscale.pipelines import placement


def test_every_preset_has_a_pod_and_a_price_and_nothing_else_does():
    names = [p.name for p in presets.PRESETS]
    assert len(set(names)) == len(names)
    assert list(placement.PRESETS) == names
    for name in names:
        price, source = prices.device_price(name, cpu_cores=2)
        assert price > 0 and source
    assert set(prices.DEVICE_HOUR) | set(prices.CPU_PRESETS) == {*names, prices.LOCAL_PRESET}
    with pytest.raises(ValueError, match="no price for preset 'nvidia-v100'; known: cpu, local"):
        prices.device_price("nvidia-v100", cpu_cores=2)


@pytest.mark.parametrize("facts", presets.PRESETS, ids=lambda p: p.name)
def test_a_pod_asks_for_what_its_preset_says(facts):
    pod = placement.PRESETS[facts.name]
    assert (pod.cpu, pod.memory, pod.machine_type, pod.max_pack) == \
        (facts.cpu, facts.memory, facts.machine_type, facts.max_pack)
    assert pod.pack_timeout_seconds == facts.pack_timeout_seconds
    if facts.kind == presets.CPU:
        assert pod.accelerator is None and not pod.node_selectors
    else:
        # one pod per host, each with its host's share of the devices
        assert pod.accelerator_count * pod.hosts == facts.devices and facts.device_hour > 0
        assert pod.hosts == facts.hosts and pod.single_host == facts.single_host
        assert pod.node_selectors["cloud.google.com/gke-spot"] == "true"
    if facts.kind == presets.GPU:  # GKE's accelerator label names the GPU the preset's name starts with
        assert pod.node_selectors["cloud.google.com/gke-accelerator"] == facts.accelerator
        assert facts.name.startswith(facts.accelerator)
    if facts.kind == presets.TPU:
        assert pod.node_selectors["cloud.google.com/gke-tpu-topology"] == facts.topology
        assert pod.node_selectors["cloud.google.com/gke-tpu-accelerator"] == facts.accelerator
        assert facts.name.endswith(facts.topology)


MULTI_HOST = [p for p in presets.PRESETS if p.hosts > 1]


@pytest.mark.parametrize("facts", MULTI_HOST, ids=lambda p: p.name)
def test_a_multi_host_preset_names_a_one_host_sibling_of_the_same_hosts(facts):
    """The small batch sizes of a multi-host study train on one pod of the same machine
    type, accelerator and chips per host, priced alike."""
    sibling = next(p for p in presets.PRESETS if p.name == facts.single_host)
    assert sibling.hosts == 1 and sibling.single_host is None
    assert (sibling.kind, sibling.machine_type, sibling.accelerator, sibling.device_hour) == \
        (facts.kind, facts.machine_type, facts.accelerator, facts.device_hour)
    assert sibling.devices == facts.devices_per_host
    assert (sibling.cpu, sibling.memory) == (facts.cpu, facts.memory)  # a pod fills one host either way
    assert facts.max_pack == sibling.max_pack == 1  # one trial spread over the chips


def test_multi_host_for_needs_enough_examples_on_every_chip():
    v5e, h100 = presets.V5E_4X4, presets.H100_2X8
    assert {p.name for p in MULTI_HOST} == {"tpu-v5e-4x4", "tpu-v6e-4x4", "nvidia-h100-80gb-2x8"}
    assert presets.MIN_EXAMPLES_PER_CHIP == 64 and v5e.devices == h100.devices == 16
    assert [b for b in (2 ** k for k in range(3, 17)) if presets.multi_host_for(v5e, b)] == \
        [1024, 2048, 4096, 8192, 16384, 32768, 65536]
    assert not presets.multi_host_for(v5e, 1008)  # 63 per chip
    assert not presets.multi_host_for(v5e, 1032)  # 64.5 per chip: no even split
    assert presets.multi_host_for(v5e, 1040)  # 65 per chip
    assert not any(presets.multi_host_for(p, 65536) for p in presets.PRESETS if p.hosts == 1)


def test_a_preset_refuses_devices_that_do_not_split_over_its_hosts():
    with pytest.raises(ValueError, match="12 devices do not split over 5 hosts"):
        presets.PresetFacts("x", presets.TPU, 12, "1", "1G", "x", hosts=5, single_host="y")
    with pytest.raises(ValueError, match="names its single_host sibling"):
        presets.PresetFacts("x", presets.TPU, 8, "1", "1G", "x", hosts=2)
