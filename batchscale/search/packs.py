"""A study's trials grouped into packs: what one pipeline task (one pod) trains together.

Only pack descriptors (``PackSpec``: id, batch size, trial ids) cross KFP as loop items,
so the loop parameter stays a few bytes per pack whatever the search space; each pack
task re-derives its trials' metaparameters from the study spec with ``pack_trials``,
the same deterministic sequence ``make_trials`` uses, so a trial means the same thing
packed or alone. How many trials a pack holds is decided above this layer
(``batchscale.pipelines.placement.pack_size_for``); here it is only a number.
"""

from __future__ import annotations

import math

from batchscale.core.rounds import SearchRound, initial_round
from batchscale.core.spec import PackSpec, StudySpec, TrialSpec
from batchscale.search.trials import batch_trials


def pack_id(batch_size: int, trial_ids: tuple[int, ...]) -> str:
    """A readable id that depends only on the batch size and the trials: ``b256-t17-32``
    (trials 17..32 at batch size 256), ``b256-t5`` for a pack of one."""
    first, last = trial_ids[0], trial_ids[-1]
    return f"b{batch_size}-t{first}" if first == last else f"b{batch_size}-t{first}-{last}"


def split_ids(count: int, pack_size: int, first: int = 1) -> list[tuple[int, ...]]:
    """Trial ids first..first+count-1 in consecutive runs of at most ``pack_size``, as
    even as possible (100 trials in packs of at most 8: 13 packs of 7 or 8, not 12 of 8
    and a 4), so a batch size's pack tasks take about as long as each other."""
    if pack_size < 1:
        raise ValueError(f"pack size {pack_size} must be >= 1")
    packs = math.ceil(count / pack_size)
    bounds = [round(i * count / packs) for i in range(packs + 1)]
    return [tuple(range(first + lo, first + hi)) for lo, hi in zip(bounds, bounds[1:])]


def split_trials(batch_size: int, trial_ids: list[int], pack_size: int) -> list[PackSpec]:
    """``trial_ids`` (of one batch size, in order) in even packs of at most ``pack_size``."""
    ids = sorted(trial_ids)
    return [PackSpec(pack_id(batch_size, tuple(ids[i] for i in run)), batch_size,
                     tuple(ids[i] for i in run))
            for run in split_ids(len(ids), pack_size, first=0)] if ids else []


def make_packs(spec: StudySpec, pack_size: int) -> list[PackSpec]:
    """Round 1's trials in packs of at most ``pack_size`` trials of one batch size,
    ordered by batch size then trial id (the order of ``make_trials``)."""
    return [pack for batch_size in spec.batch_sizes
            for pack in split_trials(batch_size, list(initial_round(spec).trial_ids), pack_size)]


def pack_trials(spec: StudySpec, pack: PackSpec,
                rounds: list[SearchRound] | None = None) -> list[TrialSpec]:
    """The pack's trial specs, re-derived from the study spec and its batch size's search
    rounds (default: round 1 only), in the pack's order."""
    if pack.batch_size not in spec.batch_sizes:
        raise ValueError(f"pack {pack.pack_id}: batch size {pack.batch_size} is not one of the "
                         f"study's {list(spec.batch_sizes)}")
    if not pack.trial_ids or min(pack.trial_ids) < 1:
        raise ValueError(f"pack {pack.pack_id}: trial ids must be a non-empty list of ids >= 1")
    return batch_trials(spec, pack.batch_size, rounds or [initial_round(spec)], pack.trial_ids)
