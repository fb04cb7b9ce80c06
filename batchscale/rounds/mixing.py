"""Which batch sizes of a stage share mixed packs: the planner's side of mixed-batch packs.

A mixed pack trains trials of several small batch sizes in one vmapped step padded to the
largest, each trial's update masked to its own batch (``batchscale.training``'s mixed
packs). On an accelerator, steps at batch sizes 2-8 are latency-bound, so one step for
all of them can multiply trials per hour; on a CPU the padding costs about what it saves
(the quickstart's batch sizes 8 and 16 on this 2-core machine, loaded: mixed measured
0.3-1.0x separate, 2026-11-26). So the planner mixes only where the study's own
measurement says it pays, and never otherwise: with no measurement every stage plans
exactly the packs it planned before.

The measurement is a pack-mode record of the study's profile
(``store.profiles.read_pack_modes``), written by the study's pack tasks on their
trainers. One record allows the batch sizes it names to share packs when

- it is of several batch sizes (``batch_sizes``: distinct integers, each one of the
  study's), of this study's model (``spec.workload.model``) and precision, and measured on
  the study's device kind: that of the most recently ``measured`` pack-mode record of the
  study (the planner runs in a light CPU pod, not on the trainer, so it cannot ask its own
  device; every record is a trainer's);
- it chose ``mixed`` and its ``rates`` (trial-steps per second, ``mixed`` and
  ``separate``, finite and > 0) still say so once the budgets are counted: a mixed group
  steps in lockstep to its longest budget, and a trial with a shorter one leaves its slot
  idle from then on. Of the group's slot-steps, the share ``useful`` = sum of n_b x
  budget_b over N x the longest budget does work, so mixing pays only if
  ``rates["mixed"] x useful > rates["separate"]`` (batch sizes 8 and 16 of the
  quickstart, budgets 5,000 and 4,000, 10 trials each: useful = 0.9, so mixed must measure
  more than 1.11x separate);
- it is the latest record of its batch sizes on that device kind (a newer measurement of
  the same batch sizes, at another width, that chose ``separate`` wins);
- every one of its batch sizes has trials to train in this stage. The measurement holds
  for that set (its padding, its largest batch size), not for a part of it; a later round
  that tops up only some of them packs them as before.

A malformed record (any field above missing or of the wrong kind) is left out, never
believed; the profile's reader names in ``log`` a file it cannot believe. Where records overlap, the
one with the larger budget-counted gain is used first (ties: the smaller batch sizes),
and a batch size joins one group at most. The packs themselves come from
``search.packs.mix_trials``: at most ``pack_size`` trials each, all batch sizes spread
evenly over them. The pack task checks the measurement again on its own device and trains
a mixed pack's batch sizes one after another there when mixing does not pay or cannot be
exact; the plan is a proposal the trainer may decline. A trial trained in a mixed group
has the measurements it would have alone within float32 rounding, not to the bit, so a
study's low bits depend on the measurement, as with the pack mode; the record cached in
the profile keeps a re-run of the study the same.
"""

from __future__ import annotations

import math

from batchscale.core.spec import PackSpec, StudySpec
from batchscale.search.packs import mix_trials
from batchscale.store.layout import StudyStore
from batchscale.store.profiles import read_pack_modes


def mix_packs(spec: StudySpec, store: StudyStore, packs: list[PackSpec], pack_size: int,
              log=print) -> list[PackSpec]:
    """``packs`` (the stage's packs, one batch size each) with the trials of each group
    of batch sizes that the profile says to mix (``mixed_groups``) re-packed as mixed
    packs, in the place of that group's first pack; the rest unchanged."""
    todo: dict[int, list[int]] = {}
    for pack in packs:
        todo.setdefault(pack.batch_size, []).extend(pack.trial_ids)
    if len(todo) < 2:  # nothing to mix: the profile is not even listed
        return packs
    groups = mixed_groups(spec, read_pack_modes(store.fs, spec.name, log), todo)
    if not groups:
        return packs
    out, placed = [], set()
    group_of = {b: group for group in groups for b in group}
    for pack in packs:
        group = group_of.get(pack.batch_size)
        if group is None:
            out.append(pack)
        elif group not in placed:
            placed.add(group)
            mixed = mix_trials({b: todo[b] for b in group}, pack_size)
            log(f"batch sizes {', '.join(map(str, group))}: {len(mixed)} mixed pack(s) "
                f"({', '.join(p.pack_id for p in mixed)}), as the study's profile measured")
            out += mixed
    return out


def mixed_groups(spec: StudySpec, records: list[dict],
                 todo: dict[int, list[int]]) -> list[tuple[int, ...]]:
    """The groups of batch sizes whose trials in ``todo`` (batch size -> trial ids to
    train) share packs, by the rule of the module docstring; [] when none."""
    kind = study_device_kind(records)
    latest: dict[tuple[int, ...], dict] = {}  # batch sizes -> their latest record on this device
    for record in sorted(records, key=_measured):
        sizes = mixing_sizes(spec, record)
        if sizes is not None and record["device_kind"] == kind:
            latest[sizes] = record
    usable = []
    for sizes, record in latest.items():
        if record["chosen"] != "mixed" or not all(todo.get(b) for b in sizes):
            continue
        gain = budget_counted_gain(spec, record["rates"], {b: len(todo[b]) for b in sizes})
        if gain > 1.0:
            usable.append((-gain, sizes))
    groups, taken = [], set()
    for _, sizes in sorted(usable):
        if taken.isdisjoint(sizes):
            groups.append(sizes)
            taken.update(sizes)
    return groups


def mixing_sizes(spec: StudySpec, record: dict) -> tuple[int, ...] | None:
    """The sorted batch sizes of a record that measured mixing this study's trials, or
    None: the record is of one batch size, of another model or precision, or malformed."""
    sizes = record.get("batch_sizes")
    if not isinstance(sizes, list) or len(sizes) < 2:
        return None
    if not all(isinstance(b, int) and not isinstance(b, bool) for b in sizes):
        return None
    if len(set(sizes)) != len(sizes) or not set(sizes) <= set(spec.batch_sizes):
        return None
    if (record.get("chosen") not in ("mixed", "separate") or record.get("model") != spec.workload.model
            or record.get("precision") != spec.workload.precision
            or not isinstance(record.get("device_kind"), str)):
        return None
    rates = record.get("rates")
    if not isinstance(rates, dict) or not all(_positive(rates.get(m)) for m in ("mixed", "separate")):
        return None
    return tuple(sorted(sizes))


def budget_counted_gain(spec: StudySpec, rates: dict, counts: dict[int, int]) -> float:
    """Mixed trial-steps per second over separate ones, counting only the slot-steps that
    train (``counts``: trials per batch size; each trial's budget ``spec.max_steps``)."""
    longest = max(spec.max_steps[b] for b in counts)
    useful = sum(n * spec.max_steps[b] for b, n in counts.items()) / (sum(counts.values()) * longest)
    return rates["mixed"] * useful / rates["separate"]


def study_device_kind(records: list[dict]) -> str | None:
    """The device kind of the study's most recently measured pack-mode record (None: no
    record says one)."""
    dated = [(_measured(r), r["device_kind"]) for r in records if isinstance(r.get("device_kind"), str)]
    return max(dated)[1] if dated else None


def _measured(record: dict) -> str:
    """When a record was measured (ISO time; "" when it does not say: the oldest)."""
    return record["measured"] if isinstance(record.get("measured"), str) else ""


def _positive(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)
