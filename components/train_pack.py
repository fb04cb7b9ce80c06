"""KFP wrapper of run_pack: one ParallelFor iteration trains one pack of trials."""

from kfp import dsl
from kfp.dsl import Markdown, Metrics, Output

from batchscale.core.images import LIGHT_IMAGE


# The image is the placement preset's (a GPU or TPU build), set when the pipeline is built.
@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def train_pack(study_spec: dict, pack: dict, store_root: str,
               metrics: Output[Metrics], summary: Output[Markdown]) -> str:
    """Train (or re-use, or resume) the pack's trials (of one batch size, or of several:
    a mixed pack), re-derived from the spec and the search rounds recorded in the store;
    the UI gets the pack's Metrics and a Markdown table of its trials (``pack_summary``),
    the return value one line of statuses. Divergence is a status, not an error."""
    from batchscale.training.pack_task import train_pack_task
    from batchscale.validation import resolve_spec

    shown = train_pack_task(resolve_spec(study_spec, store_root), pack)
    for name, value in shown.metrics.items():
        metrics.log_metric(name, value)
    with open(summary.path, "w") as fh:
        fh.write(shown.markdown)
    return shown.line
