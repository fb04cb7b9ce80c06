"""Everything a trial sets up in Keras before training: backend, seeds, devices, precision, loss.

Data parallelism: the study's batch size is the *global* batch. A trial splits it over
every accelerator its pod holds — Keras' ``DataParallel`` distribution on the JAX
backend, the matching ``tf.distribute`` strategy (TPUStrategy on a TPU host,
MirroredStrategy over several GPUs) on the TensorFlow backend. The model computes on
the global batch either way, so a trial's result does not depend on the device count
(ghost batch normalisation keeps even its batch statistics independent of it).
"""

from __future__ import annotations

import contextlib
import os
import sys

import numpy as np

from batchscale.core.errors import InputError

# Keras' optional integrations a trial never uses, imported by ``import keras`` whenever
# they are installed (batchscale installs all three for itself).
KERAS_OPTIONAL_IMPORTS = ("sklearn", "pandas", "matplotlib")


def select_backend(backend: str) -> None:
    """Make ``backend`` Keras' backend and import Keras (``import_keras_lean``); the backend
    cannot change once keras is imported."""
    if "keras" in sys.modules:
        import keras

        if keras.backend.backend() != backend:
            raise RuntimeError(
                f"keras already imported with backend {keras.backend.backend()!r}; "
                f"run the trial in a fresh process to use {backend!r}"
            )
        return
    os.environ["KERAS_BACKEND"] = backend
    import_keras_lean()


def import_keras_lean() -> None:
    """Import Keras without its scikit-learn wrappers, pandas data adapter and matplotlib
    plotting, which it imports only if it can (``try: import sklearn``): hidden while
    Keras imports, then visible again to everything else. Measured 2026-11-23 on the 2-core
    machine: ``import keras`` (JAX backend) 2.4-2.6 s, 1.8-2.1 s without them, paid by
    every pack process. Should a Keras need one of them, it is imported whole."""
    hidden = [name for name in KERAS_OPTIONAL_IMPORTS if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # makes ``import name`` raise ImportError
    try:
        import keras  # noqa: F401
    except ImportError:
        for name in [m for m in sys.modules if m == "keras" or m.startswith("keras.")]:
            del sys.modules[name]
        _unhide(hidden)
        import keras  # noqa: F401,F811
    finally:
        _unhide(hidden)


def _unhide(names: list[str]) -> None:
    for name in names:
        if name in sys.modules and sys.modules[name] is None:
            del sys.modules[name]


def seed_keras(seed: int, backend: str) -> None:
    """Seed Python, NumPy and Keras' global seed generator.

    ``keras.utils.set_random_seed`` also imports TensorFlow to seed it whenever TF is
    installed, which costs seconds per trial on the JAX backend for nothing; there we
    do its Keras part directly and fall back to it if Keras' internals move.
    """
    import keras

    if backend != "jax":
        keras.utils.set_random_seed(seed)
        _private_default_seeds(seed)
        return
    try:
        import random

        from keras.src.backend.common import global_state
        from keras.src.random import seed_generator
        from keras.src.utils import rng_utils

        global_state.set_global_attribute(rng_utils.GLOBAL_RANDOM_SEED, seed)
        global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, None)
        random.seed(seed)
        np.random.seed(seed)
    except (ImportError, AttributeError):
        keras.utils.set_random_seed(seed)
    _private_default_seeds(seed)


def _private_default_seeds(seed: int) -> None:
    """Keras draws the seed of every unseeded initializer and dropout layer from Python's
    global ``random`` (``seed_generator.make_default_seed``). Another thread drawing from
    it meanwhile (the storage client's retry jitter during an outage, say) would change a
    trial's initial model: a CI run found a trial's step-0 metrics differing from the
    uninterrupted run's. Keras gets a private stream seeded the same way instead, so the
    draws are what ``random.seed(seed)`` gave, whatever other threads do."""
    import random

    try:
        from keras.src.random import seed_generator
    except ImportError:  # a Keras without that module: the global stream, as before
        return
    if hasattr(seed_generator, "python_random"):
        seed_generator.python_random = random.Random(seed)


def replicas_for(batch_size: int, available: int) -> int:
    """How many devices share a global batch: the most (<= available) that divide it
    evenly, so every replica gets the same number of examples."""
    return max(n for n in range(1, max(1, available) + 1) if batch_size % n == 0)


@contextlib.contextmanager
def training_scope(backend: str, precision: str, batch_size: int, log=print):
    """Build and compile the model inside this: it sets the dtype policy and spreads the
    global batch over the pod's accelerators; it yields the number of replicas and
    restores Keras' global state after."""
    import keras

    previous_policy = keras.config.dtype_policy().name
    keras.config.set_dtype_policy(precision)
    try:
        if backend == "jax":
            with _jax_data_parallel(batch_size, log) as replicas:
                yield replicas
        else:
            with _tf_strategy(batch_size, log) as replicas:
                yield replicas
    finally:
        keras.config.set_dtype_policy(previous_policy)


@contextlib.contextmanager
def _jax_data_parallel(batch_size: int, log):
    import keras

    devices = training_devices()
    processes = process_count()
    n = replicas_for(batch_size, len(devices))
    if processes > 1:  # every process must hold a part of the mesh: all devices or none
        check_splits(batch_size)
        n = len(devices)
    if n < 2:
        yield 1
        return
    log(f"data parallel: global batch {batch_size} over {n} devices ({devices[0]}...)"
        + (f" of {processes} processes" if processes > 1 else ""))
    previous = keras.distribution.distribution()
    # Several processes: each feeds its own rows of every global batch (``process_rows``),
    # so Keras must not shard the data for them again.
    keras.distribution.set_distribution(keras.distribution.DataParallel(
        devices=devices[:n], auto_shard_dataset=processes == 1))
    try:
        yield n
    finally:
        keras.distribution.set_distribution(previous)


def on_cpu() -> bool:
    """Whether trials train on CPUs only (no accelerator device)."""
    return all(device.lower().startswith("cpu") for device in training_devices())


def hardware(replicas: int) -> dict:
    """What a trial's timings were measured on, for its metadata (the step-time profile
    and cost to result read it): ``device_kind`` (``cpu``, ``NVIDIA H100 80GB HBM3``,
    ``TPU v5 lite``), ``devices`` (the devices its global batch was spread over),
    ``preset`` (the placement preset its pod was given, ``local`` on one machine) and
    ``cpu_cores`` (the cores the process may use). Read when a trial starts."""
    from batchscale.core.prices import LOCAL_PRESET, PRESET_ENV
    from batchscale.workloads.inputs import available_cpus

    name = training_devices()[0]
    kind = name.split(":")[0].lower()
    try:
        import keras

        if keras.backend.backend() == "jax":
            import jax

            kind = jax.devices()[0].device_kind
    except Exception:  # noqa: BLE001  (a label only: never fail a trial over it)
        pass
    return {"device_kind": kind, "devices": int(replicas),
            "preset": os.environ.get(PRESET_ENV, "").strip() or LOCAL_PRESET,
            "cpu_cores": available_cpus()}


def training_devices() -> list[str]:
    """Keras' accelerator devices when there are any, else its CPU devices (tests force
    several): what a trial's global batch is spread over on the JAX backend. With several
    processes (``distributed``), every device of every process, process 0's first: the
    mesh's order, so process ``p``'s devices hold rows ``process_rows`` of a batch."""
    import keras

    devices = keras.distribution.list_devices()
    fast = [d for d in devices if not d.lower().startswith("cpu")]
    chosen = fast or list(devices)
    if keras.backend.backend() != "jax" or process_count() == 1:
        return chosen
    import jax

    owner = {f"{d.platform}:{d.id}": (d.process_index, d.id) for d in jax.devices()}
    return sorted(chosen, key=lambda name: owner.get(name, (0, 0)))


def process_count() -> int:
    """How many processes train a trial together (``distributed.join``; 1 without JAX)."""
    if "jax" not in sys.modules:
        return 1
    import jax

    return jax.process_count() if jax.distributed.is_initialized() else 1


def check_splits(batch_size: int) -> None:
    """Refuse, in one line, a global batch that several processes cannot share: every
    process must feed as many rows to each of its devices."""
    import jax

    processes, devices = jax.process_count(), len(training_devices())
    if batch_size % devices or devices % processes:
        raise InputError(f"batch size {batch_size} does not split evenly over the {devices} "
                         f"devices of {processes} processes: a multi-host trial needs a batch "
                         "size divisible by its device count")


def process_rows(batch_size: int) -> slice:
    """This process's rows of every global batch of ``batch_size``: all of them in one
    process; with several, its equal share, in process order (the mesh's order,
    ``training_devices``): together the processes feed the batch one process would."""
    processes = process_count()
    if processes == 1:
        return slice(None)
    import jax

    share = batch_size // processes
    first = jax.process_index() * share
    return slice(first, first + share)


@contextlib.contextmanager
def _tf_strategy(batch_size: int, log):
    import tensorflow as tf

    tpus = tf.config.list_logical_devices("TPU")
    if tpus:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
        tf.tpu.experimental.initialize_tpu_system(resolver)
        strategy = tf.distribute.TPUStrategy(resolver)
    else:
        gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
        devices = gpus or [d.name for d in tf.config.list_logical_devices("CPU")]
        n = replicas_for(batch_size, len(devices))
        if n < 2:
            yield 1
            return
        strategy = tf.distribute.MirroredStrategy(devices[:n])
    log(f"data parallel: global batch {batch_size} over {strategy.num_replicas_in_sync} replicas "
        f"({type(strategy).__name__})")
    with strategy.scope():
        yield strategy.num_replicas_in_sync


def make_loss(task: str, label_smoothing: float = 0.0):
    """The training loss of a task (metrics are computed separately, without smoothing).

    Language models average over real tokens only: padding carries weight 0 and the
    mean divides by the sum of weights, not by the padded size. Regression: the mean
    squared error over every predicted value (label smoothing does not apply). The
    vmapped step's losses are the same formulas (``task_losses.stateless_loss``).
    """
    import keras

    if task == "classification":
        return keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=label_smoothing)
    if task == "multilabel":
        return keras.losses.BinaryCrossentropy(from_logits=True, label_smoothing=label_smoothing)
    if task == "language_model":
        return keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight")
    if task == "regression":
        return keras.losses.MeanSquaredError()
    raise ValueError(f"unknown task {task!r}")
