"""KFP wrapper of prepare_dataset."""

from kfp import dsl

from batchscale.core.images import LIGHT_IMAGE


@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def prepare_data(study_spec: dict, store_root: str) -> str:
    """Cache the study's data set splits in the store; returns where they are."""
    from batchscale.store.layout import StudyStore
    from batchscale.validation import resolve_spec
    from batchscale.workloads.dataset_registry import dataset_for
    from batchscale.workloads.prepare import prepare_dataset

    spec = resolve_spec(study_spec, store_root)
    return prepare_dataset(StudyStore(spec.store), dataset_for(spec.workload))["location"]
