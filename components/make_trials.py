"""KFP wrapper of make_trials: registers the study in the store and lists its trials."""

from typing import List

from kfp import dsl

from batchscale.core.images import LIGHT_IMAGE


@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def make_trials(study_spec: dict, store_root: str, dataset_location: str) -> List[dict]:
    """One trial spec (dict) per batch size and trial id, deterministic from the seed."""
    from batchscale.search.trials import make_trials as sample_trials
    from batchscale.store.layout import StudyStore
    from batchscale.validation import resolve_spec

    spec = resolve_spec(study_spec, store_root)
    StudyStore(spec.store).register_study(spec)
    trials = [t.to_dict() for t in sample_trials(spec)]
    print(f"{len(trials)} trials over batch sizes {list(spec.batch_sizes)}; data at {dataset_location}")
    return trials
