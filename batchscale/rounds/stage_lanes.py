"""A stage's packs as the pipeline's loops take them: dealt to lanes, one-pod packs apart
from multi-host ones.

``plan_stage`` (``rounds.planner``) gives the stage's packs, the longest expected first.
Here they become the items of the stage's loops (``search.lanes``: at most ``lanes``
pack tasks, each training its share one pack after another):

- a pack of batch sizes that ``multi_host`` says span several hosts (a multi-host
  preset's big batch sizes, ``core.presets.multi_host_for``) goes to the multi-host loop,
  whose tasks each launch one TrainJob per pack; it is re-split into packs of
  ``multi_host_pack_size`` trials (one trial per job on a multi-host slice);
- every other pack stays in the one-pod loop, as before.

Without a ``multi_host`` rule (a one-host preset, ``run --local``) every pack is a
one-pod pack and the multi-host list is empty.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from batchscale.core.spec import PackSpec, StudySpec
from batchscale.rounds.planner import pack_seconds, plan_stage
from batchscale.search.lanes import MULTI_HOST, ONE_POD, deal_lanes, lane_items
from batchscale.search.packs import split_trials
from batchscale.store.layout import StudyStore


@dataclass(frozen=True)
class StageLanes:
    """The loop items of one stage: ``one_pod`` and ``multi_host`` lanes (each
    ``{"lane": K, "kind": ..., "packs": [PackSpec dicts]}``) and the packs they hold."""

    one_pod: list[dict]
    multi_host: list[dict]
    packs: list[PackSpec]

    @property
    def items(self) -> list[dict]:
        """Every lane, one-pod first: ``plan_round``'s one output (kfp.local 2.17 cannot
        loop over one of several named outputs; ``search.lanes.lanes_of_kind`` parts them)."""
        return self.one_pod + self.multi_host

    def line(self) -> str:
        trials = sum(p.size for p in self.packs)
        mixed = sum(p.mixed for p in self.packs)
        text = (f"{len(self.packs)} packs ({trials} trials{f', {mixed} mixed' if mixed else ''}) "
                f"in {len(self.one_pod)} lane(s)")
        if self.multi_host:
            held = sum(len(lane["packs"]) for lane in self.multi_host)
            text += f"; {held} of them multi-host, in {len(self.multi_host)} lane(s)"
        return text


def split_multi_host(packs: list[PackSpec], multi_host: Callable[[int], bool] | None,
                     pack_size: int) -> tuple[list[PackSpec], list[PackSpec]]:
    """(one-pod packs, multi-host packs): a pack goes multi-host when every batch size it
    holds does, re-split into packs of at most ``pack_size`` trials."""
    if multi_host is None:
        return list(packs), []
    one_pod, multi = [], []
    for pack in packs:
        if all(multi_host(b) for b in pack.batch_sizes):
            for batch_size, ids in pack.parts:
                multi += split_trials(batch_size, list(ids), pack_size)
        else:
            one_pod.append(pack)
    return one_pod, multi


def plan_lanes(spec: StudySpec, store: StudyStore, stage: int, pack_size: int, lanes: int,
               multi_host: Callable[[int], bool] | None = None, multi_host_lanes: int = 1,
               multi_host_pack_size: int = 1, log=print) -> StageLanes:
    """Stage ``stage``'s packs (``plan_stage``, which registers the study at stage 1 and
    records the rounds it adds) dealt to at most ``lanes`` one-pod lanes and
    ``multi_host_lanes`` multi-host lanes."""
    packs = plan_stage(spec, store, stage, pack_size, log)
    seconds = pack_seconds(spec, store)
    one_pod, multi = split_multi_host(packs, multi_host, multi_host_pack_size)

    def items(chosen: list[PackSpec], count: int, kind: str, first: int = 1) -> list[dict]:
        dealt = deal_lanes(chosen, seconds, count) if chosen else []
        return lane_items([[p.to_dict() for p in lane] for lane in dealt], kind, first)

    single = items(one_pod, lanes, ONE_POD)
    return StageLanes(single, items(multi, multi_host_lanes, MULTI_HOST, len(single) + 1),
                      one_pod + multi)


def multi_host_rule(preset: str) -> Callable[[int], bool] | None:
    """Whether a batch size's packs span several hosts on the multi-host preset named
    ``preset`` (``core.presets.multi_host_for``); None for "" (no multi-host loop)."""
    if not preset:
        return None
    from batchscale.core.presets import multi_host_for, preset_facts

    facts = preset_facts(preset)
    return lambda batch_size: multi_host_for(facts, batch_size)


def pack_is_finished(spec: StudySpec, store: StudyStore, pack: dict) -> bool:
    """Whether every trial of ``pack`` (a PackSpec dict) is finished in the store (re-used,
    never trained again: ``core.trial_state.is_finished``). A multi-host lane asks before
    launching a pack's job, so a retried or resubmitted lane starts no job, and no slice,
    for a pack that has nothing left to train."""
    from batchscale.search.packs import pack_trials

    descriptor = PackSpec.from_dict(pack)
    rounds = {b: store.read_rounds(spec, b) for b in descriptor.batch_sizes}
    return all(store.is_done(spec, trial) for trial in pack_trials(spec, descriptor, rounds))
