"""Timing probes: seconds per training step at a batch size, training only.

A trial that trained alone on its devices times itself (``train_seconds`` in its
metadata, compilation and evaluation excluded). A trial of a vmapped pack does not: its
step was shared with the pack's other trials, so its time is the pack's, not what one
training run at that batch size would take. For those batch sizes a pack ends with a
timing probe: a few hundred steps (or ``TIME_SECONDS``, whichever is first) of one
model, through the same vmapped step one trial wide (``vmapped_step.PackStep``), on the
same devices, after one untimed warm-up chunk. ``batchscale plan`` times every batch size
of a spec the same way before any sweep. Records go to ``<study>/profile/step_times.json``
(``batchscale.store.profiles``), where the report's step-time profile reads them.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

import numpy as np

from batchscale.core.spec import StudySpec

TIME_SECONDS = 2.0  # a probe trains at most about this long per batch size ...
TIME_MIN_STEPS = 30  # ... and at least this many steps (after a warm-up chunk) ...
TIME_MAX_STEPS = 300  # ... and at most this many


def now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def probe_parameters(spec: StudySpec, quantile: float) -> dict:
    """Metaparameters of a probe run: the learning rate at ``quantile`` of its searched
    range (in its own scale), every other searched parameter at its midpoint, and the
    spec's fixed values."""
    params = dict(spec.fixed)
    for p in spec.search_space:
        params[p.name] = p.from_unit(quantile if p.name == "learning_rate" else 0.5)
    params.setdefault("label_smoothing", 0.0)
    return params


def probe_pack(spec: StudySpec, pipeline, params: list[dict]):
    """(model, PackStep, stacked state, stacked metaparameters) of ``params`` trained
    together with a constant learning rate, every run from the same initial model."""
    from batchscale.training.keras_setup import seed_keras
    from batchscale.training.vmapped_step import PackStep, initial_arrays, stack_hyper, stack_trials
    from batchscale.workloads import build_model

    seed_keras(spec.seed, spec.backend)
    model = build_model(spec.workload.model, pipeline.input_shape, pipeline.num_outputs,
                        task=pipeline.task)
    momentum = spec.workload.optimizer != "sgd"
    step_fn = PackStep(model, "constant", spec.workload.optimizer,
                       any(p.get("l2_penalty", 0.0) for p in params), pipeline.num_outputs)
    state = stack_trials([initial_arrays(model, momentum)] * len(params), momentum)
    return model, step_fn, state, stack_hyper(params, ())


def device_arrays(pipeline):
    """The training split on the device: images, and labels one-hot (the step's form)."""
    import jax.numpy as jnp

    x, y = pipeline.arrays("train")
    return jnp.asarray(x), jnp.asarray(np.eye(pipeline.num_outputs, dtype=np.float32)[y])


def time_steps(spec: StudySpec, pipeline, batch_sizes, log=print) -> list[dict]:
    """One step-time record per batch size (``batchscale.store.profiles`` form). Needs the
    JAX backend and in-memory data (``packs.vmappable``'s conditions)."""
    from batchscale.training.keras_setup import hardware, training_scope
    from batchscale.workloads.data_order import EpochPermutations

    x_all, y_all = device_arrays(pipeline)
    params = probe_parameters(spec, 0.25)  # a low learning rate: nothing diverges mid-timing
    records = []
    # batch size 1 to training_scope: its dtype policy without spreading the batch over
    # devices (the vmapped step is one device's); one model serves every batch size
    with training_scope(spec.backend, spec.workload.precision, 1, log):
        _, step_fn, state, hyper = probe_pack(spec, pipeline, [params])
        for batch_size in batch_sizes:
            order = EpochPermutations(pipeline.num_train_examples, batch_size, spec.seed)
            chunk, steps, seconds, warm = 5, 0, 0.0, False
            while True:
                indices = order.take(chunk).reshape(chunk, 1, batch_size)
                compiled = step_fn.compile_seconds
                tick = time.perf_counter()
                state, _ = step_fn.run_chunk(state, hyper, indices, steps, x_all, y_all)
                took = time.perf_counter() - tick - (step_fn.compile_seconds - compiled)
                if warm:  # the first chunk warms up (compiles, allocates): not timed
                    steps, seconds = steps + chunk, seconds + took
                warm = True
                if steps >= TIME_MAX_STEPS or (steps >= TIME_MIN_STEPS and seconds >= TIME_SECONDS):
                    break
                per_step = max(took / chunk, 1e-6)
                chunk = int(np.clip(0.25 * TIME_SECONDS / per_step, 1, TIME_MAX_STEPS - steps))
            record = {"batch_size": int(batch_size), "seconds_per_step": seconds / steps,
                      "steps": steps, "precision": spec.workload.precision, **hardware(1),
                      "measured": now_iso(), "source": "probe"}
            log(f"step time at batch size {batch_size}: "
                f"{1000 * record['seconds_per_step']:.3g} ms ({steps} steps timed)")
            records.append(record)
    return records


def profile_pack(spec: StudySpec, store, pipeline, batch_size: int, width: int, log=print) -> list[dict]:
    """After a vmapped pack of ``width`` > 1 trials: time ``batch_size`` alone on these
    devices unless the store already has such a record (same batch size, device kind,
    precision); returns what it wrote. A failed probe is logged, never raised: the
    trials are done and recorded, and a step time is not worth failing their pack."""
    from batchscale.store.profiles import read_step_times, write_step_times
    from batchscale.training.keras_setup import hardware

    if width <= 1:
        return []  # every trial timed itself
    kind = hardware(1)["device_kind"]
    for record in read_step_times(store.fs, spec.name):
        if (record.get("batch_size"), record.get("devices"), record.get("device_kind"),
                record.get("precision")) == (batch_size, 1, kind, spec.workload.precision):
            return []
    try:
        records = time_steps(spec, pipeline, [batch_size], log)
        write_step_times(store.fs, spec.name, records)
        return records
    except Exception as err:  # noqa: BLE001  (see the docstring)
        log(f"step-time probe at batch size {batch_size} failed, the report will say so: "
            f"{type(err).__name__}: {err}")
        return []
