"""One writer per trial: a lease in the store, taken before a trial trains.

Two runs of one study on one store (a second ``submit``, a retried or zombie pod, two
``run --local`` at once) must not train a trial twice, nor write over each other's
files. Before a pack trains a trial it takes the trial's lease; a trial whose lease
another live writer holds is left to that writer (the pack waits for it to finish, then
re-uses it).

A lease is a file ``<study>/leases/<batch_size>/<trial_id>/<epoch>.json``; the holder is
the writer of the highest epoch present. Taking a lease is a create-only write of the
next epoch (``Storage.write_if_absent``: GCS's ``ifGenerationMatch=0``, an exclusive
create locally), so of two writers that find the same lease free or expired exactly one
gets it. The holder renews it (rewrites its own epoch file with a later expiry and the
next renewal number) every ``RENEW_SECONDS`` from a background thread, and deletes it
when it is done with the trial.

How long a lease binds is decided by each reader, on its own clock: until the
``expires`` written in it, but never longer than ``LEASE_SECONDS`` after this reader
first saw that record (that content of that epoch file). A renewal changes the record
and so restarts the reader's window: a live holder, renewing every 30 s, is never taken
over; a dead one (a preempted pod) is taken over at most ``LEASE_SECONDS`` after the
reader first saw its last record; an expiry far in the future (a forged file, a writer
whose clock runs ahead) binds no longer than a dead writer's. A writer on the same
machine whose process is gone (kill -9) is recognised at once. A lease file that is not
a lease record (not JSON, not an object, a field missing or of the wrong type) is named
in one log line and treated as expired. A holder that finds a higher epoch when renewing
has lost the lease (it had not renewed for ``LEASE_SECONDS``: stopped or cut off) and
says so.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass

LEASES_DIR = "leases"
LEASE_SECONDS = 180.0
RENEW_SECONDS = 30.0


def lease_dir(study: str, batch_size: int, trial_id: int) -> str:
    return f"{study}/{LEASES_DIR}/{batch_size}/{trial_id}"


@dataclass(frozen=True)
class Holding:
    """Another writer's lease that binds now: ``owner``, and ``until``, this machine's
    wall-clock time by which it is taken over at the latest unless its holder renews it."""

    owner: str
    until: float


@dataclass(frozen=True)
class _Top:
    """The highest epoch of a lease directory as this reader judges it: ``record`` (None:
    no file, given back meanwhile, or malformed), ``left`` (seconds it still binds; None:
    it does not) and ``why`` it does not bind (said when it is taken over)."""

    epoch: int
    record: dict | None = None
    left: float | None = None
    why: str = ""


class Leases:
    """The leases one writer (this process) holds in one store, renewed in the background,
    and its view of the others' leases (when it first saw each record)."""

    def __init__(self, fs, log=print, lease_seconds: float = LEASE_SECONDS,
                 renew_seconds: float | None = None):
        self.fs, self.log = fs, log
        self.lease_seconds = lease_seconds
        self.renew_seconds = (lease_seconds * RENEW_SECONDS / LEASE_SECONDS
                              if renew_seconds is None else renew_seconds)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.held: dict[str, int] = {}  # lease dir -> our epoch
        self.seen: dict[str, tuple[str | None, float]] = {}  # file -> (content, first seen, monotonic)
        self.named: set[tuple[str, str | None]] = set()  # malformed files (and content) said
        self._renewals = itertools.count()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- taking and giving back -------------------------------------------------------
    def acquire(self, directory: str, name: str = "") -> bool:
        """Take the lease of ``directory`` if it is free, expired, malformed or its holder's
        process is gone; False while another live writer holds it. Taking over another
        writer's lease is logged, naming ``name`` (default: the directory)."""
        top = self._top(directory)
        if top.record is not None and top.record["owner"] == self.owner:
            return True
        if top.left is not None:
            return False
        if not self.fs.write_if_absent(self._path(directory, top.epoch + 1), self._record()):
            return False  # another writer took it first
        with self._lock:
            self.held[directory] = top.epoch + 1
        if top.record is not None:
            self.log(f"lease: {name or directory} taken over from {top.record['owner']} ({top.why})")
        self._start()
        return True

    def holder(self, directory: str) -> str | None:
        """Who holds the lease of ``directory`` now (None: nobody live)."""
        top = self._top(directory)
        return top.record["owner"] if top.left is not None else None

    def holding(self, directory: str) -> Holding | None:
        """Another writer's binding lease on ``directory`` and until when at the latest
        (None: free, expired, malformed, or ours)."""
        top = self._top(directory)
        if top.left is None or top.record["owner"] == self.owner:
            return None
        return Holding(top.record["owner"], time.time() + top.left)

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

    # ---- reading ----------------------------------------------------------------------
    def _record(self) -> bytes:
        """Our lease record; ``renewal`` and ``written`` change with every write, so that
        each reader sees a renewal as a new record and restarts its window."""
        now = time.time()
        return json.dumps({"owner": self.owner, "host": socket.gethostname(), "pid": os.getpid(),
                           "expires": now + self.lease_seconds, "renewal": next(self._renewals),
                           "written": now}).encode()

    def _top(self, directory: str) -> _Top:
        """The highest epoch of ``directory`` and whether (and how long) it binds."""
        epochs = self._epochs(directory)
        if not epochs:
            return _Top(-1)
        epoch = epochs[-1]
        path = self._path(directory, epoch)
        try:
            text, problem = self.fs.read_text(path), None
        except FileNotFoundError:
            return _Top(epoch)  # given back meanwhile: free
        except (PermissionError, IsADirectoryError, ValueError) as err:  # not UTF-8, say
            # (an outage is no answer about the lease: it propagates, as every store call's)
            text, problem = None, f"cannot be read ({type(err).__name__})"
        first = self._first_seen(path, text)
        record = None
        if problem is None:
            record, problem = parse_record(text)
        if problem is not None:
            if (path, text) not in self.named:
                self.named.add((path, text))
                self.log(f"lease: lease file {self.fs.url(path)} is malformed ({problem}); "
                         "treated as expired")
            return _Top(epoch)
        if record["owner"] == self.owner:
            return _Top(epoch, record, math.inf)
        written_left = record["expires"] - time.time()
        seen_left = first + self.lease_seconds - time.monotonic()
        if written_left <= 0:
            return _Top(epoch, record, None, "expired")
        if seen_left <= 0:
            return _Top(epoch, record, None,
                        f"not renewed for {self.lease_seconds:g} s since this writer first saw it")
        if record["host"] == socket.gethostname() and not _process_exists(record["pid"]):
            return _Top(epoch, record, None, f"its process {record['pid']} is gone")
        return _Top(epoch, record, min(written_left, seen_left))

    def _first_seen(self, path: str, text: str | None) -> float:
        """When this reader first saw ``path`` hold ``text`` (monotonic clock): now, if it
        holds something else than at the last look."""
        content, first = self.seen.get(path, (None, None))
        if first is None or content != text:
            first = time.monotonic()
            self.seen[path] = (text, first)
        return first

    def _epochs(self, directory: str) -> list[int]:
        names = self.fs.list_files(directory)
        return sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())

    @staticmethod
    def _path(directory: str, epoch: int) -> str:
        return f"{directory}/{epoch}.json"


def parse_record(text: str) -> tuple[dict | None, str | None]:
    """A lease file's record, or what is wrong with it: not JSON, not an object, or
    ``owner``/``host`` not strings, ``pid`` not a whole number, ``expires`` not a number
    (infinity is a number: a far-future expiry, which the reader's window bounds)."""
    try:
        record = json.loads(text)
    except ValueError:
        return None, "not JSON"
    if not isinstance(record, dict):
        return None, f"not a JSON object ({type(record).__name__})"
    for field, kind, wanted in (("owner", str, "a string"), ("host", str, "a string"),
                                ("pid", int, "a whole number"), ("expires", (int, float), "a number")):
        if field not in record:
            return None, f"{field} is missing"
        value = record[field]
        if not isinstance(value, kind) or isinstance(value, bool) or value != value:  # NaN
            return None, f"{field} is not {wanted}: {json.dumps(value)[:40]}"
    return record, None


def _process_exists(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OverflowError:  # beyond any pid this system gives
        return False
    except PermissionError:
        return True
    return True
