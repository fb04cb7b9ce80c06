"""Plan one stage of a study: the packs it trains, and the search round it adds.

A study runs in stages, 1..``spec.max_rounds`` (sequential stages of the pipeline's DAG;
``run --local`` runs the same DAG). Stage r:

1. (stage 1) registers the study in the store: study_spec.json and each batch size's
   study.json, whose ``search_rounds`` keep the rounds already planned;
2. per batch size none of whose trials has started, where the spec asks for it
   (``new_batch_sizes``), records a round 1 in the box the metaparameter laws fit to the
   study's settled batch sizes instead of the spec's (``rounds.fitted_round``);
3. per batch size, packs every recorded trial that is not finished (new, interrupted, or
   stopped at a budget the study has since raised);
4. per batch size whose recorded trials are all finished and whose last round is older
   than r, asks ``search.next_round`` whether round r adds trials (top-up, re-search),
   records it in study.json, and packs its trials;
5. re-packs the trials of small batch sizes into mixed packs where the study's profile
   measured that sharing one padded step pays (``rounds.mixing``; no measurement, no
   mixed pack).

Re-running a stage, or the whole study, adds nothing that is already recorded: a round
is planned once, by the first stage numbered after it, and its trial ids never change.
What study.json records is not trusted as written: every stage first re-derives the
batch size's rounds from the spec and the trials' measurements (``rounds.derivation``),
trains only the trials of rounds it could derive, and rewrites a study.json that differs
(or refuses, when trials were already trained from a wrong record).
A stage with nothing to do returns no packs (its loop then has no iterations).
The packs come longest expected first (``longest_first``: the ParallelFor starts them in
list order), their ids the same whatever the order.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import partial

from batchscale.core.goals import first_step_reaching
from batchscale.core.rounds import SearchRound
from batchscale.core.spec import PackSpec, StudySpec, TrialSpec
from batchscale.core.trial_state import is_finished
from batchscale.rounds.derivation import (
    DamagedRoundsError,
    checked_rounds,
    planned_with,
    trained_otherwise,
)
from batchscale.rounds.fitted_round import plan_fitted_round
from batchscale.rounds.mixing import mix_packs
from batchscale.search.next_round import TrialResult, next_round
from batchscale.search.pack_order import expected_pack_seconds
from batchscale.search.pack_order import longest_first as by_expected_seconds
from batchscale.search.packs import split_trials
from batchscale.search.trials import batch_trials, make_trials
from batchscale.store.layout import StudyStore
from batchscale.store.profiles import read_step_times
from batchscale.store.trial_files import TrialDamage, check_trial, recorded_rows


def check_recorded_rounds(spec: StudySpec, store: StudyStore) -> None:
    """Refuse a run before it starts when a batch size's recorded rounds cannot be healed
    (``DamagedRoundsError``: trials were trained from a round the derivation does not give,
    exit 3 at the command line). Writes nothing; what can be healed is healed, and named,
    by the run's first stage. A ``search_rounds`` entry that is no round at all is left to
    that stage too (``register_study`` names and drops it)."""
    for batch_size in spec.batch_sizes:
        try:
            checked_rounds(spec, store, batch_size, partial(results_at, log=_quiet), _quiet,
                           heal=False)
        except DamagedRoundsError:
            raise
        except ValueError:
            continue


def _quiet(*_) -> None:
    """Says nothing: the run's stages name what they find."""


def plan_stage(spec: StudySpec, store: StudyStore, stage: int, pack_size: int,
               log=print) -> list[PackSpec]:
    """The packs of stage ``stage`` (1-based), see the module docstring."""
    if stage == 1:
        store.register_study(spec, log)
    packs: list[PackSpec] = []
    for batch_size in spec.batch_sizes:
        checked = checked_rounds(spec, store, batch_size, partial(results_at, log=log), log)
        rounds, metadata = checked.rounds, checked.metadata
        if _unstarted(checked):
            fitted = plan_fitted_round(spec, store, batch_size, partial(results_at, log=_quiet), log)
            if fitted is not None:
                store.write_rounds(spec, batch_size, [fitted])
                log(f"batch size {batch_size}: round 1 samples trials 1-{fitted.last} in a box "
                    f"fitted from batch sizes {', '.join(map(str, fitted.fitted_from.batch_sizes))}"
                    f" ({fitted.reason})")
                rounds, metadata = [fitted], dict.fromkeys(fitted.trial_ids)
        trials = batch_trials(spec, batch_size, rounds)
        budget = spec.max_steps[batch_size]
        todo = [t.trial_id for t in trials if not is_finished(metadata[t.trial_id], budget)]
        if not todo and not checked.held and stage > rounds[-1].round and stage <= spec.max_rounds:
            results = _results(spec, store, trials, metadata, log)
            added = None if results is None else next_round(spec, rounds, results, stage)
            if added is not None:
                added = replace(added, planned_with=planned_with(spec, batch_size))
                _check_trained(spec, store, batch_size, added)
                store.write_rounds(spec, batch_size, [*rounds, added])
                log(f"batch size {batch_size}: round {stage} adds trials {added.first}-"
                    f"{added.last} ({added.reason})")
                todo = list(added.trial_ids)
        packs += split_trials(batch_size, todo, pack_size)
    return longest_first(mix_packs(spec, store, packs, pack_size, log), spec, store)


def _unstarted(checked) -> bool:
    """A batch size whose round 1 is the spec's search space, alone, and none of whose
    trials has started: it may start from a fitted box instead (``rounds.fitted_round``)."""
    rounds = checked.rounds
    return (len(rounds) == 1 and not checked.held and rounds[0].fitted_from is None
            and all(meta is None for meta in checked.metadata.values()))


def longest_first(packs: list[PackSpec], spec: StudySpec, store: StudyStore) -> list[PackSpec]:
    """``packs`` in the order their tasks should start: the longest expected first
    (``search.pack_order``), by the study's step-time profile where it has one."""
    return by_expected_seconds(packs, pack_seconds(spec, store))


def pack_seconds(spec: StudySpec, store: StudyStore):
    """``pack -> expected seconds`` of the study's packs (``search.pack_order``), by its
    step-time profile where it has one: what orders packs, also across an experiment's
    studies (``rounds.experiment_stage``)."""
    step_times = profile_step_times(read_step_times(store.fs, spec.name), spec.workload.precision)
    return lambda p: expected_pack_seconds(p, spec.max_steps, step_times)


def profile_step_times(records: list[dict], precision: str) -> dict[int, float]:
    """Seconds per step by batch size, from the profile's records of one device at
    ``precision``. Where the store holds several device kinds (a study moved from CPUs to
    a GPU), the kind measured last: the planner runs in a light task that cannot ask which
    device the packs will train on. A file that cannot be believed was already left out."""
    ones = [r for r in records if r.get("devices") == 1 and r.get("precision") == precision]
    if not ones:
        return {}
    kind = max(ones, key=lambda r: str(r.get("measured", "")))["device_kind"]
    return {int(r["batch_size"]): float(r["seconds_per_step"])
            for r in ones if r["device_kind"] == kind}


def _check_trained(spec: StudySpec, store: StudyStore, batch_size: int, added: SearchRound) -> None:
    """Refuse a round whose trials were already trained with other parameters (a round
    deleted from study.json after its trials ran, under another derivation)."""
    trials = batch_trials(spec, batch_size, [added], added.trial_ids)
    wrong = trained_otherwise(trials, {t.trial_id: store.read_metadata(spec, t) for t in trials})
    if wrong is not None:
        raise DamagedRoundsError(
            f"{store.url(store.batch_dir(spec, batch_size))}/study.json: search round "
            f"{added.round} (trials {added.first}-{added.last}) is missing, and trial {wrong} was "
            f"already trained with other parameters than the round gives it; delete the folders "
            f"of the trials from that round on and run the same study again")


def study_rounds(spec: StudySpec, store: StudyStore) -> dict[int, list[SearchRound]]:
    """Every batch size's recorded search rounds."""
    return {b: store.read_rounds(spec, b) for b in spec.batch_sizes}


def planned_trials(spec: StudySpec, store: StudyStore) -> list[TrialSpec]:
    """Every trial the store's rounds hold, by batch size then id (``make_trials`` with
    the recorded rounds): what the study must finish."""
    return make_trials(spec, study_rounds(spec, store))


def _results(spec: StudySpec, store: StudyStore, trials: list[TrialSpec],
             metadata: dict[int, dict | None], log=print) -> list[TrialResult] | None:
    """What ``next_round`` needs of each finished trial, its files read through the
    store's one integrity check (``store.trial_files.check_trial``, the report's too).
    None when a trial's files cannot be believed: one line names each such file, and the
    batch size gets no round until it is repaired. A round decided without that trial
    could differ from the one decided with it, and a recorded round is never changed; the
    report leaves the same trial out."""
    out, damaged = [], []
    for trial in trials:
        read = check_trial(store.fs, store.trial_dir(spec, trial), None, trial.batch_size,
                           trial.trial_id)
        if isinstance(read, TrialDamage):
            damaged.append(read)
            log(_left_out_line(trial, store.url(read.path), read.problem))
            continue
        meta, table = read if read is not None else (metadata[trial.trial_id], None)
        diverged = (meta or {}).get("status") == "INFEASIBLE"
        rows = [] if diverged or table is None else table.to_dict("records")
        out.append(trial_result(spec, trial, diverged, rows))
    return None if damaged else out


def _left_out_line(trial: TrialSpec, url: str, problem: str) -> str:
    """The one line that says a trial's files cannot be believed, for planning."""
    return (f"batch size {trial.batch_size}: {url} {problem}; the round planner leaves trial "
            f"{trial.batch_size}/{trial.trial_id} out and adds no round to batch size "
            f"{trial.batch_size} until it is repaired (delete the trial's folder and run the "
            "same study again)")


def results_at(spec: StudySpec, store: StudyStore, trials: list[TrialSpec],
               metadata: dict[int, dict | None], budget: int,
               log=print) -> list[TrialResult] | None:
    """What ``next_round`` saw of ``trials`` (all finished) when it planned under ``budget``
    (``derivation.checked_rounds``): the planner's own reading when none ran past that
    budget; else each trial's verified rows up to it, diverged only if it diverged by then
    (a budget raised since continued some). None: some rows cannot be read as written
    (``log`` gets one line naming each such file)."""
    if all(_number((metadata[t.trial_id] or {}).get("max_steps")) <= budget for t in trials):
        return _results(spec, store, trials, metadata, log)
    out = []
    for trial in trials:
        meta = metadata[trial.trial_id] or {}
        diverged = meta.get("status") == "INFEASIBLE" and _number(meta.get("steps")) <= budget
        rows, why = recorded_rows(store.fs, store.trial_dir(spec, trial), trial.batch_size,
                                  trial.trial_id)
        if rows is None:
            log(_left_out_line(trial, store.url(f"{store.trial_dir(spec, trial)}/"
                                                       "measurements.csv"), why))
            return None
        rows = [] if diverged else [row for row in rows if row["step"] <= budget]
        out.append(trial_result(spec, trial, diverged, rows))
    return out


def trial_result(spec: StudySpec, trial: TrialSpec, diverged: bool, rows: list[dict]) -> TrialResult:
    """What ``next_round`` needs of one finished trial, from its measurement rows (none
    for a diverged trial): the planner's reading, and the progress line's estimate of
    what later rounds add (``rounds.expected``)."""
    goal = spec.goals[0]
    column = f"val/{goal.metric}"
    values = [float(row[column]) for row in rows if _finite(row.get(column))]
    best = (min(values) if goal.direction == "minimize" else max(values)) if values else None
    return TrialResult(trial.trial_id, trial.parameters, diverged, first_step_reaching(rows, goal), best)


def _number(value) -> float:
    """A metadata count as written (0 when it is not a number)."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
