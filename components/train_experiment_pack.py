"""KFP wrapper of train_experiment_lane: one ParallelFor iteration of an experiment's pool
trains one lane of packs, each of one study."""

from kfp import dsl
from kfp.dsl import Markdown, Metrics, Output

from batchscale.core.images import LIGHT_IMAGE


# The image is the placement preset's (a GPU or TPU build), set when the pipeline is built.
@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def train_experiment_pack(experiment_spec: dict, lane: dict, store_root: str,
                          metrics: Output[Metrics], summary: Output[Markdown]) -> str:
    """Train (or re-use, or resume) the lane's packs (``{study, pack}`` each), every one
    exactly as its study's own pipeline would (``train_pack``)."""
    from batchscale.training.pack_task import train_experiment_lane
    from batchscale.validation.experiment_spec import parse_experiment

    shown = train_experiment_lane(parse_experiment(experiment_spec, store_root), lane)
    for name, value in shown.metrics.items():
        metrics.log_metric(name, value)
    with open(summary.path, "w") as fh:
        fh.write(shown.markdown)
    return shown.line
