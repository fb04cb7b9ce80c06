"""How a pack's trials are grouped for the vmapped loop, and how the groups take turns.

A *group* is the trials that train vmapped together in one compiled step (``width`` of
them at most; one where the pack takes turns, ``pack_mode``). Fresh trials fill groups in
order; a trial resumed from a checkpoint goes back into a group as wide as the one it
left, at its old position, so its numbers stay bit-identical (XLA's rounding in a vmapped
step can depend on the width). So does a trial without a checkpoint of its own that a
resumed trial's checkpoint names as a member of its group (a pack killed between the
first checkpoints of a group's trials): at step 0, at its old position
(``_place_named``). ``in_lockstep`` then runs the groups interleaved, evaluation by
evaluation.
"""

from __future__ import annotations

from batchscale.training.signals import Stopped


def pack_groups(runs: list, width: int) -> list[tuple[list[int], list[int | None]]]:
    """The groups of ``runs`` (``pack_loop.TrialRun``s, fresh or resumed), each as
    (members: indices into ``runs``, slots: which member sits at each position, None
    for filler), fresh groups first."""
    _place_named(runs)
    groups: dict[tuple, list[int]] = {}
    fresh = [i for i, run in enumerate(runs) if run.width is None]
    for start in range(0, len(fresh), width):  # at most `width` trials vmapped at once
        groups[0, -start - 1, 0] = fresh[start:start + width]
    for i, run in enumerate(runs):
        if run.width is not None:  # resumed: at its step, in a pack as wide as it was
            _join_resumed(groups, runs, i)
    out = []
    for key in sorted(groups, key=lambda k: (k[0], -k[1], k[2])):
        members = groups[key]
        group_width = key[1] if key[1] > 0 else len(members)
        out.append((members, slots_of([runs[i] for i in members], group_width)))
    return out


def _place_named(runs: list) -> None:
    """Give a fresh run (no checkpoint of its own) that a resumed run's checkpoint names
    as a member of its group (``members``: the trial id at each position) that place
    back: its width and position, at step 0. A pack killed after one trial of a group
    wrote its first checkpoint and before the others did would otherwise put the others
    into a fresh group of their own, narrower than the one they trained in, where XLA
    rounds differently: their numbers would differ from the first evaluation on."""
    named: dict[tuple, tuple] = {}
    for run in runs:
        if run.width is not None and run.members:
            # a mixed-batch group's members are of several batch sizes (trial ids repeat
            # across batch sizes): its checkpoint names each member's batch size too
            sizes = getattr(run, "member_sizes", None) or [_batch(run)] * len(run.members)
            for position, trial_id in enumerate(run.members):
                if trial_id is not None and (sizes[position], trial_id) != _key(run):
                    named.setdefault((sizes[position], trial_id),
                                     (run.width, position, run.members, sizes, getattr(run, "padded", None)))
    for run in runs:
        if run.width is None and _key(run) in named:
            run.width, run.position, run.members, run.member_sizes, run.padded = named[_key(run)]


def _batch(run) -> int | None:
    return getattr(run.trial, "batch_size", None)


def _key(run) -> tuple:
    return _batch(run), run.trial.trial_id


def _join_resumed(groups: dict[tuple, list[int]], runs: list, i: int) -> None:
    """Put resumed run ``i`` into a group of runs at its step and pack width where its
    position is free (trials of two earlier packs, e.g. several budget-stopped trials
    trained one at a time, each held position 0) and whose batch is padded as its was (a
    mixed-batch group's ``padded``; None otherwise: then of its batch size too, since
    trials of two unpadded groups of other batch sizes put together would be padded and
    masked, ``mixed_step.padded_batch``), else into a new such group."""
    run = runs[i]
    for n in range(len(runs)):
        members = groups.setdefault((run.step, run.width, n), [])
        if all(runs[j].position != run.position and _padding(runs[j]) == _padding(run)
               for j in members):
            members.append(i)
            return


def _padding(run) -> tuple:
    """What a resumed run's group must share with it besides step and width: its padded
    batch (a mixed-batch group's), or where it had none, its own batch size."""
    padded = getattr(run, "padded", None)
    return ("padded", padded) if padded is not None else ("batch", _batch(run))


def slots_of(runs: list, width: int) -> list[int | None]:
    """Which run (index into ``runs``) sits at each position of a pack ``width`` wide; None
    is filler. A resumed trial takes back the position it had when it was checkpointed, in
    a pack as wide as it was then (filler where finished trials were), because XLA's
    rounding in a vmapped step can depend on the pack's width: this keeps a resumed trial's
    numbers bit-identical to an uninterrupted run's."""
    if all(run.position is None for run in runs):
        return list(range(len(runs)))
    slots: list[int | None] = [None] * max(width, len(runs))
    for i, run in enumerate(runs):
        slots[run.position] = i
    return slots


def in_lockstep(loops: list, flush_seconds: float) -> None:
    """Run a pack's groups (``pack_loop._Loop``s) interleaved, evaluation by evaluation:
    the group furthest behind always trains next.

    Each group's numbers are those it would have alone (its own arrays, the same compiled
    step); what changes is what a trial knows when it is evaluated: under a protocol
    that races the pack's earliest goal crossing is found before any trial trains past it
    (one group after another, the first groups would train to their budgets before any
    crossing is known). A stop request checkpoints every group that started. Groups flush
    their progress ``len(loops)`` times less often, so a pack writes to the store as often
    as one group did.
    """
    for loop in loops:
        loop.flush_seconds = flush_seconds * len(loops)
    running = [(loop, loop.evaluations()) for loop in loops]
    try:
        # Each group's first turn trains nothing (it evaluates where a checkpoint left it,
        # or step 0): taken in list order before any group trains, so a resumed pack learns
        # every pending crossing before the group furthest behind trains past it, as the
        # uninterrupted run did.
        for entry in list(running):
            try:
                next(entry[1])
            except StopIteration:
                running.remove(entry)
        while running:
            entry = min(running, key=lambda e: e[0].step)
            try:
                next(entry[1])
            except StopIteration:
                running.remove(entry)
    except Stopped:
        for loop, _ in running:
            if loop.begun and loop.live() and not loop.stop_checkpointed:
                loop.checkpoint(loop.step)
        raise
