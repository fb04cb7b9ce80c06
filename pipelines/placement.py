"""Where each task runs: resource requests per preset (accelerators come with GKE work).

One place maps a preset name to what a trainer pod asks for; the light steps (data
prep, search, goal detection, aggregation) always get the small CPU request.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    cpu: str
    memory: str
    cpu_limit: str | None = None
    memory_limit: str | None = None


PRESETS = {
    "cpu": Preset(cpu="2", memory="4G", cpu_limit="4", memory_limit="8G"),
}
LIGHT = Preset(cpu="500m", memory="1G", memory_limit="4G")


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ValueError(f"unknown placement preset {name!r}; allowed: {', '.join(PRESETS)}")
    return PRESETS[name]


def place(task, preset: Preset):
    """Apply a preset's requests and limits to a pipeline task; returns the task."""
    task.set_cpu_request(preset.cpu).set_memory_request(preset.memory)
    if preset.cpu_limit:
        task.set_cpu_limit(preset.cpu_limit)
    if preset.memory_limit:
        task.set_memory_limit(preset.memory_limit)
    return task
