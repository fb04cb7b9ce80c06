"""KFP wrapper of plan_experiment_stage: one stage of every study's search rounds, as one
list of packs (each tagged with its study) for one ParallelFor."""

from typing import List

from kfp import dsl

from batchscale.core.images import LIGHT_IMAGE


@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def plan_experiment_round(experiment_spec: dict, store_root: str, dataset_location: str,
                          pack_sizes: dict, stage: int) -> List[dict]:
    """Items ``{study, pack}`` of stage ``stage`` over the experiment's studies, the longest
    expected pack first (``rounds.experiment_stage``). Stage 1 registers each study."""
    from batchscale.rounds.experiment_stage import plan_experiment_stage
    from batchscale.validation.experiment_spec import parse_experiment

    experiment = parse_experiment(experiment_spec, store_root)
    planned = plan_experiment_stage(experiment, stage, pack_sizes)
    studies = sorted({label for label, _ in planned})
    print(f"stage {stage}: {len(planned)} packs ({sum(p.size for _, p in planned)} trials) of "
          f"studies {', '.join(studies) or 'none'}; data at {dataset_location}")
    return [{"study": label, "pack": pack.to_dict()} for label, pack in planned]
