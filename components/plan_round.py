"""KFP wrapper of plan_lanes: one stage of the study's search rounds, as lanes of packs."""

from typing import List

from kfp import dsl

from batchscale.core.images import LIGHT_IMAGE


@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def plan_round(study_spec: dict, store_root: str, dataset_location: str, pack_size: int,
               stage: int, lanes: int, multi_host_preset: str = "",
               multi_host_lanes: int = 0, multi_host_pack_size: int = 1) -> List[dict]:
    """The packs of stage ``stage`` (the trials still unfinished, and the round this stage
    adds where the store's results ask for one), dealt to at most ``lanes`` one-pod lanes
    and, on a multi-host preset, ``multi_host_lanes`` lanes of packs whose batch size spans
    several hosts (``rounds.stage_lanes``), re-split into packs of ``multi_host_pack_size``:
    items ``{lane, kind, packs}``. Stage 1
    registers the study. Empty when there is nothing to do."""
    from batchscale.rounds.stage_lanes import multi_host_rule, plan_lanes
    from batchscale.store.layout import StudyStore
    from batchscale.validation import resolve_spec

    spec = resolve_spec(study_spec, store_root)
    planned = plan_lanes(spec, StudyStore(spec.store), stage, pack_size, lanes,
                         multi_host_rule(multi_host_preset), max(1, multi_host_lanes),
                         multi_host_pack_size)
    print(f"stage {stage}: {planned.line()}; data at {dataset_location}")
    return planned.items
