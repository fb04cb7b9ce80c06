"""KFP wrapper of plan_experiment_lanes: one stage of every study's search rounds, dealt
to lanes (each pack tagged with its study) for one ParallelFor."""

from typing import List

from kfp import dsl

from batchscale.core.images import LIGHT_IMAGE


@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def plan_experiment_round(experiment_spec: dict, store_root: str, dataset_location: str,
                          pack_sizes: dict, stage: int, lanes: int) -> List[dict]:
    """At most ``lanes`` items ``{lane, packs: [{study, pack}, ...]}`` of stage ``stage``
    over the experiment's studies, the longest expected packs dealt first
    (``rounds.experiment_stage``). Stage 1 registers each study."""
    from batchscale.rounds.experiment_stage import plan_experiment_lanes
    from batchscale.validation.experiment_spec import parse_experiment

    experiment = parse_experiment(experiment_spec, store_root)
    items, packs = plan_experiment_lanes(experiment, stage, pack_sizes, lanes)
    studies = sorted({p["study"] for item in items for p in item["packs"]})
    print(f"stage {stage}: {packs} packs in {len(items)} lane(s) of studies "
          f"{', '.join(studies) or 'none'}; data at {dataset_location}")
    return items
