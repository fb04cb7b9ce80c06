"""Whether a mixed-batch group pays: a short timed probe, cached in the study's profile.

``probe_mixed`` times trial-steps per second of one mixed group of the given batch sizes
(``mixed_step``: slots cycling through the batch sizes, every batch padded to the
largest) against the same trials as separate groups, each batch size's trials in the
mode a pack of that batch size uses by default (``separate_width`` trials vmapped at
once: one on a CPU). Both are timed as ``step_timing`` times a step (``timed_steps``: after a
warm-up chunk, steady), with ``PROBE_SECONDS`` per timing. A mixed group is chosen only
when it is at least ``MIXED_MARGIN`` times faster: the probe does not see what a mixed
group costs besides its step (every slot is evaluated at the union of its trials'
evaluation grids; a trial that ends early leaves its slot training, ignored, until the
group's longest trial ends).

``mixed_chosen`` reads the record of these batch sizes, width, device kind, precision
and model from the study's profile (``store.profiles.read_pack_modes``) and probes (and
writes the record) only when there is none, so a study probes each combination once;
packs that probe at the same time adopt the record written first (``claim_pack_mode``).
"""

from __future__ import annotations

import math

import numpy as np

from batchscale.core.spec import StudySpec
from batchscale.training.pack_mode import MARGIN

PROBE_SECONDS = 0.5  # timed seconds per configuration (after a warm-up chunk)
# Mixed must be this much faster than separate groups to be chosen: the pack mode's one
# margin (``pack_mode.MARGIN``: the slots early stopping wastes, and a probe's 2x noise on
# a busy CPU, where a 1.1x margin chose mixed in one quickstart and separate in the next).
MIXED_MARGIN = MARGIN


def slot_sizes(batch_sizes, width: int) -> list[int]:
    """The batch size at each slot of a mixed group ``width`` wide (at least one slot per
    batch size): the sorted batch sizes in turn, as ``packs._train_mixed`` orders a pack
    with as many trials of each."""
    sizes = sorted(set(batch_sizes))
    return [sizes[i % len(sizes)] for i in range(max(width, len(sizes)))]


def separate_width(spec: StudySpec) -> int:
    """How many trials of one batch size the probe's separate groups train vmapped at once:
    one on a CPU, the workload's ``pack_capacity`` on an accelerator (the rule packs had
    before ``pack_mode`` measured it per batch size; the one place mixed packs ask it)."""
    from batchscale.training.keras_setup import on_cpu
    from batchscale.workloads.defaults import pack_capacity

    return 1 if on_cpu() else pack_capacity(spec.workload.dataset, spec.workload.model)


def probe_mixed(spec: StudySpec, pipeline, batch_sizes, width: int, log=print,
                seconds: float = PROBE_SECONDS) -> dict:
    """The pack-mode record (``store.profiles.write_pack_mode``'s fields) of a mixed group
    of ``batch_sizes`` ``width`` wide against separate groups, timed now."""
    from batchscale.training.keras_setup import training_scope
    from batchscale.training.mixed_step import MixedStep
    from batchscale.training.step_timing import device_arrays, now_iso

    slots = slot_sizes(batch_sizes, width)
    x_all, y_all = device_arrays(pipeline)
    apart = separate_width(spec)
    with training_scope(spec.backend, spec.workload.precision, 1, log):
        mixed = _seconds_per_step(spec, pipeline, slots, MixedStep, x_all, y_all, seconds)
        separate = 0.0
        for size in sorted(set(slots)):
            n = slots.count(size)
            group = min(apart, n)
            separate += math.ceil(n / group) * _seconds_per_step(
                spec, pipeline, [size] * group, None, x_all, y_all, seconds)
    rates = {"mixed": len(slots) / mixed, "separate": len(slots) / separate}
    chosen = "mixed" if rates["mixed"] >= MIXED_MARGIN * rates["separate"] else "separate"
    log(f"pack mode of batch sizes {'/'.join(map(str, sorted(set(slots))))} ({len(slots)} wide): "
        f"mixed {rates['mixed']:.0f} against separate {rates['separate']:.0f} trial-steps/s: {chosen}")
    return mode_record(spec, slots, rates, chosen, now_iso(), "probe")


def mode_record(spec: StudySpec, slots: list[int], rates: dict, chosen: str, measured: str,
                source: str) -> dict:
    """A mixed-or-separate pack-mode record (``store.profiles.write_pack_mode``'s form) of
    a group with these slots' batch sizes on this device kind. Tests and benchmarks write
    one with ``chosen`` given, as a probe would have."""
    from batchscale.training.keras_setup import hardware

    return {"batch_sizes": sorted(set(slots)), "width": len(slots), "rates": rates,
            "chosen": chosen, "device_kind": hardware(1)["device_kind"],
            "precision": spec.workload.precision, "model": spec.workload.model,
            "measured": measured, "source": source}


def _seconds_per_step(spec: StudySpec, pipeline, slots: list[int], step_type, x_all, y_all,
                      seconds: float) -> float:
    """Seconds per steady step of one group of trials at these batch sizes (one per slot;
    padded to the largest and trained by ``step_type`` when they differ)."""
    import jax.numpy as jnp

    from batchscale.training.step_timing import probe_pack, probe_parameters, timed_steps
    from batchscale.workloads.data_order import EpochPermutations

    params = probe_parameters(spec, 0.25)  # a low learning rate: nothing diverges mid-timing
    _, step_fn, state, hyper = probe_pack(spec, pipeline, [params] * len(slots), step_type)
    if step_type is not None:
        hyper["batch_size"] = jnp.asarray(np.array(slots, np.float32))
    orders = [EpochPermutations(pipeline.num_train_examples, size, spec.seed + i)
              for i, size in enumerate(slots)]
    steps, took, _ = timed_steps(step_fn, state, hyper, orders, x_all, y_all, seconds)
    return took / steps


def pack_mode_record(spec: StudySpec, store, batch_sizes, width: int) -> dict | None:
    """The study's pack-mode record of a mixed group of ``batch_sizes`` ``width`` wide on
    this device kind, at the spec's precision and model, or None."""
    from batchscale.store.profiles import read_pack_modes
    from batchscale.training.keras_setup import hardware

    key = (sorted(set(batch_sizes)), len(slot_sizes(batch_sizes, width)),
           hardware(1)["device_kind"], spec.workload.precision, spec.workload.model)
    for record in read_pack_modes(store.fs, spec.name):
        if (record.get("batch_sizes"), record.get("width"), record.get("device_kind"),
                record.get("precision"), record.get("model")) == key:
            return record
    return None


def mixed_chosen(spec: StudySpec, store, pipeline, batch_sizes, width: int, log=print) -> bool:
    """Whether a mixed group of ``batch_sizes`` ``width`` wide is the faster mode here: the
    study's record of it, or a probe now (written as a record). A probe that fails is
    logged and the pack trains its batch sizes separately, as it would without mixing."""
    from batchscale.store.profiles import claim_pack_mode

    record = pack_mode_record(spec, store, batch_sizes, width)
    if record is not None:
        return record["chosen"] == "mixed"
    try:
        record = probe_mixed(spec, pipeline, batch_sizes, width, log)
    except Exception as err:  # noqa: BLE001  (see the docstring)
        log(f"mixed-batch probe of batch sizes {sorted(set(batch_sizes))} failed, trained separately: "
            f"{type(err).__name__}: {err}")
        return False
    # a pack of these batch sizes that probed at the same time and wrote first decides
    # (as ``pack_mode.choose_pack_mode``): the packs of a stage, and a stage run again,
    # then mix alike; each writing its own, the last won and a re-run followed only it
    _, record = claim_pack_mode(store.fs, spec.name, record,
                                lambda there: there["chosen"] in ("mixed", "separate"))
    return record["chosen"] == "mixed"
