"""One writer per trial: a lease in the store, taken before a trial trains.

Two runs of one study on one store (a second ``submit``, a retried or zombie pod, two
``run --local`` at once) must not train a trial twice, nor write over each other's
files. Before a pack trains a trial it takes the trial's lease; a trial whose lease
another live writer holds is left to that writer (the pack waits for it to finish, then
re-uses it).

A lease is a file ``<study>/leases/<batch_size>/<trial_id>/<epoch>.json``; the holder is
the writer of the highest epoch present, until that file's ``expires`` time. Taking a
lease is a create-only write of the next epoch (``Storage.write_if_absent``: GCS's
``ifGenerationMatch=0``, an exclusive create locally), so of two writers that find the
same lease free or expired exactly one gets it. The holder renews it (rewrites its own
epoch file with a later expiry) every ``RENEW_SECONDS`` from a background thread, and
deletes it when it is done with the trial. A lease expires ``LEASE_SECONDS`` after its
last renewal, so a dead writer's trial (a preempted pod) is taken over after at most that
long; a writer on the same machine whose process is gone (kill -9) is recognised at once.
A holder that finds a higher epoch when renewing has lost the lease (it had not renewed
for ``LEASE_SECONDS``: stopped or cut off) and says so.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid

LEASES_DIR = "leases"
LEASE_SECONDS = 180.0
RENEW_SECONDS = 30.0


def lease_dir(study: str, batch_size: int, trial_id: int) -> str:
    return f"{study}/{LEASES_DIR}/{batch_size}/{trial_id}"


class Leases:
    """The leases one writer (this process) holds in one store, renewed in the background."""

    def __init__(self, fs, log=print, lease_seconds: float = LEASE_SECONDS,
                 renew_seconds: float = RENEW_SECONDS):
        self.fs, self.log = fs, log
        self.lease_seconds, self.renew_seconds = lease_seconds, renew_seconds
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.held: dict[str, int] = {}  # lease dir -> our epoch
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- taking and giving back -------------------------------------------------------
    def acquire(self, directory: str) -> bool:
        """Take the lease of ``directory`` if it is free, expired or its holder's process
        is gone; False while another live writer holds it."""
        epochs = self._epochs(directory)
        if epochs:
            top = epochs[-1]
            holder = self._read(directory, top)
            if holder is not None and holder.get("owner") == self.owner:
                return True
            if holder is not None and self._alive(holder):
                return False
        else:
            top = -1
        if not self.fs.write_if_absent(self._path(directory, top + 1), self._record()):
            return False  # another writer took it first
        with self._lock:
            self.held[directory] = top + 1
        self._start()
        return True

    def holder(self, directory: str) -> str | None:
        """Who holds the lease of ``directory`` now (None: nobody live)."""
        epochs = self._epochs(directory)
        record = self._read(directory, epochs[-1]) if epochs else None
        return record.get("owner") if record is not None and self._alive(record) else None

    def release(self, directory: str) -> None:
        """Give the lease back: delete our epoch file and the expired ones below it. Under
        the lock a renewal writes by, so a renewal already under way cannot write the
        file back after it is gone (a released lease would then look held until it
        expired: a CI run caught that race)."""
        with self._lock:
            epoch = self.held.pop(directory, None)
            if epoch is None:
                return
            for other in self._epochs(directory):
                if other <= epoch:
                    self.fs.delete(self._path(directory, other))

    def release_all(self) -> None:
        self._stop.set()
        for directory in list(self.held):
            self.release(directory)

    # ---- renewal ----------------------------------------------------------------------
    def renew(self) -> None:
        """Push every held lease's expiry forward; report (and drop) a lease lost to a
        writer that took it over."""
        with self._lock:
            held = dict(self.held)
        for directory, epoch in held.items():
            epochs = self._epochs(directory)
            if epochs and epochs[-1] > epoch:
                self.log(f"lease of {directory} lost to {self.holder(directory)}: this writer "
                         f"had not renewed it for {self.lease_seconds:.0f} s")
                with self._lock:
                    self.held.pop(directory, None)
                continue
            with self._lock:
                if self.held.get(directory) != epoch:
                    continue  # released since the snapshot: never write it back
                self.fs.write_bytes(self._path(directory, epoch), self._record())

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._renew_loop, name="lease-renewal",
                                            daemon=True)
            self._thread.start()

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.renew_seconds):
            try:
                self.renew()
            except Exception as err:  # an outage: try again next time, while the lease lasts
                self.log(f"could not renew leases ({type(err).__name__}: {err}); retrying")

    # ---- files ------------------------------------------------------------------------
    def _record(self) -> bytes:
        return json.dumps({"owner": self.owner, "host": socket.gethostname(), "pid": os.getpid(),
                           "expires": time.time() + self.lease_seconds}).encode()

    def _alive(self, record: dict) -> bool:
        """Whether a lease record still binds: not expired, and (when its writer ran on
        this machine) its process still runs."""
        if float(record.get("expires", 0)) <= time.time():
            return False
        if record.get("host") == socket.gethostname() and record.get("owner") != self.owner:
            return _process_exists(int(record.get("pid", -1)))
        return True

    def _epochs(self, directory: str) -> list[int]:
        names = self.fs.list_files(directory)
        return sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())

    def _read(self, directory: str, epoch: int) -> dict | None:
        try:
            record = json.loads(self.fs.read_text(self._path(directory, epoch)))
        except (FileNotFoundError, ValueError):
            return None  # given back meanwhile, or being written: free
        return record if isinstance(record, dict) else None

    @staticmethod
    def _path(directory: str, epoch: int) -> str:
        return f"{directory}/{epoch}.json"


def _process_exists(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
