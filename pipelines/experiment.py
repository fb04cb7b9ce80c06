"""The experiment pipeline: every study of an experiment in one run, then the comparison.

```
prepare_experiment_data ─► round 1 ─► ... ─► round R ─► compare_experiment
round r: plan_experiment_round ─► ParallelFor(train_experiment_pack)   (every study's packs)
```

One Kubeflow run is one experiment. It is a study pipeline (``pipelines.study``, whose
docstring explains each choice below) widened to several studies:

- ``prepare_experiment_data`` prepares each data set the studies name once, in the
  experiment's folder (the store root its studies share), and records the experiment
  there (``experiment.json``).
- Each round's ``plan_experiment_round`` plans every study's stage exactly as the study
  alone would (``rounds.experiment_stage``) and deals all their packs, the longest first,
  to at most ``parallelism`` lanes (``search.lanes``), so the experiment's pack tasks
  share one pool. Each pack in a lane names its study; ``train_experiment_pack``
  re-derives that study's spec from the experiment spec and trains the lane's packs one
  after another, each as the study's own pipeline would.
- ``compare_experiment`` is the ExitHandler's exit task, as a study's ``aggregate``: it
  runs once the rounds are over, whatever their outcome, writes each study's report and
  then the comparison, and shows the comparison's page, findings and metrics in the UI.

Retries, timeouts and caching (off everywhere) are the study pipeline's. Each pack's
size is its study's (``pack_size_for``: the model decides), passed to the planner as a
compile-time map. The number of rounds is the most any study may run.
"""

from kfp import dsl

from batchscale.components.compare_experiment import compare_experiment
from batchscale.components.plan_experiment_round import plan_experiment_round
from batchscale.components.prepare_experiment_data import prepare_experiment_data
from batchscale.components.train_experiment_pack import train_experiment_pack
from batchscale.core.errors import InputError
from batchscale.core.experiment import ExperimentSpec
from batchscale.core.images import LIGHT as LIGHT_IMAGE_NAME
from batchscale.core.images import image_reference
from batchscale.core.presets import DEFAULT as DEFAULT_PRESET
from batchscale.pipelines.cluster_workload import check_for_cluster, model_image, uses_user_model
from batchscale.pipelines.placement import LIGHT, get_preset, multi_host_preset, pack_size_for, place
from batchscale.pipelines.study import PACK_RETRIES, place_pack_task

PARAMETER = "experiment_spec"


def experiment_pipeline_name(preset: str) -> str:
    """The pipeline's name in Kubeflow Pipelines: one experiment pipeline per preset."""
    return f"batchscale-experiment-{preset}"


def build_experiment_pipeline(experiment: ExperimentSpec, store_root: str = "",
                              preset: str = DEFAULT_PRESET, images: dict[str, str] | None = None,
                              retries: int = PACK_RETRIES):
    """The pipeline function, with ``experiment`` (and ``store_root``) as parameter
    defaults; arguments as ``pipelines.study.build_pipeline``'s."""
    trainer = get_preset(preset)
    light_image = image_reference(LIGHT_IMAGE_NAME, images)
    # The pack tasks of every study run in one image: the user image where any study
    # trains the user's own model (it holds the trainer too), else the preset's.
    users = [s for s in experiment.specs if uses_user_model(s)]
    trainer_image = model_image((users or list(experiment.specs))[0], trainer.image, images)
    pack_sizes = {s.label: pack_size_for(s.spec, preset) for s in experiment.studies}
    rounds = experiment.max_rounds
    default = experiment.to_dict()

    def light(task):
        return place(task, LIGHT, light_image).set_caching_options(False)

    @dsl.pipeline(name="train-experiment-pack-retried",
                  description="One pack task of one study, with its retry policy (the loop body).")
    def train_pack_retried(experiment_spec: dict, lane: dict, store_root: str):
        task = train_experiment_pack(experiment_spec=experiment_spec, lane=lane, store_root=store_root)
        place_pack_task(task, trainer, trainer_image, preset, retries)

    @dsl.pipeline(name="experiment-round",
                  description="One search round of every study: plan their packs, train them in one pool.")
    def experiment_round(experiment_spec: dict, store_root: str, dataset_location: str, stage: int):
        packs = light(plan_experiment_round(experiment_spec=experiment_spec, store_root=store_root,
                                            dataset_location=dataset_location,
                                            pack_sizes=pack_sizes, stage=stage,
                                            lanes=experiment.parallelism))
        packs.set_display_name("plan-round")
        with dsl.ParallelFor(packs.output, parallelism=experiment.parallelism) as lane:
            trained = train_pack_retried(experiment_spec=experiment_spec, lane=lane,
                                         store_root=store_root)
            trained.set_caching_options(False).set_display_name("lane")

    studies = ", ".join(s.label for s in experiment.studies)
    @dsl.pipeline(
        name=experiment_pipeline_name(preset),
        description="Several batch-size scaling studies that differ in one thing, run together and "
        f"compared, with the findings stated (Shallue et al. 2019, §4). Trainer placement: {preset}. "
        f"Default experiment {experiment.name}: {experiment.axis.label} over studies {studies}.",
    )
    def experiment_pipeline(experiment_spec: dict = default, store_root: str = store_root):
        comparison = light(compare_experiment(experiment_spec=experiment_spec, store_root=store_root))
        comparison.set_display_name("compare")
        with dsl.ExitHandler(comparison, name="experiment"):
            prep = light(prepare_experiment_data(experiment_spec=experiment_spec, store_root=store_root))
            prep.set_display_name("prepare-data")
            previous = None
            for stage in range(1, rounds + 1):
                this = experiment_round(experiment_spec=experiment_spec, store_root=store_root,
                                        dataset_location=prep.outputs["Output"], stage=stage)
                this.set_caching_options(False).set_display_name(f"round-{stage}")
                if previous is not None:
                    this.after(previous)
                previous = this

    return experiment_pipeline


def compile_experiment_pipeline(experiment: ExperimentSpec, output: str, store_root: str = "",
                                preset: str = DEFAULT_PRESET,
                                images: dict[str, str] | None = None, queue: str = "") -> str:
    """Compile the experiment's pipeline for a cluster to ``output``; refuses first what no
    pod could reach, study by study (``cluster_workload.check_for_cluster``)."""
    from kfp import compiler

    from batchscale.pipelines.compiled_defaults import keep_integer_defaults

    if multi_host_preset(preset) or queue:
        raise InputError(f"preset: an experiment runs on one-host presets ({preset} spans several "
                         "hosts, or a --queue was given); compile each of its studies for a "
                         "multi-host preset instead (`batchscale compile STUDY --preset P`)")
    for spec in experiment.specs:
        check_for_cluster(spec, get_preset(preset).image, images)
    compiler.Compiler().compile(build_experiment_pipeline(experiment, store_root, preset, images), output)
    keep_integer_defaults(output, experiment.to_dict(), PARAMETER)
    return output
