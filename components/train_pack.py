"""KFP wrapper of train_lane_task: one ParallelFor iteration trains one lane of packs."""

from kfp import dsl
from kfp.dsl import Markdown, Metrics, Output

from batchscale.core.images import LIGHT_IMAGE


# The image is the placement preset's (a GPU or TPU build), set when the pipeline is built.
@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def train_pack(study_spec: dict, lane: dict, store_root: str,
               metrics: Output[Metrics], summary: Output[Markdown]) -> str:
    """Train (or re-use, or resume) the trials of the lane's packs (``search.lanes``: this
    task's share of the round), one pack after another, each re-derived from the spec and
    the search rounds recorded in the store; the UI gets the lane's Metrics and a Markdown
    table of its trials (``pack_summary``), the return value one line of statuses.
    Divergence is a status, not an error; a failed pack fails the task after the rest."""
    from batchscale.training.pack_task import train_lane_task
    from batchscale.validation import resolve_spec

    shown = train_lane_task(resolve_spec(study_spec, store_root), lane)
    for name, value in shown.metrics.items():
        metrics.log_metric(name, value)
    with open(summary.path, "w") as fh:
        fh.write(shown.markdown)
    return shown.line
