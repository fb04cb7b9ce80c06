"""KFP wrapper of run_trial: one ParallelFor iteration trains one trial."""

from kfp import dsl

from components.images import LIGHT_IMAGE


# The image is the placement preset's (a GPU or TPU build), set when the pipeline is built.
@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def train_trial(study_spec: dict, trial: dict, store_root: str) -> str:
    """Train (or re-use) one trial; returns its status. Divergence is a status, not an error."""
    from components.spec import TrialSpec, resolve_spec
    from components.store import StudyStore
    from components.train_trial.trainer import run_trial

    spec = resolve_spec(study_spec, store_root)
    return run_trial(spec, TrialSpec.from_dict(trial), StudyStore(spec.store))["status"]
