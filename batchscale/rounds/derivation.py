"""A batch size's search rounds re-derived from their sources, and compared with study.json.

study.json's ``search_rounds`` is derived state: round 1 is the spec's search space and
``trials_per_batch_size``, and each later round is what ``search.next_round`` makes of
the spec and the earlier rounds' trials' measurements. Read back as written, a round
edited by hand, copied from another study or damaged would train trials outside the
space, or extra trials, and change a result without a word. So before the planner packs
a trial it derives the rounds again, round by round, and compares:

- round 1 against the spec (its range, and ids 1..``trials_per_batch_size``, or as many
  as the study had when round 2 was planned: a study grows); a round 1 that searched a
  fitted box (``core.rounds.FittedFrom``) against the box its recorded sources' parameters
  give (``rounds.fitted_round``), with the count it records (at most
  ``trials_per_batch_size``), and when that cannot be derived, against the spec;
- round k against ``next_round`` on the trials of the rounds before it, with the spec as
  it was when round k was planned (``PlannedWith``: trials per batch size, trial cap and
  budget then, each at most the spec's today; rows after that budget are not looked at,
  so a budget raised since does not change the round). A round recorded without it (before
  it was recorded) is derived with the spec's values, round 1's length as the trials per
  batch size, and with each smaller budget the trials before it ran under (their
  metadata.json ``max_steps``): one that reproduces it is what it was planned under.

A round can be derived only once every trial before it is finished (as the planner
planned it); until then it and the rounds after it are *held*: kept in study.json, their
trials not trained, and checked at a later stage.

Each difference is named in one line (the study.json, the round, the field, what it holds
and what the derivation gives), and then:

- **the derivation wins** when every trial already started in the derived rounds was
  trained with the parameters the derivation gives it (the record alone is wrong: an edit
  after the fact, or one no trial has used yet): study.json is rewritten with the derived
  rounds, so no trial outside them is trained and no result changes;
- **the run refuses** (``DamagedRoundsError``, one line naming the study.json and a trial)
  when a trial was trained from the wrong record (metadata.json's parameters differ from
  the derived ones, or the derived rounds do not hold a trial that has started): a result
  already depends on it, and rewriting study.json would keep
  that trial's result under another trial's name. Deleting those trials' folders and
  running again retrains them as the derivation says. Not exit 2: the input is fine, the
  store is damaged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace

from batchscale.core.errors import StoreDamaged
from batchscale.core.rounds import INITIAL, PlannedWith, SearchRound
from batchscale.core.spec import StudySpec, TrialSpec
from batchscale.core.trial_state import is_finished
from batchscale.rounds.fitted_round import derive_fitted_round
from batchscale.search.next_round import TrialResult, next_round
from batchscale.search.trials import batch_trials
from batchscale.store.layout import StudyStore

# (spec, store, trials, their metadata, budget) -> what next_round needs of each trial, from
# its rows up to that budget (None: some cannot be read as written): the planner's reading
# (``planner.results_at``), handed in because the planner calls this module
Results = Callable[[StudySpec, StudyStore, list[TrialSpec], dict, int], list[TrialResult] | None]


class DamagedRoundsError(StoreDamaged):
    """A batch size's recorded rounds differ from their derivation and trials were already
    trained from them; the message is one line naming the study.json and the trial."""


@dataclass
class CheckedRounds:
    """``rounds``: the batch size's rounds as derived (what to train); ``held``: recorded
    rounds after them that cannot be derived yet (trials before them unfinished);
    ``metadata``: each trial of ``rounds``'s metadata.json (None: none yet)."""

    rounds: list[SearchRound]
    held: list[SearchRound]
    metadata: dict[int, dict | None]


def planned_with(spec: StudySpec, batch_size: int) -> PlannedWith:
    """What a round planned now is planned under."""
    return PlannedWith(spec.trials_per_batch_size, spec.trial_cap, spec.max_steps[batch_size])


def checked_rounds(spec: StudySpec, store: StudyStore, batch_size: int, results: Results,
                   log=print, heal: bool = True) -> CheckedRounds:
    """The batch size's rounds, re-derived and compared with study.json (module docstring):
    differences logged and study.json rewritten (``heal``; else neither: a check before a
    run starts), or ``DamagedRoundsError``."""
    recorded = store.read_rounds(spec, batch_size)
    rounds, held, differences = _derive(spec, store, batch_size, recorded, results)
    trials = batch_trials(spec, batch_size, rounds)
    metadata = {t.trial_id: store.read_metadata(spec, t) for t in trials}
    if differences:
        where = f"{store.url(store.batch_dir(spec, batch_size))}/study.json"
        wrong = trained_otherwise(trials, metadata)
        why = "its metadata.json parameters are not the derived ones"
        if wrong is None:
            wrong = _trained_outside(spec, store, batch_size, recorded, [*rounds, *held])
            why = "the derived rounds hold no such trial"
        if wrong is not None:
            raise DamagedRoundsError(
                f"{where}: {differences[0]}, and trial {wrong} was already trained from it "
                f"({why}); delete the folders of the trials from that round on and run the "
                f"same study again")
        if heal:
            for difference in differences:
                log(f"{where}: {difference}; study.json rewritten with the derived rounds")
            store.write_rounds(spec, batch_size, [*rounds, *held])
    return CheckedRounds(rounds, held, metadata)


def trained_otherwise(trials: list[TrialSpec], metadata: dict[int, dict | None]) -> int | None:
    """The first trial whose metadata.json records other parameters than ``trials`` give it
    (None: every trial started so far matches)."""
    for trial in trials:
        meta = metadata.get(trial.trial_id)
        if meta is not None and meta.get("parameters") != json.loads(json.dumps(trial.parameters)):
            return trial.trial_id
    return None


def _trained_outside(spec: StudySpec, store: StudyStore, batch_size: int,
                     recorded: list[SearchRound], kept: list[SearchRound]) -> int | None:
    """The first trial of the recorded rounds that the derived ones do not hold and that
    has started (a metadata.json): dropping its round would drop a result silently."""
    held = {i for r in kept for i in r.trial_ids}
    outside = [i for r in recorded for i in r.trial_ids if i not in held]
    for trial in batch_trials(spec, batch_size, recorded, trial_ids=outside):
        if store.read_metadata(spec, trial) is not None:
            return trial.trial_id
    return None


def _derive(spec: StudySpec, store: StudyStore, batch_size: int, recorded: list[SearchRound],
            results: Results) -> tuple[list[SearchRound], list[SearchRound], list[str]]:
    """(derived rounds, held recorded rounds, differences in words)."""
    first, differences = _first_round(spec, store, batch_size, recorded)
    rounds = [first]
    differences += _compare(first, recorded[0])
    budget = spec.max_steps[batch_size]
    for index, record in enumerate(recorded[1:], start=1):
        trials = batch_trials(spec, batch_size, rounds)
        metadata = {t.trial_id: store.read_metadata(spec, t) for t in trials}
        if not all(is_finished(metadata[t.trial_id], budget) for t in trials):
            return rounds, recorded[index:], differences
        number = record.round if rounds[-1].round < record.round <= spec.max_rounds \
            else rounds[-1].round + 1
        derived = None
        for tried, context in enumerate(_contexts(spec, batch_size, record, rounds[0], metadata)):
            as_then = replace(spec, trials_per_batch_size=context.trials_per_batch_size,
                              max_trials_per_batch_size=context.trial_cap)
            found = results(spec, store, trials, metadata, context.max_steps)
            if found is None:  # measurements it cannot read as they were written: not yet
                return rounds, recorded[index:], differences
            candidate = next_round(as_then, rounds, found, number)
            if candidate is not None:
                candidate = replace(candidate, planned_with=context if record.planned_with else None)
            if tried == 0:
                derived = candidate  # under the context it states (or today's spec)
            if candidate is not None and not _compare(candidate, record):
                derived = candidate
                break
        if derived is None:
            differences.append(f"search round {record.round} (trials {record.first}-{record.last}) "
                               f"should not exist: the trials before it ask for no round")
            return rounds, [], differences
        differences += _compare(derived, record)
        rounds.append(derived)
    return rounds, [], differences


def _first_round(spec: StudySpec, store: StudyStore, batch_size: int,
                 recorded: list[SearchRound]) -> tuple[SearchRound, list[str]]:
    """Round 1 as derived: a fitted round recomputed from the sources it records
    (``rounds.fitted_round``); else, or when that cannot be (named in words), the spec's
    search space with ``trials_per_batch_size`` ids, or as many as the study had when
    round 2 was planned (a study grows)."""
    record, differences = recorded[0], []
    if record.fitted_from is not None:
        fitted, why = derive_fitted_round(spec, store, batch_size, record)
        if fitted is not None:
            return fitted, []
        differences.append(f"search round 1 (trials {record.first}-{record.last}): its fitted "
                           f"box cannot be derived from what it records ({why})")
    later = recorded[1] if len(recorded) > 1 else None
    first_context = _context(spec, batch_size, later, record) if later else None
    size = first_context.trials_per_batch_size if first_context else spec.trials_per_batch_size
    return SearchRound(1, 1, size, spec.search_space, INITIAL), differences


def _contexts(spec: StudySpec, batch_size: int, record: SearchRound, first: SearchRound,
              metadata: dict[int, dict | None]) -> list[PlannedWith]:
    """What ``record`` may have been planned under: its own ``planned_with`` (``_context``);
    for a round recorded before that existed, also each smaller budget the trials before
    it record having run under (a budget raised since continued some of them, and rows
    past the old budget would plan another round). One that reproduces the record is the
    one (``_derive``); if none does, the first is compared."""
    context = _context(spec, batch_size, record, first)
    if record.planned_with is not None:
        return [context]
    budgets = sorted({int(m["max_steps"]) for m in metadata.values()
                      if isinstance((m or {}).get("max_steps"), int)
                      and 0 < int(m["max_steps"]) < context.max_steps})
    return [context, *(replace(context, max_steps=b) for b in budgets)]


def _context(spec: StudySpec, batch_size: int, record: SearchRound,
             first: SearchRound) -> PlannedWith:
    """What ``record`` was planned under: its own record when the spec can have grown from
    it (each value at most today's), else today's spec with round 1's length as the trials
    per batch size (a round recorded before ``planned_with`` was)."""
    now = planned_with(spec, batch_size)
    given = record.planned_with
    if given is not None and (given.trials_per_batch_size <= now.trials_per_batch_size
                              and given.trial_cap <= now.trial_cap
                              and given.max_steps <= now.max_steps):
        return given
    size = first.last if 1 <= first.last <= now.trials_per_batch_size else now.trials_per_batch_size
    return PlannedWith(size, now.trial_cap, now.max_steps)


def _compare(derived: SearchRound, record: SearchRound) -> list[str]:
    """One phrase per field of ``record`` that is not what the derivation gives."""
    out = []
    name = f"search round {record.round}"
    if record.round != derived.round:
        out.append(f"{name}: round number {record.round} where the derivation gives {derived.round}")
    if (record.first, record.last) != (derived.first, derived.last):
        out.append(f"{name}: trial_ids [{record.first}, {record.last}] where the spec and the "
                   f"trials' measurements give [{derived.first}, {derived.last}]")
    if record.space != derived.space:
        names = sorted({p.name for p in record.space} ^ {p.name for p in derived.space}
                       | {p.name for p in record.space if p not in derived.space})
        out.append(f"{name}: search_space ({', '.join(names) or 'order'}) is not the "
                   f"{'spec' if derived.round == 1 and derived.fitted_from is None else 'derived'}'s "
                   f"({json.dumps(derived.to_dict()['search_space'], sort_keys=True)})")
    if record.reason != derived.reason:
        out.append(f"{name}: reason {record.reason!r} where the derivation gives {derived.reason!r}")
    if record.planned_with is not None and record.planned_with != derived.planned_with:
        out.append(f"{name}: planned_with {record.planned_with.to_dict()} cannot be (the spec's "
                   f"values are smaller)")
    if derived.fitted_from is not None and record.fitted_from != derived.fitted_from:
        out.append(f"{name}: fitted_from {record.fitted_from.to_dict()} where the derivation "
                   f"gives {derived.fitted_from.to_dict()} (a count above trials_per_batch_size)")
    return out
