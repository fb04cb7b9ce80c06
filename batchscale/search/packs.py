"""A study's trials grouped into packs: what one pipeline task (one pod) trains together.

Only pack descriptors (``PackSpec``: id, batch size, trial ids; a mixed pack also the
trial ids of its other batch sizes) cross KFP as loop items,
so the loop parameter stays a few bytes per pack whatever the search space; each pack
task re-derives its trials' metaparameters from the study spec with ``pack_trials``,
the same deterministic sequence ``make_trials`` uses, so a trial means the same thing
packed or alone. How many trials a pack holds is decided above this layer
(``batchscale.pipelines.placement.pack_size_for``); here it is only a number. Which
batch sizes share a mixed pack is decided above too (``batchscale.rounds.mixing``); here
``mix_trials`` only spreads the given trials over packs.
"""

from __future__ import annotations

import math

from batchscale.core.rounds import SearchRound, initial_round
from batchscale.core.spec import PackSpec, StudySpec, TrialSpec
from batchscale.search.trials import batch_trials


def pack_id(batch_size: int, trial_ids: tuple[int, ...]) -> str:
    """A readable id that depends only on the batch size and the trials: ``b256-t17-32``
    (trials 17..32 at batch size 256), ``b256-t5`` for a pack of one."""
    return f"b{batch_size}-{_trials_tag(trial_ids)}"


def _trials_tag(trial_ids: tuple[int, ...]) -> str:
    first, last = trial_ids[0], trial_ids[-1]
    return f"t{first}" if first == last else f"t{first}-{last}"


def mixed_pack_id(parts: tuple[tuple[int, tuple[int, ...]], ...]) -> str:
    """The id of a pack of several batch sizes: ``b2+4+8-t1-10`` when each holds the same
    trials (trials 1..10 of batch sizes 2, 4 and 8), else each part's id joined by '+'
    (``b2-t1-5+b8-t1-3``); a pack of one batch size keeps ``pack_id``'s form."""
    if len({ids for _, ids in parts}) == 1:
        return "b" + "+".join(str(b) for b, _ in parts) + "-" + _trials_tag(parts[0][1])
    return "+".join(pack_id(b, ids) for b, ids in parts)


def make_pack(parts: list[tuple[int, tuple[int, ...]]]) -> PackSpec:
    """The descriptor of a pack of ``parts`` ((batch size, trial ids) each, by batch size)."""
    (batch_size, ids), *more = parts
    if not more:
        return PackSpec(pack_id(batch_size, ids), batch_size, ids)
    return PackSpec(mixed_pack_id(tuple(parts)), batch_size, ids, tuple(more))


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


def mix_trials(todo: dict[int, list[int]], pack_size: int) -> list[PackSpec]:
    """Trials of several batch sizes (``todo``: batch size -> trial ids) in the fewest
    packs of at most ``pack_size`` trials in all, each pack holding about an even share
    of every batch size, so the packs take about as long as each other. The trials are
    lined up by their relative place in their own batch size (ties: the smaller batch
    size first) and cut into even runs; a pack whose run holds one batch size is a
    plain pack."""
    if pack_size < 1:
        raise ValueError(f"pack size {pack_size} must be >= 1")
    ids = {b: sorted(todo[b]) for b in sorted(todo) if todo[b]}
    line = sorted(((i + 0.5) / len(t), b, trial) for b, t in ids.items() for i, trial in enumerate(t))
    packs = []
    for run in split_ids(len(line), pack_size, first=0) if line else []:
        held = [line[i][1:] for i in run]
        packs.append(make_pack([(b, tuple(t for c, t in held if c == b))
                                for b in sorted({c for c, _ in held})]))
    return packs


def make_packs(spec: StudySpec, pack_size: int) -> list[PackSpec]:
    """Round 1's trials in packs of at most ``pack_size`` trials of one batch size,
    ordered by batch size then trial id (the order of ``make_trials``)."""
    return [pack for batch_size in spec.batch_sizes
            for pack in split_trials(batch_size, list(initial_round(spec).trial_ids), pack_size)]


def pack_trials(spec: StudySpec, pack: PackSpec,
                rounds: list[SearchRound] | dict[int, list[SearchRound]] | None = None
                ) -> list[TrialSpec]:
    """The pack's trial specs, re-derived from the study spec and each batch size's search
    rounds, in the pack's order (batch size by batch size, as ``parts``). ``rounds``: a
    dict, batch size -> its recorded rounds; a list, the rounds of a pack of one batch
    size; None or a batch size missing from the dict: round 1 only."""
    if isinstance(rounds, list) and pack.mixed:
        raise ValueError(f"pack {pack.pack_id}: a pack of batch sizes {list(pack.batch_sizes)} "
                         "needs the rounds of each batch size (a dict), not one list")
    by_size = rounds if isinstance(rounds, dict) else {pack.batch_size: rounds}
    out = []
    for batch_size, trial_ids in pack.parts:
        if batch_size not in spec.batch_sizes:
            raise ValueError(f"pack {pack.pack_id}: batch size {batch_size} is not one of the "
                             f"study's {list(spec.batch_sizes)}")
        if not trial_ids or min(trial_ids) < 1:
            raise ValueError(f"pack {pack.pack_id}: trial ids must be a non-empty list of ids >= 1")
        out += batch_trials(spec, batch_size, by_size.get(batch_size) or [initial_round(spec)],
                            trial_ids)
    return out
