"""The plan pipeline: ``batchscale plan`` on a cluster, before the sweep.

prepare_data (light) -> plan_study (on the trainer's preset: the step times it measures
must be the trainers' devices'). The plan lands in ``<store>/<study>/plan/plan.json``, the
step times in ``<study>/profile/step_times/`` (the study's report reads both), and
the Kubeflow UI shows its summary (Markdown) and figures (Metrics: B_simple with its
interval, the estimated device-hours, wall time and cost). One compiled pipeline per
preset, ``batchscale-plan-<preset>``; ``batchscale plan SPEC --compile FILE --preset P``
writes it.
"""

from kfp import dsl

from batchscale.components.plan_study import plan_study
from batchscale.components.prepare_data import prepare_data
from batchscale.core.images import LIGHT as LIGHT_IMAGE_NAME
from batchscale.core.images import image_reference
from batchscale.core.presets import DEFAULT as DEFAULT_PRESET
from batchscale.core.spec import StudySpec
from batchscale.core.workload_card import workload_line
from batchscale.pipelines.cluster_workload import check_for_cluster, model_image
from batchscale.pipelines.placement import LIGHT, get_preset, multi_host_preset, place

PLAN_TIMEOUT_SECONDS = 2 * 3600


def plan_pipeline_name(preset: str) -> str:
    return f"batchscale-plan-{preset}"


def build_plan_pipeline(spec: StudySpec, store_root: str = "", preset: str = DEFAULT_PRESET,
                        images: dict[str, str] | None = None):
    """The plan pipeline function, with ``spec`` (and ``store_root``) as parameter defaults.
    Its probe builds the model: the user image where the model is the user's. The probe is
    one pod: on a multi-host preset it runs on the preset's ``single_host`` sibling, as the
    study's one-pod packs do (a lone pod cannot start a multi-host slice's runtime)."""
    from kfp import kubernetes

    multi = multi_host_preset(preset)
    probe_on = multi.single_host if multi else preset  # one pod: a multi-host preset's sibling
    trainer = get_preset(probe_on)
    light_image = image_reference(LIGHT_IMAGE_NAME, images)
    trainer_image = model_image(spec, trainer.image, images)

    default_spec = spec.to_dict()

    @dsl.pipeline(name=plan_pipeline_name(preset),
                  description="Before a sweep: gradient noise scale, step times, proposed batch "
                  f"sizes and the study's estimated cost. Trainer placement: {probe_on}. "
                  f"Default study {spec.name}: {workload_line(spec.workload)}.")
    def plan_pipeline(study_spec: dict = default_spec, store_root: str = store_root):
        prep = prepare_data(study_spec=study_spec, store_root=store_root)
        place(prep, LIGHT, light_image).set_caching_options(False)
        task = plan_study(study_spec=study_spec, store_root=store_root).after(prep)
        place(task, trainer, trainer_image, probe_on).set_caching_options(False)
        task.set_display_name("plan")
        kubernetes.set_timeout(task, PLAN_TIMEOUT_SECONDS)

    return plan_pipeline


def compile_plan_pipeline(spec: StudySpec, output: str, store_root: str = "", preset: str = DEFAULT_PRESET,
                          images: dict[str, str] | None = None) -> str:
    from kfp import compiler

    from batchscale.pipelines.compiled_defaults import keep_integer_defaults

    check_for_cluster(spec, get_preset(preset).image, images)
    compiler.Compiler().compile(build_plan_pipeline(spec, store_root, preset, images), output)
    keep_integer_defaults(output, spec.to_dict())
    return output
