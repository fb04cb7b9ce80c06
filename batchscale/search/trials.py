"""The trial list of a study: one TrialSpec per (batch size, trial id)."""

from __future__ import annotations

from batchscale.core.spec import StudySpec, TrialSpec
from batchscale.search.halton import halton_points


def sample_parameters(spec: StudySpec, count: int) -> list[dict]:
    """The first ``count`` metaparameter settings of the study's search space.

    Every batch size uses the same sequence: trial k means the same point of the
    search space at every batch size, and ids stay stable when a study grows.
    Fixed parameters are added to every setting.
    """
    points = halton_points(count, max(len(spec.search_space), 1), spec.seed)
    settings = []
    for point in points:
        params = {p.name: p.from_unit(float(u)) for p, u in zip(spec.search_space, point)}
        settings.append({**spec.fixed, **params})
    return settings


def make_trials(spec: StudySpec) -> list[TrialSpec]:
    """All trials of the study, ordered by batch size then trial id (1-based)."""
    settings = sample_parameters(spec, spec.trials_per_batch_size)
    return [
        TrialSpec(spec.name, batch_size, trial_id, params)
        for batch_size in spec.batch_sizes
        for trial_id, params in enumerate(settings, start=1)
    ]
