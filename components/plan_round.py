"""KFP wrapper of make_packs: registers the study in the store and lists its packs."""

from typing import List

from kfp import dsl

from batchscale.core.images import LIGHT_IMAGE


@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def make_packs(study_spec: dict, store_root: str, dataset_location: str, pack_size: int) -> List[dict]:
    """One pack descriptor (dict: pack_id, batch_size, trial_ids) per at most ``pack_size``
    trials of one batch size; the trials' metaparameters stay out of the loop items."""
    from batchscale.search.packs import make_packs as plan_packs
    from batchscale.store.layout import StudyStore
    from batchscale.validation import resolve_spec

    spec = resolve_spec(study_spec, store_root)
    StudyStore(spec.store).register_study(spec)
    packs = [p.to_dict() for p in plan_packs(spec, pack_size)]
    print(f"{len(packs)} packs of at most {pack_size} trials over batch sizes "
          f"{list(spec.batch_sizes)}; data at {dataset_location}")
    return packs
