"""KFP wrapper of train_pack_task for an experiment's pool: one item, one study's pack."""

from kfp import dsl
from kfp.dsl import Markdown, Metrics, Output

from batchscale.core.images import LIGHT_IMAGE


# The image is the placement preset's (a GPU or TPU build), set when the pipeline is built.
@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def train_experiment_pack(experiment_spec: dict, item: dict, store_root: str,
                          metrics: Output[Metrics], summary: Output[Markdown]) -> str:
    """Train (or re-use, or resume) the trials of ``item["pack"]`` of the study
    ``item["study"]``, exactly as that study's own pipeline would (``train_pack``)."""
    from batchscale.training.pack_task import train_pack_task
    from batchscale.validation.experiment_spec import parse_experiment

    experiment = parse_experiment(experiment_spec, store_root)
    shown = train_pack_task(experiment.study(item["study"]), item["pack"])
    for name, value in shown.metrics.items():
        metrics.log_metric(name, value)
    with open(summary.path, "w") as fh:
        fh.write(shown.markdown)
    return f"{item['study']}: {shown.line}"
