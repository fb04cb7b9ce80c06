"""What an hour of a device costs: the one price table, with its date and source.

Cost to result is time to result x devices x price per device-hour. A *device* is what a
trial's batch is spread over: one GPU, one TPU chip, or, for a CPU trial, the whole set of
cores the trial ran on (priced as that many core-hours). Prices are Google Cloud's
on-demand list prices in us-central1 for the machine type each placement preset's node
pool uses (``batchscale.core.presets``), per accelerator, including the
host share that comes with it. The presets run on spot nodes, whose prices change daily
(60-91% below these); a study that knows its own price sets ``price_per_device_hour`` in
its spec, or ``batchscale report --price``. These figures were recorded from the public
pricing pages as the team last knew them, not fetched by this code (nothing here reads
the network): re-check them before quoting a cost, and update PRICE_DATE with them.
"""

from __future__ import annotations

from batchscale.core.errors import InputError
from batchscale.core.presets import PRESETS

PRICE_DATE = "2026-11-23"
PRICE_SOURCE = ("Google Cloud on-demand list prices, us-central1: cloud.google.com/compute/"
                "vm-instance-pricing, /compute/gpus-pricing and cloud.google.com/tpu/pricing")
CURRENCY = "USD"
PRESET_ENV = "BATCHSCALE_PRESET"  # set on cluster pods by placement.place; unset locally
LOCAL_PRESET = "local"  # a run on one machine (``batchscale run --local``, ``plan``)

CORE_HOUR = 0.0316  # one vCPU of an N2 machine (memory not counted)
# The accelerator presets' prices per device-hour live with the rest of each preset's facts
# (``batchscale.core.presets``: a GPU's price includes the host share of its machine type).
DEVICE_HOUR: dict[str, float] = {p.name: p.device_hour for p in PRESETS if p.device_hour is not None}
# Priced per core: a device is the cores the trial ran on.
CPU_PRESETS = (*(p.name for p in PRESETS if p.device_hour is None), LOCAL_PRESET)


def device_price(preset: str, cpu_cores: float, override: float = 0.0) -> tuple[float, str]:
    """(price per device-hour, where it comes from) for a trial that ran on ``preset``
    (``local`` for a run on one machine) with ``cpu_cores`` cores; ``override`` (> 0)
    wins. Raises ValueError for a preset the table does not know, naming those it does."""
    if override > 0:
        return float(override), "set for this study"
    if preset in CPU_PRESETS:
        cores = max(1.0, float(cpu_cores or 1))
        return CORE_HOUR * cores, (f"{cores:g} cores x {CURRENCY} {CORE_HOUR}/core-hour "
                                   f"({PRICE_DATE} list price)")
    if preset not in DEVICE_HOUR:
        known = ", ".join([*CPU_PRESETS, *DEVICE_HOUR])
        raise InputError(f"no price for preset {preset!r}; known: {known}; set "
                         "price_per_device_hour in the spec or pass --price")
    return DEVICE_HOUR[preset], f"{CURRENCY} {DEVICE_HOUR[preset]}/device-hour ({PRICE_DATE} list price)"
