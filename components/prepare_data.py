"""KFP wrapper of prepare_dataset; it also shows in the Kubeflow UI which model and data
the run's study trains (``core.workload_card``)."""

from kfp import dsl
from kfp.dsl import Markdown, Output

from batchscale.core.images import LIGHT_IMAGE


@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def prepare_data(study_spec: dict, store_root: str, workload: Output[Markdown]) -> str:
    """Cache the study's data set splits in the store; returns where they are. The
    ``workload`` artifact names the model function and the data (path, format) of this
    run's spec, as a Markdown card and as the artifact's metadata."""
    from batchscale.core.workload_card import workload_markdown, workload_metadata
    from batchscale.store.layout import StudyStore
    from batchscale.validation import resolve_spec
    from batchscale.workloads.dataset_registry import dataset_for
    from batchscale.workloads.prepare import prepare_dataset

    spec = resolve_spec(study_spec, store_root)
    prepared = prepare_dataset(StudyStore(spec.store), dataset_for(spec.workload))
    with open(workload.path, "w") as fh:
        fh.write(workload_markdown(spec.name, spec.workload, prepared))
    workload.metadata.update(workload_metadata(spec.workload))
    return prepared["location"]
