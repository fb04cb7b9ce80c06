"""The study pipeline: prepare_data -> rounds -> aggregate, where each of the spec's
``max_rounds`` rounds is plan_round -> ParallelFor(train_pack), one after another.

Packs, not trials, are the loop's items: ``plan_round`` emits small descriptors (pack id,
batch size, trial ids; ``batchscale.search.packs``) and each ``train_pack`` task
re-derives its trials from the study spec and the search rounds in the store, and trains
them together in one pod. The pack size is resolved when the pipeline is built
(``pack_size_for(spec, preset)``) and passed as a constant, so a paper-size study is
~100-200 loop iterations, not one per trial.

Rounds (the paper's protocol, ``batchscale.rounds.planner``): round 1 trains the
search; each later round's ``plan_round`` reads what the earlier ones left in the store
and adds trials where the protocol asks for them (top-up of non-divergent trials,
re-search at an edge of the searched range); a round with nothing to add has an empty
loop. Each round is a nested pipeline (``study-round``) that runs ``.after`` the one
before: a dependency on a pipeline task, not on a loop (a task ``.after`` a ParallelFor
is refused by some KFP backends, kubeflow/pipelines #10050). The number of rounds is a
compile-time constant, the default spec's ``max_rounds``; a run whose spec asks for
fewer leaves the extra rounds empty.

Faults (a spot pod may be preempted at any moment):

- ``aggregate`` takes no output of the loop and runs once everything else is over,
  whatever its outcome: it is the exit task of a ``dsl.ExitHandler`` around the other
  steps, which compiles to a task with trigger policy ALL_UPSTREAM_TASKS_COMPLETED that
  depends on the handler's sub-DAG (kfp.local 2.17 runs it after a failed pack, and the
  KFP backend turns it into an exit hook of that sub-DAG). Not
  ``.after(<loop>).ignore_upstream_failure()``: it compiles and runs in kfp.local too,
  but the KFP 2.17 backend attaches such a task's exit hook only to non-loop tasks
  (``argocompiler/dag.go`` hands the hook to DAG and container tasks; a ParallelFor's
  iterator task drops it), so on a cluster it would never run. ``aggregate`` reads the
  store, the source of truth, so the report covers every trial that finished and names
  the missing ones; submitting the same spec again resumes.
- Retries: ``set_retry`` on a task placed directly in a ParallelFor is dropped by the
  KFP backend (kubeflow/pipelines #12389, #13897), so the pack task sits one level down,
  in a nested pipeline (``train_pack_retried``) used as the loop body, and carries its
  retry policy there. See docs/gke.md for what the compiled YAML holds and what is (not)
  known about the backend honouring it.
- Timeout: the pack task's pod gets ``activeDeadlineSeconds`` = the preset's
  ``pack_timeout_seconds`` (kfp-kubernetes ``set_timeout``); checkpoints survive it.

Caching is off for every task, each for its own reason; a cached step must never hide
unfinished trials or stale results:

- ``prepare_data``: its real output is the data set cache in the store; a cached step
  would skip rebuilding a cache that was deleted. It is a no-op when the cache is there.
- ``plan_round``: round 1 registers the study (study_spec.json, each batch size's
  study.json) in the store, and later rounds record new search rounds there: side
  effects every run needs (the store may be new or wiped); their outputs depend on the
  store, which a cache key does not see.
- ``train_pack``: a cached pack would replay an old status line while its trials are
  INCOMPLETE, checkpointed or gone from the store; re-running a finished pack only
  re-uses its finished trials (seconds).
- ``aggregate``: its inputs (spec, store root) do not change when the store does; a
  cached report would miss every trial finished since.

``build_pipeline`` makes the @dsl.pipeline for a given default spec and placement preset:
its parameters default to that spec, so a run started from the Kubeflow UI as is runs
that study, and its ParallelFor parallelism (a compile-time constant in KFP, pack tasks
at once) is the spec's. The preset places the trainer (accelerator, node selectors,
tolerations, image, timeout); one compiled pipeline per preset, ``batchscale-study-<preset>``.

A user's own model (``workload.model: "module:function"``) is built in the user image
(``images/user/``), so the pack task runs there; the light steps never build the model and
keep the light image. ``prepare_data`` shows in the UI which model and data the run's spec
names (a Markdown artifact, ``core.workload_card``). ``compile_pipeline`` (a cluster's)
refuses first what no pod could reach: a model named by its file, data at a local path
(``cluster_workload.check_for_cluster``).
"""

from kfp import dsl

from batchscale.components.aggregate import aggregate
from batchscale.components.plan_round import plan_round
from batchscale.components.prepare_data import prepare_data
from batchscale.components.select_lanes import select_lanes
from batchscale.components.train_multihost_pack import train_multihost_pack
from batchscale.components.train_pack import train_pack
from batchscale.core.images import LIGHT as LIGHT_IMAGE_NAME
from batchscale.core.images import image_reference
from batchscale.core.presets import DEFAULT as DEFAULT_PRESET
from batchscale.core.presets import MIN_EXAMPLES_PER_CHIP
from batchscale.core.spec import StudySpec
from batchscale.core.workload_card import workload_line
from batchscale.pipelines.cluster_workload import check_for_cluster, model_image
from batchscale.pipelines.placement import (
    LIGHT,
    check_queue,
    get_preset,
    multi_host_placement,
    multi_host_preset,
    pack_size_for,
    place,
)
from batchscale.search.lanes import MULTI_HOST, ONE_POD

# Multi-host lanes a round runs at once: each holds a whole slice (or several GPU nodes)
# while its TrainJob runs, and 2 keeps a 3-round paper-size study under 256 pods beside 16
# one-pod lanes (``pipelines.pipeline_size``). More need quota for more slices at once.
MULTI_HOST_LANES = 2

# A failed pack task (a preempted pod, most often) is tried again this many times, after a
# minute and then doubling (the node pool needs that long to bring up a new spot node).
PACK_RETRIES = 2
PACK_RETRY_BACKOFF = "60s"
PACK_RETRY_MAX_BACKOFF = "600s"


def pipeline_name(preset: str) -> str:
    """The pipeline's name in Kubeflow Pipelines: one pipeline per placement preset."""
    return f"batchscale-study-{preset}"


def build_pipeline(spec: StudySpec, store_root: str = "", preset: str = DEFAULT_PRESET,
                   images: dict[str, str] | None = None, retries: int = PACK_RETRIES,
                   queue: str = ""):
    """The pipeline function, with ``spec`` (and ``store_root``) as parameter defaults.

    ``images`` maps image names to built references (skaffold's output); without it the
    components keep their ``:dev`` placeholders. The pack task runs in the preset's image,
    or in the user image where the model is the user's (``cluster_workload.model_image``).
    ``retries``: attempts after a pack task's first failure (kfp.local honours them too,
    backoff included, so a local run that wants a failure reported at once passes 0).

    A multi-host preset (``hosts`` > 1) makes each round two loops: one-pod lanes on its
    ``single_host`` sibling, and ``MULTI_HOST_LANES`` lanes of the batch sizes that span
    every host (``core.presets.multi_host_for``), each a light task that launches one
    TrainJob per pack (``train_multihost_pack``; ``queue``: the Kueue LocalQueue its jobs
    name, "" for none).
    """
    multi = multi_host_preset(preset)
    one_pod = multi.single_host if multi else preset  # where the one-pod packs train
    trainer = get_preset(one_pod)
    light_image = image_reference(LIGHT_IMAGE_NAME, images)
    trainer_image = model_image(spec, trainer.image, images)
    default_spec = spec.to_dict()
    pack_size = pack_size_for(spec, one_pod)
    lanes = spec.parallelism  # pack tasks per round, all at once (search.lanes)
    check_queue(queue, preset)

    def light(task):
        return place(task, LIGHT, light_image).set_caching_options(False)

    @dsl.pipeline(name="train-pack-retried",
                  description="One lane of packs, with its retry policy (the loop body).")
    def train_pack_retried(study_spec: dict, lane: dict, store_root: str):
        task = train_pack(study_spec=study_spec, lane=lane, store_root=store_root)
        place_pack_task(task, trainer, trainer_image, one_pod, retries)

    def train_multihost_retried(study_spec: dict, lane: dict, store_root: str):
        task = light(train_multihost_pack(
            study_spec=study_spec, lane=lane, store_root=store_root,
            placement=multi_host_placement(preset), image=trainer_image, queue=queue,
            kfp_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER)).set_display_name("train-multihost-pack")
        retry_pack_task(task, retries)

    if multi:  # a @dsl.pipeline builds its body as it is defined: only for a multi-host preset
        train_multihost_retried = dsl.pipeline(
            name="train-multihost-pack-retried",
            description="One lane of multi-host packs, a TrainJob each, with its retry policy.",
        )(train_multihost_retried)

    @dsl.pipeline(name="study-round",
                  description="One search round: plan its packs, then train them in lanes.")
    def study_round(study_spec: dict, store_root: str, dataset_location: str, stage: int):
        planned = light(plan_round(
            study_spec=study_spec, store_root=store_root, dataset_location=dataset_location,
            pack_size=pack_size, stage=stage, lanes=lanes,
            multi_host_preset=preset if multi else "",
            multi_host_lanes=MULTI_HOST_LANES if multi else 0,
            multi_host_pack_size=pack_size_for(spec, preset) if multi else 1))
        planned.set_display_name("plan-round")
        one_pod_lanes = planned.output
        if multi:
            one_pod_lanes = light(select_lanes(lanes=planned.output, kind=ONE_POD)).output
            spanning = light(select_lanes(lanes=planned.output, kind=MULTI_HOST)).output
            with dsl.ParallelFor(spanning, parallelism=MULTI_HOST_LANES) as lane:
                launched = train_multihost_retried(study_spec=study_spec, lane=lane,
                                                   store_root=store_root)
                launched.set_caching_options(False).set_display_name("multi-host lane")
        with dsl.ParallelFor(one_pod_lanes, parallelism=lanes) as lane:
            trained = train_pack_retried(study_spec=study_spec, lane=lane, store_root=store_root)
            trained.set_caching_options(False).set_display_name("lane")

    @dsl.pipeline(
        name=pipeline_name(preset),
        description="Steps to a goal validation error against batch size, with metaparameters "
        f"tuned anew at every batch size (Shallue et al. 2019). Trainer placement: {preset}"
        + (f" (batch sizes from {MIN_EXAMPLES_PER_CHIP * multi.devices} up as TrainJobs over its "
           f"{multi.hosts} hosts, {MULTI_HOST_LANES} at once; smaller ones on {one_pod})"
           if multi else "") + "; "
        f"{pack_size} trial(s) per pack; each round's packs in at most {lanes} pack tasks at once "
        f"(lanes; the compile-time --parallelism); up to {spec.max_rounds} search rounds. "
        f"Default study {spec.name}: {workload_line(spec.workload)}.",
    )
    def study_pipeline(study_spec: dict = default_spec, store_root: str = store_root):
        report = light(aggregate(study_spec=study_spec, store_root=store_root))
        with dsl.ExitHandler(report, name="study"):
            prep = light(prepare_data(study_spec=study_spec, store_root=store_root))
            previous = None
            for stage in range(1, spec.max_rounds + 1):
                this = study_round(study_spec=study_spec, store_root=store_root,
                                   dataset_location=prep.outputs["Output"], stage=stage)
                this.set_caching_options(False).set_display_name(f"round-{stage}")
                if previous is not None:
                    this.after(previous)
                previous = this

    return study_pipeline


def place_pack_task(task, trainer, image: str, preset: str, retries: int):
    """A pack task as every pipeline places it: on the trainer's preset, uncached, retried
    ``retries`` times with backoff, its pod's deadline the preset's pack timeout."""
    from kfp import kubernetes

    place(task, trainer, image, preset).set_display_name("train-pack")
    task.set_caching_options(False)
    retry_pack_task(task, retries)
    kubernetes.set_timeout(task, trainer.pack_timeout_seconds)


def retry_pack_task(task, retries: int):
    """A pack task (one-pod or multi-host launcher) tried ``retries`` more times after a
    failure, after a minute and then doubling; returns the task."""
    if retries:
        task.set_retry(num_retries=retries, backoff_duration=PACK_RETRY_BACKOFF,
                       backoff_max_duration=PACK_RETRY_MAX_BACKOFF)
    return task


def compile_pipeline(spec: StudySpec, output: str, store_root: str = "", preset: str = DEFAULT_PRESET,
                     images: dict[str, str] | None = None, queue: str = "") -> str:
    """Compile the study's pipeline for a cluster to ``output``; refuses first what no pod
    could reach (``cluster_workload.check_for_cluster``)."""
    from kfp import compiler

    from batchscale.pipelines.compiled_defaults import keep_integer_defaults

    check_for_cluster(spec, get_preset(preset).image, images)
    compiler.Compiler().compile(build_pipeline(spec, store_root, preset, images, queue=queue), output)
    keep_integer_defaults(output, spec.to_dict())
    return output
