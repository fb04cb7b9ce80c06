"""KFP wrapper of prepare_dataset."""

from kfp import dsl

from components.images import LIGHT_IMAGE


@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def prepare_data(study_spec: dict, store_root: str) -> str:
    """Cache the study's data set splits in the store; returns where they are."""
    from components.data_prep.prepare import prepare_dataset
    from components.spec import resolve_spec
    from components.store import StudyStore

    spec = resolve_spec(study_spec, store_root)
    return prepare_dataset(StudyStore(spec.store), spec.workload.dataset)["location"]
