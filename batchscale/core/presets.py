"""The placement presets: every fact about each one, in one table.

A preset is one kind of node a trainer pod lands on: the machine type of its GKE node
pool, the accelerator and how many of it a pod holds, the CPU and memory a pod asks for
(leaving room under the machine type's allocatable for GKE's daemons), how many trials a
pod trains together at most (``max_pack``), how long a pack pod may run, and the dated
list price per device-hour (``batchscale.core.prices``). Its name is the one the CLI's
``--preset`` takes, the compiled pipeline's suffix (``batchscale-study-<preset>``), and
what a trainer records in its trials' metadata.

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
    device is priced per core (CPU). ``topology``: a TPU slice's (``2x2``)."""

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


def _gpu(name: str, machine: str, cpu: str, memory: str, what: str, price: float) -> PresetFacts:
    return PresetFacts(name, GPU, 1, cpu, memory, what, machine, price)


def _tpu(topology: str, chips: int, machine: str, cpu: str, memory: str) -> PresetFacts:
    # Several chips: one trial per pod, spread data-parallel over the chips (a small model
    # belongs on tpu-v5e-1x1, where a pack of its trials shares the one chip).
    return PresetFacts(f"tpu-v5e-{topology}", TPU, chips, cpu, memory,
                       f"TPU v5e {topology}: {chips} chip(s), one host", machine,
                       1.20, topology=topology, max_pack=64 if chips == 1 else 1)  # per v5e chip


# A CPU pod's few cores step a vmapped pack about as fast as its trials one by one: a pack
# there mostly saves start-up (imports, data, compilation), which 16 trials amortise well,
# and a modest pack keeps the memory of a 4-8 GB pod in bounds.
CPU_POOL = PresetFacts("cpu", CPU, 1, "2", "4G", "the cluster's default CPU pool, no accelerator",
                       cpu_limit="4", memory_limit="8G", max_pack=16, pack_timeout_seconds=24 * 3600)
L4 = _gpu("nvidia-l4", "g2-standard-8", "6", "24Gi", "1 NVIDIA L4 (24 GB), spot", 0.85)
A100 = _gpu("nvidia-a100-80gb", "a2-ultragpu-1g", "10", "140Gi", "1 NVIDIA A100 80 GB, spot", 5.07)
H100 = _gpu("nvidia-h100-80gb", "a3-highgpu-1g", "24", "200Gi", "1 NVIDIA H100 80 GB, spot", 11.06)
V5E_1X1 = _tpu("1x1", 1, "ct5lp-hightpu-1t", "20", "40Gi")
V5E_2X2 = _tpu("2x2", 4, "ct5lp-hightpu-4t", "100", "170Gi")
V5E_2X4 = _tpu("2x4", 8, "ct5lp-hightpu-8t", "200", "340Gi")

PRESETS: tuple[PresetFacts, ...] = (CPU_POOL, L4, A100, H100, V5E_1X1, V5E_2X2, V5E_2X4)
DEFAULT = CPU_POOL.name  # what a pipeline is compiled for unless --preset says otherwise
