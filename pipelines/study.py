"""The study pipeline: prepare_data -> make_trials -> ParallelFor(train_trial) -> aggregate.

``aggregate`` runs once every trial of the loop has finished (it takes their collected
statuses) and reads the store: goal detection is folded into it, so per-trial goal steps
(report/goal_steps.csv), steps to result, regimes and the report come from one read of the
study, and it hands the Kubeflow UI the report (HTML), its summary (Markdown) and Metrics.

``build_pipeline`` makes the @dsl.pipeline for a given default spec and placement
preset: its parameters default to that spec, so a run started from the Kubeflow UI as is
runs that study, and its ParallelFor parallelism (a compile-time constant in KFP) is the
spec's. The preset places the trainer (accelerator, node selectors, tolerations, image);
one compiled pipeline per preset, named ``batchscale-study-<preset>``.
"""

from kfp import dsl

from batchscale.components.aggregate import aggregate
from batchscale.components.make_trials import make_trials
from batchscale.components.prepare_data import prepare_data
from batchscale.components.train_trial import train_trial
from batchscale.core.images import LIGHT as LIGHT_IMAGE_NAME
from batchscale.core.images import image_reference
from batchscale.core.spec import StudySpec
from batchscale.pipelines.placement import LIGHT, get_preset, place


def pipeline_name(preset: str) -> str:
    """The pipeline's name in Kubeflow Pipelines: one pipeline per placement preset."""
    return f"batchscale-study-{preset}"


def build_pipeline(spec: StudySpec, store_root: str = "", preset: str = "cpu",
                   images: dict[str, str] | None = None):
    """The pipeline function, with ``spec`` (and ``store_root``) as parameter defaults.

    ``images`` maps image names to built references (skaffold's output); without it the
    components keep their ``:dev`` placeholders.
    """
    trainer = get_preset(preset)
    light_image = image_reference(LIGHT_IMAGE_NAME, images)
    trainer_image = image_reference(trainer.image, images)
    default_spec = spec.to_dict()

    def light(task):
        return place(task, LIGHT, light_image)

    @dsl.pipeline(
        name=pipeline_name(preset),
        description="Steps to a goal validation error against batch size, with metaparameters "
        f"tuned anew at every batch size (Shallue et al. 2019). Trainer placement: {preset}.",
    )
    def study_pipeline(study_spec: dict = default_spec, store_root: str = store_root):
        prep = light(prepare_data(study_spec=study_spec, store_root=store_root))
        trials = light(make_trials(study_spec=study_spec, store_root=store_root,
                                   dataset_location=prep.output))
        with dsl.ParallelFor(trials.output, parallelism=spec.parallelism) as trial:
            trained = train_trial(study_spec=study_spec, trial=trial, store_root=store_root)
            place(trained, trainer, trainer_image).set_display_name("train-trial")
        light(aggregate(study_spec=study_spec, store_root=store_root,
                        statuses=dsl.Collected(trained.output)))

    return study_pipeline


def compile_pipeline(spec: StudySpec, output: str, store_root: str = "", preset: str = "cpu",
                     images: dict[str, str] | None = None) -> str:
    from kfp import compiler

    compiler.Compiler().compile(build_pipeline(spec, store_root, preset, images), output)
    return output
