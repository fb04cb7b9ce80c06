"""Lanes (``search.lanes``, ``rounds.stage_lanes``): a round's packs dealt to a fixed number
of pack tasks, longest first to the least-loaded lane; multi-host packs apart."""

import itertools
import random

import pytest

from batchscale.core.spec import PackSpec
from batchscale.rounds.stage_lanes import split_multi_host
from batchscale.search.lanes import MULTI_HOST, ONE_POD, deal_lanes, lane_items, lanes_of_kind
from batchscale.search.packs import make_pack


def _best_makespan(times: list[float], lanes: int) -> float:
    best = float("inf")
    for assignment in itertools.product(range(lanes), repeat=len(times)):
        load = [0.0] * lanes
        for t, lane in zip(times, assignment):
            load[lane] += t
        best = min(best, max(load))
    return best


@pytest.mark.parametrize("seed", range(12))
def test_every_pack_once_in_at_most_the_lanes_asked_and_within_lpt_bound(seed):
    rng = random.Random(seed)
    times = [rng.choice([1, 2, 3, 5, 8, 13]) * rng.random() + 0.1 for _ in range(rng.randint(1, 8))]
    lanes = rng.randint(1, 4)
    dealt = deal_lanes(list(range(len(times))), lambda i: times[i], lanes)
    assert sorted(i for lane in dealt for i in lane) == list(range(len(times)))
    assert len(dealt) == min(lanes, len(times)) and all(dealt)
    for lane in dealt:  # each lane trains its longest pack first
        assert [times[i] for i in lane] == sorted((times[i] for i in lane), reverse=True)
    makespan = max(sum(times[i] for i in lane) for lane in dealt)
    # Graham: LPT is within 4/3 - 1/(3m) of the best schedule
    assert makespan <= (4 / 3 - 1 / (3 * lanes)) * _best_makespan(times, lanes) + 1e-9


def test_dealing_is_deterministic_and_ties_go_to_the_first_lane():
    packs = ["a", "b", "c", "d", "e"]
    dealt = deal_lanes(packs, lambda _p: 1.0, 2)
    assert dealt == [["a", "c", "e"], ["b", "d"]] == deal_lanes(packs, lambda _p: 1.0, 2)
    assert deal_lanes([], lambda _p: 1.0, 3) == []
    with pytest.raises(ValueError, match="lanes: 0 is out of range"):
        deal_lanes(packs, lambda _p: 1.0, 0)


def test_items_carry_their_kind_and_each_loop_takes_its_own():
    items = lane_items([[{"pack_id": "b8-t1"}], [{"pack_id": "b8-t2"}]]) + \
        lane_items([[{"pack_id": "b4096-t1"}]], MULTI_HOST, first=3)
    assert [(i["lane"], i["kind"]) for i in items] == [(1, ONE_POD), (2, ONE_POD), (3, MULTI_HOST)]
    assert [i["lane"] for i in lanes_of_kind(items, MULTI_HOST)] == [3]
    assert [i["lane"] for i in lanes_of_kind(items, ONE_POD)] == [1, 2]
    with pytest.raises(ValueError, match="'tpu' is not a lane kind; allowed: one_pod, multi_host"):
        lanes_of_kind(items, "tpu")


def test_big_batch_packs_go_multi_host_one_trial_each_small_and_mixed_stay():
    packs = [PackSpec("b8-t1-3", 8, (1, 2, 3)), PackSpec("b4096-t1-3", 4096, (1, 2, 3)),
             make_pack([(8, (4,)), (4096, (4,))])]
    one_pod, multi = split_multi_host(packs, lambda b: b >= 1024, 1)
    assert [p.pack_id for p in one_pod] == ["b8-t1-3", packs[2].pack_id]
    assert [(p.batch_size, p.trial_ids) for p in multi] == [(4096, (1,)), (4096, (2,)), (4096, (3,))]
    assert split_multi_host(packs, None, 1) == (packs, [])
