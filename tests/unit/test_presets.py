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
        assert pod.accelerator_count == facts.devices and facts.device_hour > 0
        assert pod.node_selectors["cloud.google.com/gke-spot"] == "true"
    if facts.kind == presets.GPU:  # GKE's accelerator label is the preset's name
        assert pod.node_selectors["cloud.google.com/gke-accelerator"] == facts.name
    if facts.kind == presets.TPU:
        assert pod.node_selectors["cloud.google.com/gke-tpu-topology"] == facts.topology
        assert facts.name.endswith(facts.topology)
