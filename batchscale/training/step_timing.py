"""Timing probes: seconds per training step at a batch size, training only.

A trial that trained alone on its devices times itself (``train_seconds`` in its
metadata, compilation and evaluation excluded). A trial of a vmapped pack does not: its
step was shared with the pack's other trials, so its time is the pack's, not what one
training run at that batch size would take. For those batch sizes a pack ends with a
timing probe: a few hundred steps (or ``TIME_SECONDS``, whichever is first) of one
model, through the same vmapped step one trial wide (``vmapped_step.PackStep``), on the
same devices, after one untimed warm-up chunk. ``batchscale plan`` times every batch size
of a spec the same way before any sweep. On a pod with several devices, where a trial
spreads its batch over all of them, the pack also times its batch size on every device
count that divides it (``profile_devices``): the profile over device counts that says
where more devices stop saving time. Records go to ``<study>/profile/step_times/``
(``batchscale.store.profiles``), where the report's step-time profile reads them. A record
outside the physical bounds of a step time (``batchscale.core.step_time_bounds``) is never
written, and one already in the store is named and probed again (``read_step_times``
leaves it out, so the pack's check finds no record of its key).
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

import numpy as np

from batchscale.core.names import OPTIMIZER_DEFAULTS
from batchscale.core.spec import StudySpec
from batchscale.core.step_time_bounds import probe_problem

TIME_SECONDS = 2.0  # a probe trains at most about this long per batch size ...
TIME_MIN_STEPS = 30  # ... and at least this many steps (after a warm-up chunk) ...
TIME_MAX_STEPS = 300  # ... and at most this many


def now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def probe_parameters(spec: StudySpec, quantile: float) -> dict:
    """Metaparameters of a probe run: the learning rate at ``quantile`` of its searched
    range (in its own scale), every other searched parameter at its midpoint, and the
    spec's fixed values (the optimizer's defaults for what neither gives)."""
    params = {**OPTIMIZER_DEFAULTS.get(spec.workload.optimizer, {}), **spec.fixed}
    for p in spec.search_space:
        params[p.name] = p.from_unit(quantile if p.name == "learning_rate" else 0.5)
    params.setdefault("label_smoothing", 0.0)
    return params


def probe_pack(spec: StudySpec, pipeline, params: list[dict], step_type=None):
    """(model, PackStep, stacked state, stacked metaparameters) of ``params`` trained
    together with a constant learning rate, every run from the same initial model (built
    with the first run's model parameters: probe runs differ only in trainer settings).
    ``step_type``: a ``PackStep`` subclass to build instead (``mixed_step.MixedStep``)."""
    from batchscale.training.keras_setup import seed_keras
    from batchscale.training.optimizer_rules import SLOTS
    from batchscale.training.vmapped_step import PackStep, initial_arrays, stack_hyper, stack_trials
    from batchscale.workloads import build_model

    seed_keras(spec.seed, spec.backend)
    model = build_model(spec.workload.model, pipeline.input_shape, pipeline.num_outputs,
                        task=pipeline.task, parameters=params[0])
    slots = SLOTS[spec.workload.optimizer]
    step_fn = (step_type or PackStep)(model, "constant", spec.workload.optimizer,
                       any(p.get("l2_penalty", 0.0) for p in params), pipeline.num_outputs,
                       pipeline.task)
    state = stack_trials([initial_arrays(model, slots)] * len(params), slots)
    return model, step_fn, state, stack_hyper(params, (), spec.workload.optimizer)


def device_arrays(pipeline):
    """The training split on the device: inputs, and targets in the step's form
    (``task_losses.loss_targets``: one-hot labels, or regression's (N, k))."""
    import jax.numpy as jnp

    from batchscale.training.task_losses import loss_targets

    x, y = pipeline.arrays("train")
    return jnp.asarray(x), jnp.asarray(loss_targets(pipeline.task, y, pipeline.num_outputs))


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
            steps, seconds, state = timed_steps(step_fn, state, hyper, [order], x_all, y_all)
            record = {"batch_size": int(batch_size), "seconds_per_step": seconds / steps,
                      "steps": steps, "precision": spec.workload.precision, **hardware(1),
                      "measured": now_iso(), "source": "probe"}
            if _believable(record, f"batch size {batch_size}", log):
                log(f"step time at batch size {batch_size}: "
                    f"{1000 * record['seconds_per_step']:.3g} ms ({steps} steps timed)")
                records.append(record)
    return records


def timed_steps(step_fn, state, hyper, orders: list, x_all, y_all, seconds: float = TIME_SECONDS,
                min_steps: int = TIME_MIN_STEPS, max_steps: int = TIME_MAX_STEPS,
                first_chunk: int = 5, warm: bool = False):
    """(steps timed, their seconds, the state after) of ``step_fn`` (a ``PackStep``) training
    ``state`` (one trial per entry of ``orders``, each drawing its batches from its own
    ``EpochPermutations``; of several batch sizes, each padded to the largest:
    ``mixed_step.pad_rows``) after one untimed warm-up chunk of ``first_chunk`` steps (it
    compiles and allocates; none when ``warm``: the step ran just before): chunks sized to
    about a quarter of ``seconds`` until at least ``min_steps`` steps and ``seconds`` are
    timed, or ``max_steps`` steps. Compilation inside a timed chunk (a new chunk shape) is
    taken out. The one timing loop of every probe (step times, pack modes, mixed-batch packs)."""
    from batchscale.training.mixed_step import pad_rows

    chunk, steps, took_all = first_chunk, 0, 0.0
    padded = max(o.batch_size for o in orders)
    while True:
        indices = np.stack([pad_rows(o.take(chunk).reshape(chunk, o.batch_size), padded)
                            for o in orders], 1)
        compiled = step_fn.compile_seconds
        tick = time.perf_counter()
        state, _ = step_fn.run_chunk(state, hyper, indices, steps, x_all, y_all)
        took = time.perf_counter() - tick - (step_fn.compile_seconds - compiled)
        if warm:  # the first chunk warms up (compiles, allocates): not timed
            steps, took_all = steps + chunk, took_all + took
        warm = True
        if steps >= max_steps or (steps >= min_steps and took_all >= seconds):
            return steps, took_all, state
        per_step = max(took / chunk, 1e-6)
        chunk = int(np.clip(0.25 * seconds / per_step, 1, max_steps - steps))


def _believable(record: dict, where: str, log) -> bool:
    """Whether a fresh probe record is within the physical bounds every reader applies
    (``core.step_time_bounds``); one line says so when not, and it is not written (a
    clock that jumped, say): the report then goes without it, and the next probe retries."""
    problem = probe_problem(record)
    if problem:
        log(f"step-time probe at {where} {problem}; not written")
    return problem is None


def time_on_devices(spec: StudySpec, pipeline, batch_size: int, devices: int, log=print) -> dict:
    """One step-time record of ``batch_size`` spread data-parallel over the first
    ``devices`` devices: the model's variables replicated, each step's batch split along
    its first axis (``jax.sharding``), one compiled step per call, the batch fed from the
    host as a trial's is; after one untimed warm-up step, ``TIME_MIN_STEPS`` to
    ``TIME_MAX_STEPS`` steps or about ``TIME_SECONDS``."""
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from batchscale.training.keras_setup import hardware, training_devices, training_scope
    from batchscale.workloads.data_order import EpochPermutations

    if batch_size % devices or devices > len(training_devices()):
        raise ValueError(f"batch size {batch_size} cannot be split over {devices} of "
                         f"{len(training_devices())} devices")
    from batchscale.training.task_losses import loss_targets

    x, y = pipeline.arrays("train")
    targets = loss_targets(pipeline.task, y, pipeline.num_outputs)
    params = probe_parameters(spec, 0.25)
    mesh = Mesh(np.array(jax.devices()[:devices]), ("batch",))
    split, whole = NamedSharding(mesh, PartitionSpec("batch")), NamedSharding(mesh, PartitionSpec())
    with training_scope(spec.backend, spec.workload.precision, 1, log):
        _, step_fn, state, hyper = probe_pack(spec, pipeline, [params])
        one = jax.tree.map(lambda a: jax.device_put(a[0], whole),
                           (state.trainable, state.non_trainable, state.slots))
        hyper = {k: v[0] for k, v in hyper.items()}

        def step(carry, xb, yb, i):
            trainable, non_trainable, slots = carry
            t, nt, v, _ = step_fn._one_trial(trainable, non_trainable, slots, hyper, xb, yb, i)
            return t, nt, v

        compiled = jax.jit(step, donate_argnums=(0,), out_shardings=whole)
        order = EpochPermutations(pipeline.num_train_examples, batch_size, spec.seed)

        def batch():
            idx = order.take(1)
            return jax.device_put(x[idx], split), jax.device_put(targets[idx], split)

        one = compiled(one, *batch(), 0)  # compiles and warms up
        jax.block_until_ready(one)
        steps, tick = 0, time.perf_counter()
        while steps < TIME_MAX_STEPS and (steps < TIME_MIN_STEPS
                                          or time.perf_counter() - tick < TIME_SECONDS):
            one = compiled(one, *batch(), steps + 1)
            steps += 1
        jax.block_until_ready(one)
        seconds = time.perf_counter() - tick
    record = {"batch_size": int(batch_size), "seconds_per_step": seconds / steps, "steps": steps,
              "precision": spec.workload.precision, **hardware(devices), "measured": now_iso(),
              "source": "probe"}
    problem = probe_problem(record)
    if problem:  # profile_devices logs it in one line; nothing is written
        raise ValueError(f"the record {problem}; not written")
    log(f"step time at batch size {batch_size} over {devices} device(s): "
        f"{1000 * record['seconds_per_step']:.3g} ms ({steps} steps timed)")
    return record


def profile_devices(spec: StudySpec, store, pipeline, batch_size: int, trained_on: int,
                    log=print, accelerators_only: bool = True) -> list[dict]:
    """After a pack of data-parallel trials on a pod with several devices (each trial
    spread over ``trained_on`` of them): time ``batch_size`` on every device count from 1
    up that divides it, ``trained_on`` included (one method across the counts: the
    trials' own timings also hold their trainer's overhead), where the store has no such
    record yet, so the report can say where more devices stop saving time. In-memory
    classification or regression data on the JAX backend only; a failed probe is logged, never raised.
    Accelerators only (``accelerators_only``): several CPU "devices" exist only when XLA
    is told to fake them (tests), and on a one-thread XLA (a local run's tasks) their
    all-reduce can deadlock and abort the process, which no ``except`` catches."""
    from batchscale.store.profiles import read_step_times, write_step_times
    from batchscale.training.keras_setup import hardware, on_cpu, training_devices
    from batchscale.training.task_losses import VMAPPED_TASKS

    available = len(training_devices())
    if available < 2 or spec.backend != "jax" or not pipeline.in_memory \
            or pipeline.task not in VMAPPED_TASKS or (accelerators_only and on_cpu()):
        return []
    kind = hardware(1)["device_kind"]
    known = {(r.get("batch_size"), r.get("devices"), r.get("device_kind"), r.get("precision"))
             for r in read_step_times(store.fs, spec.name, log)}
    counts = [d for d in range(1, available + 1) if batch_size % d == 0
              and (batch_size, d, kind, spec.workload.precision) not in known]
    if trained_on < 2:
        return []  # the trials trained on one device each: a pack probe covers them
    records = []
    for devices in counts:
        try:
            records.append(time_on_devices(spec, pipeline, batch_size, devices, log))
        except Exception as err:  # noqa: BLE001  (a step time is not worth failing the pack)
            log(f"step-time probe at batch size {batch_size} over {devices} device(s) failed: "
                f"{type(err).__name__}: {err}")
    if records:
        write_step_times(store.fs, spec.name, records)
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
    for record in read_step_times(store.fs, spec.name, log):
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
