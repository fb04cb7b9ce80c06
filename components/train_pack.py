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
    from batchscale.core.spec import PackSpec
    from batchscale.search.packs import pack_trials
    from batchscale.store.layout import StudyStore
    from batchscale.training.pack_summary import summarize_pack
    from batchscale.training.packs import run_pack
    from batchscale.training.workload_check import check_model_source, check_user_workload
    from batchscale.validation import resolve_spec

    spec = resolve_spec(study_spec, store_root)
    check_user_workload(spec, files=False)  # the user's model function: importable here, sound
    descriptor, store = PackSpec.from_dict(pack), StudyStore(spec.store)
    check_model_source(spec, store, record=True)  # the code its finished trials were trained by
    rounds = {b: store.read_rounds(spec, b) for b in descriptor.batch_sizes}
    trials = pack_trials(spec, descriptor, rounds)
    shown = summarize_pack(spec, descriptor, trials, run_pack(spec, trials, store), store)
    for name, value in shown.metrics.items():
        metrics.log_metric(name, value)
    with open(summary.path, "w") as fh:
        fh.write(shown.markdown)
    return shown.line
