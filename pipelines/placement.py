"""Where each task runs: each preset's facts (``batchscale.core.presets``) as pod settings.

A preset is everything a trainer pod needs to land on one kind of GKE node: the
accelerator resource and count, the node selectors and tolerations of the node pools in
``manifests/overlays/``, CPU and memory requests that fit that pool's machine type, and
the image built for that accelerator. The light steps (data prep, search, goal
detection, aggregation) always get ``LIGHT``: a small CPU request, no accelerator, no
selectors, so they run on the cluster's default pool and never hold an accelerator node.

The preset is chosen per study at compile time (one compiled pipeline per preset,
``batchscale-study-<preset>``), not by a run parameter: the image, accelerator, selectors
and tolerations must change together, and a preset is that coupled choice.

A preset also bounds how many trials one trainer pod trains together (``max_pack``, see
``pack_size_for``) and how long a pack task's pod may run (``pack_timeout_seconds``: a
day on CPU, where the small workloads run; a week on accelerators, where a pack of
ImageNet trials trains one after another). Only a hung pod should reach it; a pack
stopped by it loses no finished evaluation (checkpoints) and resumes when retried or
resubmitted.

A multi-host preset (``hosts`` > 1) places one pod per host: ``accelerator_count`` is one
host's share, and its big-batch packs are trained by a TrainJob (or JobSet) that the light
task ``train_multihost_pack`` launches with ``multi_host_placement``'s settings
(``batchscale.kube.trainjob_manifest``); its small-batch packs train on ``single_host``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from batchscale.core.errors import InputError
from batchscale.core.images import LIGHT as LIGHT_NAME
from batchscale.core.images import TRAINER_GPU, TRAINER_TPU
from batchscale.core.presets import GPU, TPU, PresetFacts, preset_facts
from batchscale.core.presets import PRESETS as PRESET_FACTS

GPU_RESOURCE = "nvidia.com/gpu"
TPU_RESOURCE = "google.com/tpu"
SPOT_LABEL = "cloud.google.com/gke-spot"
# At most about this many pack tasks (ParallelFor iterations) per study; see pack_size_for.
MAX_PACK_TASKS = 150


@dataclass(frozen=True)
class Toleration:
    key: str
    operator: str = "Exists"  # or "Equal" with a value
    value: str | None = None
    effect: str = "NoSchedule"


@dataclass(frozen=True)
class Preset:
    """What a pod of this preset asks for. ``machine_type`` is the node pool's, for docs
    and for the test that keeps presets and manifests/ in step."""

    cpu: str
    memory: str
    cpu_limit: str | None = None
    memory_limit: str | None = None
    image: str = LIGHT_NAME
    accelerator: str | None = None  # GPU_RESOURCE or TPU_RESOURCE
    accelerator_count: int = 0
    node_selectors: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    machine_type: str | None = None
    description: str = ""
    # At most this many trials trained together in one pack task (see pack_size_for), and
    # the pack pod's activeDeadlineSeconds: a pod still running then (hung, or a long pack)
    # is stopped; its trials' checkpoints survive, and a retry or a resubmission resumes.
    max_pack: int = 64
    pack_timeout_seconds: int = 7 * 24 * 3600
    hosts: int = 1  # pods of one trial; accelerator_count is per pod
    single_host: str | None = None  # the one-pod sibling of a multi-host preset


_SPOT = Toleration(SPOT_LABEL, operator="Equal", value="true")


def _pod(facts: PresetFacts) -> Preset:
    """The pod settings of a preset (``batchscale.core.presets``): its node pool's
    selectors and tolerations (``manifests/overlays/``), its accelerator and its image."""
    common = {"cpu": facts.cpu, "memory": facts.memory, "cpu_limit": facts.cpu_limit,
              "memory_limit": facts.memory_limit, "machine_type": facts.machine_type,
              "description": facts.description, "max_pack": facts.max_pack,
              "pack_timeout_seconds": facts.pack_timeout_seconds, "hosts": facts.hosts,
              "single_host": facts.single_host}
    if facts.kind == GPU:
        return Preset(**common, image=TRAINER_GPU, accelerator=GPU_RESOURCE,
                      accelerator_count=facts.devices_per_host,
                      tolerations=(Toleration(GPU_RESOURCE), _SPOT),
                      node_selectors={"cloud.google.com/gke-accelerator": facts.accelerator,
                                      SPOT_LABEL: "true"})
    if facts.kind == TPU:
        return Preset(**common, image=TRAINER_TPU, accelerator=TPU_RESOURCE,
                      accelerator_count=facts.devices_per_host,
                      tolerations=(Toleration(TPU_RESOURCE), _SPOT),
                      node_selectors={"cloud.google.com/gke-tpu-accelerator": facts.accelerator,
                                      "cloud.google.com/gke-tpu-topology": facts.topology,
                                      SPOT_LABEL: "true"})
    return Preset(**common)  # the cluster's default pool, the light image


PRESETS: dict[str, Preset] = {facts.name: _pod(facts) for facts in PRESET_FACTS}
LIGHT = Preset(cpu="500m", memory="1G", memory_limit="4G")


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise InputError(f"unknown placement preset {name!r}; allowed: {', '.join(PRESETS)}")
    return PRESETS[name]


def pack_size_for(spec, preset_name: str) -> int:
    """Trials per pack task for ``spec`` on preset ``preset_name``.

    ``spec.pack_size`` when the spec sets it (> 0); otherwise the smaller of what one
    accelerator trains together for this model (the workload's ``pack_capacity``:
    MNIST-family fc/simple CNN 64/32, ResNet-8 16, ImageNet, Open Images and the language
    models 1; ``batchscale.workloads.defaults.pack_capacity``) and the preset's cap
    ``max_pack`` (cpu 16, one-chip accelerators 64, multi-chip TPUs 1, whose one trial is
    spread data-parallel over the chips), and never more than the trials of a batch size.
    Where that would make more than ``MAX_PACK_TASKS`` pack tasks (ImageNet's 11 batch
    sizes x 100 trials, one per accelerator: 1,100), the pack grows until the study fits
    in that many: its trials then train a group at a time, one group after another, in
    the same pod (Kubeflow's UI and Argo struggle near a thousand pods, and each pod pays
    its start-up and image pull).
    """
    from batchscale.workloads.defaults import pack_capacity

    if spec.pack_size > 0:
        return spec.pack_size
    trials = spec.trials_per_batch_size
    together = min(pack_capacity(spec.workload.dataset, spec.workload.model),
                   get_preset(preset_name).max_pack, trials)
    size = max(1, together)
    while len(spec.batch_sizes) * math.ceil(trials / size) > MAX_PACK_TASKS and size < trials:
        size += 1  # more trials per pack, trained one group after another
    return size


def place(task, preset: Preset, image: str | None = None, name: str | None = None):
    """Apply a preset to a pipeline task: requests, limits, accelerator, node selectors,
    tolerations and (when given) the container image and the preset's ``name``, which a
    trainer records in its trials' metadata (the price of their device-hours); and the
    protocol plugins this process loads (``BATCHSCALE_PLUGINS``, which the images must be
    able to import). Returns the task."""
    from kfp import kubernetes

    task.set_cpu_request(preset.cpu).set_memory_request(preset.memory)
    if preset.cpu_limit:
        task.set_cpu_limit(preset.cpu_limit)
    if preset.memory_limit:
        task.set_memory_limit(preset.memory_limit)
    if preset.accelerator:
        task.set_accelerator_type(preset.accelerator).set_accelerator_limit(preset.accelerator_count)
    for key, value in preset.node_selectors.items():
        kubernetes.add_node_selector(task, label_key=key, label_value=value)
    for tol in preset.tolerations:
        kubernetes.add_toleration(task, key=tol.key, operator=tol.operator, value=tol.value,
                                  effect=tol.effect)
    for key, value in pod_env(preset, name).items():
        task.set_env_variable(key, value)
    if image:
        task.set_container_image(image)
    return harden(task)


def harden(task):
    """Say what KFP's compiler leaves unsaid of a hardened pod for this task: its container
    runs as non-root (``runAsNonRoot``). Returns the task.

    KFP 2.17's backend compiles the rest itself (docs/gke.md, "Hardened pods"): every
    executor pod gets the RuntimeDefault seccomp profile, and its main container (ours)
    ``allowPrivilegeEscalation: false`` and capabilities ``drop: [ALL]``; but it leaves
    ``runAsNonRoot`` off the main container, since another project's image may run as
    root. Ours run as uid 1000 (``USER 1000`` in images/*/Dockerfile, numeric so the
    kubelet can check it), so we say it; kfp-kubernetes 2.17 can set no more per task
    (``set_security_context``: user, group, non-root). An admin's cluster-wide default
    (KFP's ``DEFAULT_SECURITY_CONTEXT_RUN_AS_NON_ROOT``) wins over it. ``place`` calls
    this for every task; kfp.local ignores it."""
    from kfp import kubernetes

    return kubernetes.set_security_context(task, run_as_non_root=True)


def pod_env(preset: Preset, name: str | None = None) -> dict[str, str]:
    """The environment a trainer pod of ``preset`` gets: its CPU share
    (``BATCHSCALE_CPUS``, the pod's request, not the node's CPU count), the preset's
    ``name`` (``BATCHSCALE_PRESET``: the price of its trials' device-hours) and the protocol
    plugins this process loads (``BATCHSCALE_PLUGINS``, which the images must import)."""
    from batchscale.core import protocols
    from batchscale.core.prices import PRESET_ENV
    from batchscale.workloads.inputs import CPUS_ENV

    env = {CPUS_ENV: preset.cpu}
    if name:
        env[PRESET_ENV] = name
    plugins = protocols.plugin_modules()  # compiled with plugins: every pod loads them too
    if plugins:
        env[protocols.PLUGINS_VARIABLE] = ",".join(plugins)
    return env


def multi_host_placement(name: str) -> dict:
    """The pod settings of every host of a multi-host pack on preset ``name``, as plain
    data: the ``placement`` input of ``train_multihost_pack`` (a constant of the compiled
    pipeline), which ``batchscale.kube.trainjob_manifest`` copies into each pod of the
    TrainJob or JobSet. The same requests, accelerator, selectors, tolerations and
    environment ``place`` gives a one-pod task; the image travels separately. Settings a
    preset leaves unset (limits, the exclusive topology of a GPU job) are left out."""
    preset = get_preset(name)
    if preset.hosts < 2:
        raise InputError(f"preset {name!r} is single-host; multi-host presets: "
                         f"{', '.join(n for n, p in PRESETS.items() if p.hosts > 1)}")
    settings = {"preset": name, "hosts": preset.hosts,
                "cpu": preset.cpu, "memory": preset.memory,
                "cpu_limit": preset.cpu_limit, "memory_limit": preset.memory_limit,
                "accelerator": preset.accelerator, "accelerator_count": preset.accelerator_count,
                "node_selectors": dict(preset.node_selectors),
                "tolerations": [{k: v for k, v in vars(t).items() if v is not None}
                                for t in preset.tolerations],
                "env": pod_env(preset, name),
                "timeout_seconds": preset.pack_timeout_seconds,
                # A multi-host TPU slice is one node pool (its hosts joined by ICI): all pods of
                # one job in one pool, and no other job's pods there.
                "exclusive_topology": ("cloud.google.com/gke-nodepool"
                                       if preset.accelerator == TPU_RESOURCE else None)}
    return {k: v for k, v in settings.items() if v is not None}  # a KFP constant holds no None


def format_presets() -> str:
    """The presets as a table, for ``batchscale presets``: with each one's list price per
    device-hour (``batchscale.core.prices``, dated there)."""
    from batchscale.core.prices import PRICE_DATE, device_price

    rows = [("preset", "accelerator", "machine type", "cpu", "memory", "image",
             f"USD/device-h ({PRICE_DATE})", "description")]
    for name, p in PRESETS.items():
        accel = f"{p.accelerator} x{p.accelerator_count}" if p.accelerator else "-"
        if p.hosts > 1:
            accel += f" x{p.hosts} hosts"
        price = device_price(name, float(p.cpu))[0]
        rows.append((name, accel, p.machine_type or "default pool", p.cpu, p.memory, p.image,
                     f"{price:.3g}", p.description))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows)


def multi_host_preset(name: str) -> PresetFacts | None:
    """The facts of preset ``name`` when it spans several hosts (a TrainJob per pack of
    its big batch sizes), else None; an unknown name is refused (``get_preset``)."""
    get_preset(name)
    facts = preset_facts(name)
    return facts if facts.hosts > 1 else None


def multi_host_presets() -> list[str]:
    return [f.name for f in PRESET_FACTS if f.hosts > 1]


# A Kueue LocalQueue's name (a Kubernetes object name: lowercase RFC 1123) that fits the
# label a TrainJob carries it in (``kueue.x-k8s.io/queue-name``: 63 characters at most).
_QUEUE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?")


def check_queue(queue: str, preset: str) -> None:
    """Refuse, in one line, a ``--queue`` that cannot work: a queue for a preset that
    launches no TrainJob, or a name that is no LocalQueue's (the API server would refuse
    every TrainJob of the run). "" (no queue) passes."""
    if not queue:
        return
    if multi_host_preset(preset) is None:
        raise InputError(f"queue: {queue!r} names the Kueue queue of multi-host TrainJobs; preset "
                         f"{preset} trains every pack in one pod (multi-host presets: "
                         f"{', '.join(multi_host_presets())})")
    if not _QUEUE_NAME.fullmatch(queue):
        raise InputError(f"queue: {queue!r} is not a Kueue LocalQueue name: lowercase letters, "
                         "digits, '-' and '.', starting and ending with a letter or digit, "
                         "63 characters at most")
