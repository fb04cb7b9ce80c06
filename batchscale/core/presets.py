"""The placement presets: every fact about each one, in one table.

A preset is one kind of node a trainer pod lands on: the machine type of its GKE node
pool, the accelerator and how many of it a pod holds, the CPU and memory a pod asks for
(leaving room under the machine type's allocatable for GKE's daemons), how many trials a
pod trains together at most (``max_pack``), how long a pack pod may run, and the dated
list price per device-hour (``batchscale.core.prices``). Its name is the one the CLI's
``--preset`` takes, the compiled pipeline's suffix (``batchscale-study-<preset>``), and
what a trainer records in its trials' metadata.

A *multi-host* preset (``hosts`` > 1: a multi-host TPU slice, several GPU nodes) spreads one
trial over the devices of several pods, one pod per host, launched together as a Kubeflow
Trainer TrainJob (or a JobSet); ``devices`` counts the chips of all hosts. Only batch sizes
that give every chip at least ``MIN_EXAMPLES_PER_CHIP`` examples go there
(``multi_host_for``); the smaller ones train on the preset's ``single_host`` sibling, one
pod of the same machine type.

Plain data, no Kubernetes: ``batchscale.pipelines.placement`` turns a record into the
pod's requests, node selectors, tolerations and image; the analysis prices a trial's
device-hours by its preset's name. Leaf layer: imports nothing of the project.
"""

from __future__ import annotations

from dataclasses import dataclass

CPU, GPU, TPU = "cpu", "gpu", "tpu"  # what a preset's devices are


@dataclass(frozen=True)
class PresetFacts:
    """One preset. ``device_hour``: USD per device-hour (a GPU, a TPU chip), None where a
    device is priced per core (CPU). ``topology``: a TPU slice's (``2x2``). ``accelerator``:
    GKE's node label for the device (``cloud.google.com/gke-accelerator`` of a GPU node,
    ``gke-tpu-accelerator`` of a TPU node). ``hosts``: pods (one per host) a trial spans,
    ``devices`` being the chips of all of them; ``single_host``: the one-pod preset that
    trains the small-batch packs of a multi-host study (``multi_host_for``); ``cpu`` and
    ``memory`` are per pod, i.e. per host."""

    name: str
    kind: str
    devices: int
    cpu: str
    memory: str
    description: str
    machine_type: str | None = None
    device_hour: float | None = None
    cpu_limit: str | None = None
    memory_limit: str | None = None
    topology: str | None = None
    # At most this many trials trained together in one pack task, and the pack pod's
    # activeDeadlineSeconds (a week on accelerators, a day on CPU).
    max_pack: int = 64
    pack_timeout_seconds: int = 7 * 24 * 3600
    accelerator: str | None = None
    hosts: int = 1
    single_host: str | None = None

    def __post_init__(self):
        if self.hosts < 1 or self.devices % self.hosts:
            raise ValueError(f"preset {self.name}: {self.devices} devices do not split over "
                             f"{self.hosts} hosts")
        if (self.hosts > 1) != (self.single_host is not None):
            raise ValueError(f"preset {self.name}: a multi-host preset (and only one) names "
                             "its single_host sibling")

    @property
    def devices_per_host(self) -> int:
        return self.devices // self.hosts


# A batch size goes to a multi-host preset only when each of its chips gets at least this
# many examples of every step. A multi-host step pays fixed costs a one-host step does not:
# the gradient all-reduce leaves the host (between the TPU hosts of the slice; between GPU
# nodes over their network, far slower than NVLink inside one) and every host waits for the
# slowest. The fewer examples a chip computes, the larger that share of the step and the
# less the extra hosts buy; below 64 a chip's share of the paper's image models is a few
# milliseconds of work on these chips, and the same batch size trains as fast or faster on
# the one-host sibling. A chosen rule, not measured here (no multi-host hardware): on 16
# chips it sends batch sizes from 1,024 up to the slice and keeps every smaller one on one
# host, so the paper's ImageNet grid (up to 65,536) splits between the two.
MIN_EXAMPLES_PER_CHIP = 64


def multi_host_for(preset: PresetFacts, batch_size: int) -> bool:
    """Whether the packs of ``batch_size`` go to a multi-host TrainJob on ``preset``: a
    multi-host preset, at least ``MIN_EXAMPLES_PER_CHIP`` examples per chip, and a batch
    that splits evenly over all chips (data-parallel: every chip the same share). Every
    other batch size trains on ``preset.single_host``, one pod."""
    return (preset.hosts > 1 and batch_size >= MIN_EXAMPLES_PER_CHIP * preset.devices
            and batch_size % preset.devices == 0)


def _gpu(name: str, machine: str, cpu: str, memory: str, what: str, price: float,
         per_host: int = 1, hosts: int = 1, accelerator: str | None = None,
         single_host: str | None = None) -> PresetFacts:
    # Several GPUs: one trial per pod (or per TrainJob), spread data-parallel over them.
    return PresetFacts(name, GPU, per_host * hosts, cpu, memory, what, machine, price,
                       max_pack=64 if per_host * hosts == 1 else 1,
                       accelerator=accelerator or name, hosts=hosts, single_host=single_host)


_TPU_LABEL = {"v5e": "tpu-v5-lite-podslice", "v6e": "tpu-v6e-slice"}  # gke-tpu-accelerator


def _tpu(generation: str, topology: str, machine: str, cpu: str, memory: str, price: float,
         hosts: int = 1, single_host: str | None = None) -> PresetFacts:
    # Several chips: one trial per pod (or per TrainJob), spread data-parallel over the
    # chips (a small model belongs on tpu-v5e-1x1, where a pack of its trials shares the
    # one chip).
    rows, cols = map(int, topology.split("x"))
    chips = rows * cols
    where = "one host" if hosts == 1 else f"{hosts} hosts of {chips // hosts} chips, a multi-host slice"
    return PresetFacts(f"tpu-{generation}-{topology}", TPU, chips, cpu, memory,
                       f"TPU {generation} {topology}: {chips} chip(s), {where}", machine,
                       price, topology=topology, max_pack=64 if chips == 1 else 1,
                       accelerator=_TPU_LABEL[generation], hosts=hosts, single_host=single_host)


# A CPU pod's few cores step a vmapped pack about as fast as its trials one by one: a pack
# there mostly saves start-up (imports, data, compilation), which 16 trials amortise well,
# and a modest pack keeps the memory of a 4-8 GB pod in bounds.
CPU_POOL = PresetFacts("cpu", CPU, 1, "2", "4G", "the cluster's default CPU pool, no accelerator",
                       cpu_limit="4", memory_limit="8G", max_pack=16, pack_timeout_seconds=24 * 3600)
L4 = _gpu("nvidia-l4", "g2-standard-8", "6", "24Gi", "1 NVIDIA L4 (24 GB), spot", 0.85)
A100 = _gpu("nvidia-a100-80gb", "a2-ultragpu-1g", "10", "140Gi", "1 NVIDIA A100 80 GB, spot", 5.07)
H100 = _gpu("nvidia-h100-80gb", "a3-highgpu-1g", "24", "200Gi", "1 NVIDIA H100 80 GB, spot", 11.06)
# One a3-highgpu-8g node (8 H100s, 208 vCPUs, 1,872 GB), and two of them for one trial
# (list price per GPU, the same as a3-highgpu-1g's): the 2-node preset's small batch sizes
# train on one node.
H100_1X8 = _gpu("nvidia-h100-80gb-1x8", "a3-highgpu-8g", "180", "1400Gi",
                "8 NVIDIA H100 80 GB on one node, spot", 11.06, per_host=8,
                accelerator=H100.name)
H100_2X8 = _gpu("nvidia-h100-80gb-2x8", "a3-highgpu-8g", "180", "1400Gi",
                "16 NVIDIA H100 80 GB on 2 nodes of 8, spot", 11.06, per_host=8, hosts=2,
                accelerator=H100.name, single_host=H100_1X8.name)
V5E_1X1 = _tpu("v5e", "1x1", "ct5lp-hightpu-1t", "20", "40Gi", 1.20)  # per v5e chip
V5E_2X2 = _tpu("v5e", "2x2", "ct5lp-hightpu-4t", "100", "170Gi", 1.20)
V5E_2X4 = _tpu("v5e", "2x4", "ct5lp-hightpu-8t", "200", "340Gi", 1.20)
# 16 chips on 4 ct5lp-hightpu-4t hosts (GKE's multi-host v5e slices use the 4-chip VM):
# each pod asks for what one host of tpu-v5e-2x2 asks for.
V5E_4X4 = _tpu("v5e", "4x4", "ct5lp-hightpu-4t", "100", "170Gi", 1.20, hosts=4,
               single_host=V5E_2X2.name)
# TPU v6e (Trillium) on ct6e-standard-4t: 4 chips a VM; 2x2 is one VM, 4x4 four of them
# (Cloud TPU's v6e page: 4x4 = 16 chips, 4 VMs of ct6e-standard-4t, multi-host). 2.70 USD
# per chip-hour is v6e's on-demand list price as recorded for this table, not re-read from
# the pricing page when it was added (v6e is sold in fewer regions than v5e: check yours);
# the pod's 150 CPU / 560 Gi leave room under the VM's 180 vCPUs and 720 GB.
V6E_2X2 = _tpu("v6e", "2x2", "ct6e-standard-4t", "150", "560Gi", 2.70)  # per v6e chip
V6E_4X4 = _tpu("v6e", "4x4", "ct6e-standard-4t", "150", "560Gi", 2.70, hosts=4,
               single_host=V6E_2X2.name)

PRESETS: tuple[PresetFacts, ...] = (CPU_POOL, L4, A100, H100, H100_1X8, H100_2X8, V5E_1X1,
                                    V5E_2X2, V5E_2X4, V5E_4X4, V6E_2X2, V6E_4X4)
DEFAULT = CPU_POOL.name  # what a pipeline is compiled for unless --preset says otherwise


def preset_facts(name: str) -> PresetFacts:
    """The preset named ``name`` (a KeyError for an unknown one: callers refuse names
    before they get here, ``pipelines.placement.get_preset``)."""
    return {facts.name: facts for facts in PRESETS}[name]
