"""One stage of an experiment's search rounds: every study's packs, in one pool.

An experiment's studies share one ParallelFor per stage (``pipelines.experiment``), so a
study with few trials left does not wait for another's slow packs, and the pool starts
the longest packs first across studies, as one study's planner does for its own
(``search.pack_order``). Each study is planned exactly as alone (``planner.plan_stage``:
its store, its rounds, its packs), so each stays a valid study.
"""

from __future__ import annotations

from batchscale.core.experiment import ExperimentSpec
from batchscale.core.spec import PackSpec, SpecError
from batchscale.rounds.planner import pack_seconds, plan_stage
from batchscale.store.layout import StudyStore


def plan_experiment_stage(experiment: ExperimentSpec, stage: int, pack_sizes: dict[str, int],
                          log=print) -> list[tuple[str, PackSpec]]:
    """(study label, pack) of stage ``stage`` over every study, the longest expected pack
    first (ties: the studies' order, then each study's own order). ``pack_sizes``: each
    study's pack size (its model decides it), by label."""
    missing = [s.label for s in experiment.studies if s.label not in pack_sizes]
    if missing:  # checked before stage 1 registers any study: nothing written
        raise SpecError(f"experiment_spec: study {missing[0]!r} is not one this pipeline was "
                        f"compiled for (its studies: {', '.join(pack_sizes) or 'none'}); compile "
                        "and upload the pipeline for this experiment (an axis's values are fixed "
                        "when it is compiled)")
    timed: list[tuple[float, str, PackSpec]] = []
    for study in experiment.studies:
        store = StudyStore(study.spec.store)
        packs = plan_stage(study.spec, store, stage, int(pack_sizes[study.label]),
                           log=lambda line, label=study.label: log(f"{label}: {line}"))
        seconds = pack_seconds(study.spec, store)
        timed += [(seconds(p), study.label, p) for p in packs]
    ordered = sorted(range(len(timed)), key=lambda i: -timed[i][0])  # stable: ties keep order
    return [(timed[i][1], timed[i][2]) for i in ordered]
