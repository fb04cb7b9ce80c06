"""One stage of an experiment's search rounds: every study's packs, in one pool.

An experiment's studies share one ParallelFor per stage (``pipelines.experiment``), so a
study with few trials left does not wait for another's slow packs: every study's packs
are dealt to the same lanes, the longest first across studies (``search.lanes``), as one
study's are. Each study is planned exactly as alone (``planner.plan_stage``:
its store, its rounds, its packs), so each stays a valid study.
"""

from __future__ import annotations

from batchscale.core.experiment import ExperimentSpec
from batchscale.core.spec import PackSpec, SpecError
from batchscale.rounds.planner import pack_seconds, plan_stage
from batchscale.search.lanes import deal_lanes, lane_items
from batchscale.store.layout import StudyStore


def plan_experiment_lanes(experiment: ExperimentSpec, stage: int, pack_sizes: dict[str, int],
                          lanes: int, log=print) -> tuple[list[dict], int]:
    """Stage ``stage``'s packs of every study dealt to at most ``lanes`` lanes
    (``search.lanes``), as the loop's items: ``{"lane": K, "packs": [{"study": LABEL,
    "pack": PackSpec dict}, ...]}``; and how many packs they hold."""
    timed = _timed_packs(experiment, stage, pack_sizes, log)
    dealt = deal_lanes(list(range(len(timed))), lambda i: timed[i][0], lanes)
    items = [[{"study": timed[i][1], "pack": timed[i][2].to_dict()} for i in lane] for lane in dealt]
    return lane_items(items), len(timed)


def _timed_packs(experiment: ExperimentSpec, stage: int, pack_sizes: dict[str, int],
                 log) -> list[tuple[float, str, PackSpec]]:
    """(expected seconds, study label, pack) of stage ``stage`` over every study, in the
    studies' order (``plan_stage``, which registers each study at stage 1)."""
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
    return timed
