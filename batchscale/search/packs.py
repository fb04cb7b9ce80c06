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

from batchscale.core.spec import PackSpec, StudySpec, TrialSpec
from batchscale.search.trials import sample_parameters


def pack_id(batch_size: int, trial_ids: tuple[int, ...]) -> str:
    """A readable id that depends only on the batch size and the trials: ``b256-t17-32``
    (trials 17..32 at batch size 256), ``b256-t5`` for a pack of one."""
    first, last = trial_ids[0], trial_ids[-1]
    return f"b{batch_size}-t{first}" if first == last else f"b{batch_size}-t{first}-{last}"


def split_ids(count: int, pack_size: int) -> list[tuple[int, ...]]:
    """Trial ids 1..count in consecutive runs of at most ``pack_size``, as even as
    possible (100 trials in packs of at most 8: 13 packs of 7 or 8, not 12 of 8 and a 4),
    so a batch size's pack tasks take about as long as each other."""
    if pack_size < 1:
        raise ValueError(f"pack size {pack_size} must be >= 1")
    packs = math.ceil(count / pack_size)
    bounds = [round(i * count / packs) for i in range(packs + 1)]
    return [tuple(range(lo + 1, hi + 1)) for lo, hi in zip(bounds, bounds[1:])]


def make_packs(spec: StudySpec, pack_size: int) -> list[PackSpec]:
    """Every trial of the study in packs of at most ``pack_size`` trials of one batch
    size, ordered by batch size then trial id (the order of ``make_trials``)."""
    return [PackSpec(pack_id(batch_size, ids), batch_size, ids)
            for batch_size in spec.batch_sizes
            for ids in split_ids(spec.trials_per_batch_size, pack_size)]


def pack_trials(spec: StudySpec, pack: PackSpec) -> list[TrialSpec]:
    """The pack's trial specs, re-derived from the study spec: equal to the entries of
    ``make_trials(spec)`` with the pack's batch size and trial ids, in the pack's order."""
    if pack.batch_size not in spec.batch_sizes:
        raise ValueError(f"pack {pack.pack_id}: batch size {pack.batch_size} is not one of the "
                         f"study's {list(spec.batch_sizes)}")
    if not pack.trial_ids or min(pack.trial_ids) < 1:
        raise ValueError(f"pack {pack.pack_id}: trial ids must be a non-empty list of ids >= 1")
    settings = sample_parameters(spec, max(pack.trial_ids))
    return [TrialSpec(spec.name, pack.batch_size, trial_id, settings[trial_id - 1])
            for trial_id in pack.trial_ids]
