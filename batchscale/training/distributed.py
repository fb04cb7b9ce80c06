"""Several processes training one trial together (a multi-host trial): who they are, how
they join, and how they agree.

A multi-host pack runs one process per host (a TrainJob's or JobSet's pods), each with its
own accelerators; JAX's multi-process runtime joins them, so a trial's global batch is
spread over every device of every process (``keras_setup``). Each process learns its
place from the environment the launcher sets (``process_env``):

* ``BATCHSCALE_COORDINATOR``: ``host:port`` of process 0, where JAX's coordination
  service listens;
* ``BATCHSCALE_NUM_PROCESSES``: how many processes (>= 1);
* ``BATCHSCALE_PROCESS_ID``: this process's index, 0 to N-1; when absent,
  ``JOB_COMPLETION_INDEX`` (which an Indexed Job or a JobSet sets on each pod).

``join`` calls ``jax.distributed.initialize`` with them; it must run before anything
asks JAX for its devices (importing Keras does not). On CPUs the processes' collectives
go over TCP (JAX's gloo implementation, asked for explicitly: older JAX had none by
default).

``Team``: the processes of one trial, seen from one of them. Every process computes the
same things (the same batches, the same evaluation, the same stopping rule); exactly one,
the ``writer`` (process 0), writes the trial's files (``trial_lifecycle``), and the others
take the writer's view wherever it could differ between processes: the rows it evaluated
(bit for bit), the outcome (a race's crossings are read from the store, by each process
at its own moment), the chunk length (timed by each process's clock), and whether any
process was asked to stop (SIGTERM may reach one host only). Those agreements are small
collectives over the processes (``jax.experimental.multihost_utils``); a one-process
``Team`` (``Team.solo()``) agrees with itself without touching JAX. Nothing here reads
the environment or imports JAX at import time.

A stop also travels outside the collectives (``relayed_stops``): the agreement after a
chunk is the normal path, but when a step or an evaluation outlasts the notice there is
no agreement before the deadline (``signals.StopRequest``), and the writer, whose host
may not have been signalled at all, must still write its trial's last evaluated state.
So a process asked to stop also says so in JAX's coordination service (a key), and every
process watches that key and makes its own request when it appears: every process's
deadline then runs, and the writer's writes what it holds.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass

import numpy as np

COORDINATOR_ENV = "BATCHSCALE_COORDINATOR"
NUM_PROCESSES_ENV = "BATCHSCALE_NUM_PROCESSES"
PROCESS_ID_ENV = "BATCHSCALE_PROCESS_ID"
INDEX_ENV = "JOB_COMPLETION_INDEX"  # set by an Indexed Job / JobSet on each of its pods
JOIN_TIMEOUT_SECONDS = 300  # how long a process waits for the others to join
STOP_KEY = "batchscale/stop"  # in JAX's coordination service: who was asked to stop
RELAY_SECONDS = 0.5  # how often each process looks at its own request and at that key


@dataclass(frozen=True)
class ProcessEnv:
    """Where one process stands among a trial's processes."""

    coordinator: str  # host:port of process 0
    num_processes: int
    process_id: int


def process_env(environ=None) -> ProcessEnv:
    """The process's place read from ``environ`` (default ``os.environ``); a ValueError of
    one line names the variable that is missing or wrong and what it must be."""
    env = os.environ if environ is None else environ
    coordinator = (env.get(COORDINATOR_ENV) or "").strip()
    host, _, port = coordinator.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{COORDINATOR_ENV}={coordinator!r}: must be HOST:PORT of process 0 "
                         "(e.g. trial-0.trial:8476), a port from 1 to 65535")
    count = _integer(env, NUM_PROCESSES_ENV, "the number of processes, an integer >= 1")
    if count < 1:
        raise ValueError(f"{NUM_PROCESSES_ENV}={count}: the number of processes must be >= 1")
    name = PROCESS_ID_ENV if (env.get(PROCESS_ID_ENV) or "").strip() else INDEX_ENV
    if not (env.get(name) or "").strip():
        raise ValueError(f"{PROCESS_ID_ENV} (or {INDEX_ENV}, which an Indexed Job sets): "
                         f"missing; this process's index, 0 to {count - 1}")
    index = _integer(env, name, f"this process's index, 0 to {count - 1}")
    if not 0 <= index < count:
        raise ValueError(f"{name}={index}: this process's index must be 0 to {count - 1} "
                         f"({NUM_PROCESSES_ENV}={count})")
    return ProcessEnv(coordinator, count, index)


def _integer(env, name: str, what: str) -> int:
    text = (env.get(name) or "").strip()
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: must be {what}") from None


def join(place: ProcessEnv) -> None:
    """Join the trial's processes through JAX's coordination service (process 0 serves it
    at ``place.coordinator``); returns once all ``num_processes`` have joined. Call it
    before anything lists JAX's devices; one process needs no joining."""
    if place.num_processes == 1:
        return
    import jax  # initialize refuses once JAX has made its devices ("must be called before")

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=place.coordinator,
                               num_processes=place.num_processes, process_id=place.process_id,
                               initialization_timeout=JOIN_TIMEOUT_SECONDS)


class Team:
    """The processes training one trial, from one process's side (see the module
    docstring). ``writer``: whether this process writes the trial's files."""

    def __init__(self, process_id: int = 0, size: int = 1):
        self.process_id, self.size = process_id, size

    @classmethod
    def solo(cls) -> Team:
        """One process: it writes, and agrees with itself."""
        return cls()

    @classmethod
    def of(cls, place: ProcessEnv) -> Team:
        return cls(place.process_id, place.num_processes)

    @property
    def writer(self) -> bool:
        return self.process_id == 0

    @property
    def label(self) -> str:
        """How its log lines start: empty for one process."""
        return f"[process {self.process_id}/{self.size}] " if self.size > 1 else ""

    def chunk(self, finite: bool, stop: bool, seconds: float | None) -> tuple[bool, bool, float | None]:
        """After a chunk of training, one collective: whether every process's loss was
        finite, whether any process was asked to stop (all stop at this step), and the
        writer's seconds per step (so every process cuts the next chunk alike)."""
        if self.size == 1:
            return finite, stop, seconds
        mine = np.array([float(finite), float(stop), -1.0 if seconds is None else seconds],
                        np.float32)
        every = self._gather(mine)
        writers = float(every[0, 2])
        return bool(every[:, 0].all()), bool(every[:, 1].any()), (None if writers < 0 else writers)

    def stop(self, requested: bool) -> bool:
        """Whether any process was asked to stop (a collective)."""
        if self.size == 1:
            return requested
        return bool(self._gather(np.array([float(requested)], np.float32)).any())

    def same_row(self, row: dict) -> dict:
        """The writer's evaluation row, bit for bit (every process computes one, the same
        up to the last bits of float arithmetic on other devices)."""
        if self.size == 1:
            return row
        keys = sorted(row)
        values = np.array([float(row[k]) for k in keys], np.float64)
        agreed = self._broadcast(values.view(np.uint32)).view(np.float64)
        return {k: (int(v) if k == "step" else float(v)) for k, v in zip(keys, agreed)}

    def same_code(self, code: int) -> int:
        """The writer's choice among small integers (an outcome, a verdict on a trial)."""
        if self.size == 1:
            return code
        return int(self._broadcast(np.array([code], np.int32))[0])

    def same_choice(self, value, choices: tuple):
        """The writer's ``value``, one of ``choices``."""
        if self.size == 1:
            return value
        return choices[self.same_code(choices.index(value))]

    def check_same(self, value: int, what: str) -> None:
        """Raise, in every process alike, unless every process holds the same ``value``."""
        if self.size == 1:
            return
        every = self._gather(np.array([value], np.int32))
        if len(set(every[:, 0].tolist())) > 1:
            raise RuntimeError(f"the trial's processes disagree on {what}: "
                               f"{every[:, 0].tolist()} (process 0 first)")

    def _gather(self, values: np.ndarray) -> np.ndarray:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(values))

    def _broadcast(self, values: np.ndarray) -> np.ndarray:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.broadcast_one_to_all(values, is_source=self.writer))


@contextlib.contextmanager
def relayed_stops(stop, team: Team, log=print):
    """While the block runs, relay a stop between the processes of ``team`` through JAX's
    coordination service: this process's request (``stop.requested``, set by SIGTERM) is
    published once, and another's makes this process's own (``stop()``, which starts its
    deadline). Every ``RELAY_SECONDS``, from a daemon thread; nothing for one process."""
    client = _coordination_client() if team.size > 1 else None
    if client is None:
        if team.size > 1:
            log("stop: JAX's coordination client is not reachable here; a stop travels only "
                "at the agreement after each chunk")
        yield
        return
    done = threading.Event()

    def relay() -> None:
        while not done.wait(RELAY_SECONDS):
            try:
                if stop.requested:
                    with contextlib.suppress(Exception):  # another process published first
                        client.key_value_set(STOP_KEY, str(team.process_id))
                    return
                who = _try_get(client, STOP_KEY)
                if who is not None:
                    log(f"stop: process {who} was asked to stop; this one stops too")
                    stop()
                    return
            except Exception as error:  # noqa: BLE001  (the coordinator is gone: the run ends)
                log(f"stop: the relay ended ({type(error).__name__}: {error})")
                return

    thread = threading.Thread(target=relay, name="stop-relay", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()


def _coordination_client():
    """JAX's client of its coordination service (the key-value store the processes share),
    or None: JAX has no public name for it (``jax._src.distributed.global_state``)."""
    try:
        from jax._src import distributed as jax_distributed

        return jax_distributed.global_state.client
    except (ImportError, AttributeError):
        return None


def _try_get(client, key: str) -> str | None:
    """The key's value, None while it is absent (the client raises NOT_FOUND)."""
    try:
        return client.key_value_try_get(key)
    except Exception as error:  # noqa: BLE001  (XlaRuntimeError, whose kind is in the text)
        if "NOT_FOUND" in str(error) or "not found" in str(error).lower():
            return None
        raise
