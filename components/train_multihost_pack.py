"""KFP wrapper of run_multihost_lane: a ParallelFor iteration whose packs span several hosts.

The task itself is light (the light image, the default pool, no accelerator): for each
pack of its lane (``batchscale.search.lanes``, kind ``multi_host``) it creates the pack's
TrainJob (or JobSet), streams process 0's log into this task's log, and goes on when the
job ends. ``placement`` is ``batchscale.pipelines.placement.multi_host_placement(preset)``
and ``image`` the trainer image's reference, both fixed when the pipeline is compiled;
``kfp_run`` labels the jobs with the run (``dsl.PIPELINE_JOB_ID_PLACEHOLDER``).
"""

from kfp import dsl

from batchscale.core.images import LIGHT_IMAGE


@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def train_multihost_pack(study_spec: dict, lane: dict, store_root: str, placement: dict,
                         image: str, queue: str = "", kfp_run: str = "") -> str:
    """Train the lane's packs on every host of a multi-host preset, one TrainJob each
    (``batchscale.kube.trainjob_launch``): re-attaches to a job a retried task started,
    fails after the lane when a job failed, deletes its job when the run is cancelled."""
    from batchscale.kube.trainjob_launch import run_multihost_lane
    from batchscale.validation import resolve_spec

    spec = resolve_spec(study_spec, store_root).to_dict()
    return run_multihost_lane(spec, lane, placement, image, queue=queue, kfp_run=kfp_run)
