"""The trials of a study: one TrialSpec per (batch size, trial id).

Trial k is the k-th point of the study's quasi-random sequence, mapped onto the search
space of the round that holds k (``batchscale.core.rounds``). Every batch size uses the
same sequence, so trial k of round 1 means the same point of the spec's search space at
every batch size, and ids stay stable when a study grows. Fixed parameters are added to
every setting.
"""

from __future__ import annotations

from batchscale.core.rounds import SearchRound, initial_round, round_of
from batchscale.core.spec import StudySpec, TrialSpec
from batchscale.search.halton import halton_points


def sample_parameters(spec: StudySpec, count: int) -> list[dict]:
    """The first ``count`` metaparameter settings of the spec's own search space (round 1)."""
    return trial_parameters(spec, range(1, count + 1), [initial_round(spec)])


def trial_parameters(spec: StudySpec, trial_ids, rounds: list[SearchRound]) -> list[dict]:
    """The settings of ``trial_ids`` (1-based), each from the space of its round."""
    ids = list(trial_ids)
    if not ids:
        return []
    points = halton_points(max(ids), max(len(spec.search_space), 1), spec.seed)
    settings = []
    for trial_id in ids:
        space = round_of(rounds, trial_id).space
        params = {p.name: p.from_unit(float(u)) for p, u in zip(space, points[trial_id - 1])}
        settings.append({**spec.fixed, **params})
    return settings


def batch_trials(spec: StudySpec, batch_size: int, rounds: list[SearchRound],
                 trial_ids=None) -> list[TrialSpec]:
    """The trials of one batch size (every id of its rounds, or ``trial_ids``)."""
    ids = list(trial_ids) if trial_ids is not None else [i for r in rounds for i in r.trial_ids]
    return [TrialSpec(spec.name, batch_size, trial_id, params)
            for trial_id, params in zip(ids, trial_parameters(spec, ids, rounds))]


def make_trials(spec: StudySpec, rounds: dict[int, list[SearchRound]] | None = None) -> list[TrialSpec]:
    """All trials of the study, ordered by batch size then trial id (1-based). ``rounds``:
    each batch size's search rounds as the store records them (default: round 1 only)."""
    rounds = rounds or {}
    return [trial for batch_size in spec.batch_sizes
            for trial in batch_trials(spec, batch_size, rounds.get(batch_size) or [initial_round(spec)])]
