"""The study pipeline: prepare_data -> make_trials -> ParallelFor(train_trial) ->
detect_goals -> aggregate.

``build_pipeline`` makes the @dsl.pipeline for a given default spec: its parameters
default to that spec, so a run started from the Kubeflow UI as is runs that study, and
its ParallelFor parallelism (a compile-time constant in KFP) is the spec's.
"""


from kfp import dsl

from components.aggregate.component import aggregate
from components.data_prep.component import prepare_data
from components.goal_detection.component import detect_goals
from components.search.component import make_trials
from components.spec import StudySpec
from components.train_trial.component import train_trial
from pipelines.placement import LIGHT, get_preset, place

PIPELINE_NAME = "batchscale-study"


def build_pipeline(spec: StudySpec, store_root: str = "", preset: str = "cpu"):
    """The pipeline function, with ``spec`` (and ``store_root``) as parameter defaults."""
    trainer = get_preset(preset)
    default_spec = spec.to_dict()

    @dsl.pipeline(
        name=PIPELINE_NAME,
        description="Steps to a goal validation error against batch size, with metaparameters "
        "tuned anew at every batch size (Shallue et al. 2019).",
    )
    def study_pipeline(study_spec: dict = default_spec, store_root: str = store_root):
        prep = place(prepare_data(study_spec=study_spec, store_root=store_root), LIGHT)
        trials = place(make_trials(study_spec=study_spec, store_root=store_root,
                                   dataset_location=prep.output), LIGHT)
        with dsl.ParallelFor(trials.output, parallelism=spec.parallelism) as trial:
            trained = train_trial(study_spec=study_spec, trial=trial, store_root=store_root)
            place(trained, trainer).set_display_name("train-trial")
        goals = place(detect_goals(study_spec=study_spec, store_root=store_root,
                                   statuses=dsl.Collected(trained.output)), LIGHT)
        place(aggregate(study_spec=study_spec, store_root=store_root,
                        goal_steps_location=goals.outputs["Output"]), LIGHT)

    return study_pipeline


def compile_pipeline(spec: StudySpec, output: str, store_root: str = "", preset: str = "cpu") -> str:
    from kfp import compiler

    compiler.Compiler().compile(build_pipeline(spec, store_root, preset), output)
    return output
