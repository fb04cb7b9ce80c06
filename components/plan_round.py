"""KFP wrapper of plan_stage: one stage of the study's search rounds, as a list of packs."""

from typing import List

from kfp import dsl

from batchscale.core.images import LIGHT_IMAGE


@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def plan_round(study_spec: dict, store_root: str, dataset_location: str, pack_size: int,
               stage: int) -> List[dict]:
    """The packs (dicts: pack_id, batch_size, trial_ids, and a mixed pack's ``more``:
    its other batch sizes' trial ids) of stage ``stage``: the trials still unfinished,
    and the round this stage adds where the store's results ask for one (top-up,
    re-search). Stage 1 registers the study. Empty when there is nothing to do."""
    from batchscale.rounds.planner import plan_stage
    from batchscale.store.layout import StudyStore
    from batchscale.validation import resolve_spec

    spec = resolve_spec(study_spec, store_root)
    planned = plan_stage(spec, StudyStore(spec.store), stage, pack_size)
    mixed = sum(p.mixed for p in planned)
    print(f"stage {stage}: {len(planned)} packs of at most {pack_size} trials "
          f"({sum(p.size for p in planned)} trials{f', {mixed} mixed' if mixed else ''}); "
          f"data at {dataset_location}")
    return [p.to_dict() for p in planned]
