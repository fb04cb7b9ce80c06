"""Round 1 of a batch size added to a grown study, from the box the metaparameter laws fit.

With ``new_batch_sizes: {search: fitted_box}`` (``core.new_batch_sizes``), a batch size
none of whose trials has started, in a study where at least three other batch sizes are
*settled*, starts with a round 1 of its own: ``FittedFrom.trials`` trials sampled from
``search.metaparameter_laws.proposed_box``, fitted to each settled batch size's best
trial and its near-best ones. A batch size is settled when every trial its rounds hold
has finished under today's budget, the round planner would add no round to it
(``search.next_round``, or its rounds are used up) and a trial reached the study's first
goal; its best trial is
``next_round.best_trial``'s (fewest steps to that goal), the trial a re-search centres on,
and its near-best trials those within ``law_points.NEAR_BEST`` of its steps
(``law_points.best_and_near_best``): the points the report's laws are fitted to too
(``analysis.statistics.metaparameter_law_fits``), each with the searched parameters only,
so the box is the one the report would propose.

The round records its sources, per settled batch size the best and near-best trial ids
(``core.rounds.FittedSource``), and its count (``core.rounds.FittedFrom``), so
``rounds.derivation`` recomputes it: the same trials' parameters (from their batch sizes'
recorded rounds) give the same box (up to floating-point noise, ``same_box``: the recorded
bounds are kept, the ones its trials trained with), and the count it was planned with
stands while it is at most ``trials_per_batch_size``. Which trials were best is not asked
again: a later round of a source batch size may find a better trial, and the box was
fitted before it. The sources are read from the store, whatever batch sizes a later run
lists.

Fewer than three settled batch sizes (or a law that cannot be fitted): the batch size
searches the spec's ``search_space`` as always, and one log line says why.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from batchscale.core.rounds import FittedFrom, FittedSource, SearchRound
from batchscale.core.spec import Parameter, StudySpec, TrialSpec
from batchscale.core.trial_state import is_finished
from batchscale.search.law_points import best_and_near_best
from batchscale.search.metaparameter_laws import proposed_box
from batchscale.search.next_round import TrialResult, next_round
from batchscale.search.trials import batch_trials
from batchscale.store.layout import StudyStore

BOUND_TOLERANCE = 1e-6  # a recomputed bound this close to the recorded one is the same

# as ``rounds.derivation.Results``: the planner's reading of finished trials under a budget
Results = Callable[[StudySpec, StudyStore, list[TrialSpec], dict, int], list[TrialResult] | None]


def plan_fitted_round(spec: StudySpec, store: StudyStore, batch_size: int, results: Results,
                      log=print) -> SearchRound | None:
    """The fitted round 1 for ``batch_size`` (its trials not started; the caller checks),
    or None: the spec does not ask for one, or the laws cannot be fitted (logged)."""
    if not spec.new_batch_sizes.fitted:
        return None
    sources = settled_sources(spec, store, batch_size, results)
    count = spec.new_batch_sizes.fitted_trials(spec.trials_per_batch_size)
    try:
        return fitted_round(spec, store, batch_size, FittedFrom(tuple(sources), count))
    except ValueError as err:
        log(f"batch size {batch_size}: searches the spec's search space, not a fitted box "
            f"({err})")
        return None


def derive_fitted_round(spec: StudySpec, store: StudyStore, batch_size: int,
                        record: SearchRound) -> tuple[SearchRound | None, str]:
    """``record`` (a fitted round 1) recomputed from the sources it names: (the round, "")
    or (None, why it cannot be: a source no batch size's rounds hold, or no law)."""
    given = record.fitted_from
    count = given.trials if 1 <= given.trials <= spec.trials_per_batch_size else \
        spec.new_batch_sizes.fitted_trials(spec.trials_per_batch_size)
    try:
        derived = fitted_round(spec, store, batch_size, FittedFrom(given.sources, count))
    except ValueError as err:
        return None, str(err)
    if same_box(derived.space, record.space):
        derived = replace(derived, space=record.space)  # its trials' parameters, as trained
    return derived, ""


def same_box(derived: tuple[Parameter, ...], recorded: tuple[Parameter, ...]) -> bool:
    """Whether ``recorded`` is ``derived`` up to floating-point noise: the same parameters,
    scales and values, each bound within ``BOUND_TOLERANCE`` (relative). The fit's last
    digits differ between machines (BLAS) and numpy versions, and the planner and a later
    stage may run on different machines; an edit or a record from other sources is far
    larger."""
    if [(p.name, p.scale, p.values, p.integer) for p in derived] != \
            [(p.name, p.scale, p.values, p.integer) for p in recorded]:
        return False
    return all(math.isclose(a, b, rel_tol=BOUND_TOLERANCE) for p, q in zip(derived, recorded)
               for a, b in ((p.min, q.min), (p.max, q.max)) if a is not None and b is not None)


def fitted_round(spec: StudySpec, store: StudyStore, batch_size: int,
                 fitted: FittedFrom) -> SearchRound:
    """Round 1 of ``batch_size``: ``fitted.trials`` trials in the box fitted to the
    parameters of ``fitted.sources`` (one ValueError line where it cannot be)."""
    points = [law_point(spec, store, batch_size, source) for source in fitted.sources]
    box, reason = proposed_box(points, batch_size, spec.search_space)
    return SearchRound(1, 1, fitted.trials, tuple(box), reason, None, fitted)


def law_point(spec: StudySpec, store: StudyStore, batch_size: int,
              source: FittedSource) -> tuple[int, dict, list[dict]]:
    """(batch size, best trial's parameters, near-best trials' parameters) of ``source``,
    the searched parameters only, each trial's from its batch size's recorded rounds
    (``search.trials``: the parameters the trial trained with)."""
    b = source.batch_size
    if b == batch_size or store.read_study_json(spec, b) is None:  # a run may list fewer
        raise ValueError(f"source batch size {b} is not another batch size of the study")
    rounds = store.read_rounds(spec, b)
    held = {i for r in rounds for i in r.trial_ids}
    ids = [source.trial_id, *source.near_best]
    if not set(ids) <= held:
        missing = min(set(ids) - held)
        raise ValueError(f"source trial {b}/{missing} is not one of the trials batch size {b}'s "
                         f"search rounds hold")
    searched = [p.name for p in spec.search_space if p.values is None]  # the laws' kind
    best, *near = ({n: t.parameters[n] for n in searched if n in t.parameters}
                   for t in batch_trials(spec, b, rounds, ids))
    return b, best, near


def settled_sources(spec: StudySpec, store: StudyStore, batch_size: int,
                    results: Results) -> list[FittedSource]:
    """The best and near-best trials of each settled batch size other than ``batch_size``
    (module docstring), smallest batch size first."""
    out = []
    for b in spec.batch_sizes:
        if b == batch_size:
            continue
        rounds = store.read_rounds(spec, b)
        trials = batch_trials(spec, b, rounds)
        metadata = _finished_metadata(spec, store, trials, spec.max_steps[b])
        if metadata is None:
            continue
        found = results(spec, store, trials, metadata, spec.max_steps[b])
        point = best_and_near_best(found) if found is not None else None
        if point is None:
            continue
        if rounds[-1].round < spec.max_rounds and next_round(spec, rounds, found,
                                                             rounds[-1].round + 1) is not None:
            continue  # its search goes on: its best may still move
        best, near = point
        out.append(FittedSource(b, best.trial_id, tuple(r.trial_id for r in near)))
    return out


def _finished_metadata(spec: StudySpec, store: StudyStore, trials: list[TrialSpec],
                       budget: int) -> dict[int, dict] | None:
    """Each trial's metadata.json when every one has finished under ``budget``; None at
    the first that has not (in a fresh study, at once: one read per batch size)."""
    metadata = {}
    for trial in trials:
        meta = store.read_metadata(spec, trial)
        if not is_finished(meta, budget):
            return None
        metadata[trial.trial_id] = meta
    return metadata
