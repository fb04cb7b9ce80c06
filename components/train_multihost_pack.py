"""KFP wrapper of run_multihost_pack: a ParallelFor iteration whose pack spans several hosts.

The task itself is light (the light image, the default pool, no accelerator): it creates
the pack's TrainJob (or JobSet), streams process 0's log into this task's log, and ends
with the job. ``placement`` is ``batchscale.pipelines.placement.multi_host_placement(preset)``
and ``image`` the trainer image's reference, both fixed when the pipeline is compiled;
``kfp_run`` labels the job with the run (``dsl.PIPELINE_JOB_ID_PLACEHOLDER``).
"""

from kfp import dsl

from batchscale.core.images import LIGHT_IMAGE


@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def train_multihost_pack(study_spec: dict, pack: dict, store_root: str, placement: dict,
                         image: str, queue: str = "", kfp_run: str = "") -> str:
    """Train the pack's trials on every host of a multi-host preset through a TrainJob
    (``batchscale.kube.trainjob_launch``): re-attaches to the job a retried task started,
    fails with the job, deletes it when the run is cancelled (SIGTERM)."""
    from batchscale.kube.trainjob_launch import run_multihost_pack
    from batchscale.validation import resolve_spec

    spec = resolve_spec(study_spec, store_root).to_dict()
    return run_multihost_pack(spec, pack, placement, image, queue=queue, kfp_run=kfp_run)
