"""Stopping a pack on request: SIGTERM (spot preemption, Ctrl-C locally) sets a flag that
the training loops check between chunks and before each evaluation; they checkpoint,
then raise ``Stopped``.

A stop must be written within the notice: GKE gives a preempted spot pod's containers
about 15 s (``NOTICE_SECONDS``) before SIGKILL. A chunk is about a second of training,
but one compiled step, or one evaluation of a large validation set, can take longer, and
neither can be interrupted. So the request also starts a clock: if the loop has not
checkpointed ``DEADLINE_SECONDS`` after the signal, the callbacks registered with
``on_deadline`` write what the loops hold in memory from each trial's last evaluation
(``TrialLife.hold``) and the process exits at once with status 143; a trial's finish under
way (``committing``) ends first. The worst case is therefore one evaluation interval of
training lost per trial, and the evaluation that ended it when the deadline falls
between that evaluation and its copy (docs/methods.md, "Stopping and preemption").

About signals only: when a trial stops by its *stopping protocol* is
``batchscale.core.protocols`` and ``stop_rule``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

EXIT_TERMINATED = 128 + signal.SIGTERM
NOTICE_SECONDS = 15.0  # GKE: a spot node's pods get about this long after SIGTERM
DEADLINE_SECONDS = 10.0  # after the signal: write what is held, leaving time to spare


class StopRequest:
    """Set by SIGTERM; the training loops check it between chunks. ``deadline``: seconds
    after the signal at which the held evaluations are written and the process exits
    (None: never; a stop from a thread, in tests)."""

    def __init__(self, deadline: float | None = DEADLINE_SECONDS):
        self.requested = False
        self.settled = False  # the loops checkpointed (or finished): the deadline does nothing
        self.deadline = deadline
        self._writers: dict[int, object] = {}
        self._lock = threading.RLock()
        self._timer: threading.Timer | None = None

    def __call__(self, signum=None, frame=None) -> None:
        self.requested = True
        if self.deadline is not None and self._timer is None:
            self._timer = threading.Timer(self.deadline, self._past_deadline)
            self._timer.daemon = True
            self._timer.start()

    def on_deadline(self, writer) -> object:
        """Register ``writer()`` (writes held checkpoints) for the deadline; returns a key
        for ``forget``."""
        key = object()
        with self._lock:
            self._writers[id(key)] = writer
        return key

    def forget(self, key) -> None:
        with self._lock:
            self._writers.pop(id(key), None)

    def settle(self) -> None:
        """The loops checkpointed everything themselves: the deadline has nothing to do."""
        with self._lock:
            self.settled = True
        if self._timer is not None:
            self._timer.cancel()

    @contextlib.contextmanager
    def committing(self):
        """Around a trial's finish (its final writes, the commit point): a deadline that
        falls inside waits for it, then writes the held states of the trials still
        training; the finished trial needs none."""
        with self._lock:
            yield

    @contextlib.contextmanager
    def final_checkpoint(self):
        """Around a loop's own checkpoint on a stop: the deadline waits for it, and then
        has nothing to do (were the deadline first, this waits for the process to end:
        its held checkpoints are being written)."""
        with self._lock:
            yield
            self.settled = True
        if self._timer is not None:
            self._timer.cancel()

    def _past_deadline(self) -> None:
        with self._lock:  # a loop's own final checkpoint, under way, ends first
            if self.settled:
                return
            self.settled = True
            print(f"stop: not checkpointed {self.deadline:.0f} s after SIGTERM (a step or an "
                  "evaluation outlasts the notice); writing each trial's last evaluated state "
                  f"and exiting ({EXIT_TERMINATED})", file=sys.stderr, flush=True)
            for writer in list(self._writers.values()):
                try:
                    writer()
                except Exception as error:  # noqa: BLE001  (exit regardless: SIGKILL comes)
                    print(f"stop: a held checkpoint was not written: {error}", file=sys.stderr,
                          flush=True)
            os._exit(EXIT_TERMINATED)


class Stopped(SystemExit):
    """Raised after a requested stop has checkpointed every unfinished trial."""

    def __init__(self, message: str):
        super().__init__(EXIT_TERMINATED)
        self.message = message


@contextlib.contextmanager
def stop_on_sigterm(deadline: float | None = DEADLINE_SECONDS):
    """A ``StopRequest`` that SIGTERM sets while the block runs (main thread only; in
    another thread nothing is installed and the request is never set)."""
    stop = StopRequest(deadline)
    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread
        yield stop
        return
    try:
        yield stop
    finally:
        stop.settle()
        signal.signal(signal.SIGTERM, previous)
