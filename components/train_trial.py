"""KFP wrapper of run_trial: one ParallelFor iteration trains one trial."""

from kfp import dsl

from batchscale.core.images import LIGHT_IMAGE


# The image is the placement preset's (a GPU or TPU build), set when the pipeline is built.
@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def train_trial(study_spec: dict, trial: dict, store_root: str) -> str:
    """Train (or re-use) one trial; returns its status. Divergence is a status, not an error."""
    from batchscale.core.spec import TrialSpec
    from batchscale.store.layout import StudyStore
    from batchscale.training.trainer import run_trial
    from batchscale.validation import resolve_spec

    spec = resolve_spec(study_spec, store_root)
    return run_trial(spec, TrialSpec.from_dict(trial), StudyStore(spec.store))["status"]
