"""KFP wrapper of prepare_dataset for an experiment: each data set its studies name is
prepared once, in the experiment's folder (the store root its studies share)."""

from kfp import dsl
from kfp.dsl import Markdown, Output

from batchscale.core.images import LIGHT_IMAGE


@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def prepare_experiment_data(experiment_spec: dict, store_root: str, workload: Output[Markdown]) -> str:
    """Cache the splits of every data set the experiment's studies train on (once each:
    a data-size or class axis takes its subsets when a trial opens the data), record the
    experiment in the store, and show each study's model and data in the Kubeflow UI.
    Returns the experiment's folder."""
    from batchscale.core.workload_card import workload_markdown
    from batchscale.store.experiment_record import refuse_study_folder, write_experiment_record
    from batchscale.store.layout import StudyStore
    from batchscale.validation.experiment_spec import parse_experiment
    from batchscale.workloads.dataset_registry import dataset_for
    from batchscale.workloads.prepare import prepare_dataset

    experiment = parse_experiment(experiment_spec, store_root)
    refuse_study_folder(experiment.store, experiment.name)  # a cluster run: nothing written yet
    write_experiment_record(experiment.store, experiment.name, experiment.to_dict())
    prepared, cards = {}, []
    for study in experiment.studies:
        info = dataset_for(study.spec.workload)
        if info.name not in prepared:
            prepared[info.name] = prepare_dataset(StudyStore(study.spec.store), info)
        cards.append(workload_markdown(study.label, study.spec.workload, prepared[info.name]))
    with open(workload.path, "w") as fh:
        fh.write("\n\n".join(cards))
    return experiment.folder
