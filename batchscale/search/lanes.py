"""Lanes: a round's packs dealt out to a fixed number of pack tasks.

A paper-size study (14 batch sizes x 100 trials, 3 rounds) made one ParallelFor
iteration per pack: 98 in round 1 on the CPU preset, 140 on a multi-chip TPU, and each
later round up to as many again, with every iteration costing KFP 2.17 four pods (see
``batchscale.pipelines.pipeline_size``). Kubeflow Pipelines struggles at that size
(kubeflow/pipelines #12131, #2913). A loop that iterates over *lanes* instead has at most
``lanes`` iterations a round, whatever the study's size: each lane is one pack task that
trains its share of the round's packs one after another in one pod, paying the pod's
start-up once.

The packs are dealt by Graham's LPT rule: the longest expected first (as
``search.pack_order`` orders them), each to the lane with the least expected work so far.
All lanes run at once, so a round ends no later than 4/3 of the best schedule's time,
and about one short pack after the lanes' average. What the rule cannot know (a
pack's step time off its estimate, a preempted pod) is bounded by the packs being
small: a lane is many packs, each resumable on its own.

The same inputs give the same lanes (ties keep the given order; a tie between lanes goes
to the lowest), so a resubmitted round deals the packs it still has the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def deal_lanes(items: Sequence[T], seconds: Callable[[T], float], lanes: int) -> list[list[T]]:
    """``items`` dealt to at most ``lanes`` lanes (LPT, see the module docstring): each
    lane's items in the order it trains them, the longest first; no empty lane."""
    if lanes < 1:
        raise ValueError(f"lanes: {lanes} is out of range; at least 1")
    dealt: list[list[T]] = [[] for _ in range(min(lanes, len(items)))]
    load = [0.0] * len(dealt)
    for item in sorted(items, key=lambda i: -seconds(i)):  # stable: ties keep their order
        lane = min(range(len(dealt)), key=lambda k: (load[k], k))
        dealt[lane].append(item)
        load[lane] += seconds(item)
    return dealt


ONE_POD, MULTI_HOST = "one_pod", "multi_host"  # a lane's kind: which loop trains it


def lane_items(lanes: list[list[dict]], kind: str = ONE_POD, first: int = 1) -> list[dict]:
    """The loop's items: ``{"lane": K, "kind": kind, "packs": [...]}``, K from ``first``."""
    return [{"lane": k, "kind": kind, "packs": packs} for k, packs in enumerate(lanes, start=first)]


def lanes_of_kind(lanes: list[dict], kind: str) -> list[dict]:
    """The lanes of one kind (``ONE_POD``, ``MULTI_HOST``), for that kind's loop."""
    if kind not in (ONE_POD, MULTI_HOST):
        raise ValueError(f"kind: {kind!r} is not a lane kind; allowed: {ONE_POD}, {MULTI_HOST}")
    return [lane for lane in lanes if lane.get("kind", ONE_POD) == kind]
