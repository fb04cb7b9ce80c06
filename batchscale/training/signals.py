"""Stopping a pack on request: SIGTERM (spot preemption, Ctrl-C locally) sets a flag that
the training loops check between chunks; they checkpoint, then raise ``Stopped``.

About signals only: when a trial stops by its *stopping protocol* is
``batchscale.core.protocols`` and ``stop_rule``."""

from __future__ import annotations

import contextlib
import signal

EXIT_TERMINATED = 128 + signal.SIGTERM


class StopRequest:
    """Set by SIGTERM; the training loops check it between chunks."""

    def __init__(self):
        self.requested = False

    def __call__(self, signum=None, frame=None) -> None:
        self.requested = True


class Stopped(SystemExit):
    """Raised after a requested stop has checkpointed every unfinished trial."""

    def __init__(self, message: str):
        super().__init__(EXIT_TERMINATED)
        self.message = message


@contextlib.contextmanager
def stop_on_sigterm():
    """A ``StopRequest`` that SIGTERM sets while the block runs (main thread only; in
    another thread nothing is installed and the request is never set)."""
    stop = StopRequest()
    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread
        yield stop
        return
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)
