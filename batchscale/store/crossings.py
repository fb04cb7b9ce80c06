"""Published goal crossings: what a racing protocol stops trials by (``races``: ``race``).

Steps to result is the earliest step at which any trial of a batch size beat the goal.
A trial evaluated at step t >= that step, without having beaten the goal, can only beat
it later, so training it on cannot change steps to result: a protocol that races stops it. For that a
pack must know the earliest crossings of trials trained elsewhere (other pack tasks,
other pods, an earlier run): every trial that finishes COMPLETE publishes the first step
at which it beat each goal, as one empty file per crossing,

    <study>/crossings/<batch_size>/g<goal index>-s<step>-t<trial id>

so one listing of the folder tells a pack every crossing made so far (a few requests per
poll on GCS, whatever the number of trials). A crossing is published only once its trial
is COMPLETE: a trial that beats one goal and then diverges is INFEASIBLE, its curve never
counts, so its crossing must not stop anyone. The files sit beside the checkpoints,
outside the paper's per-batch-size folders, so the paper's loader never sees them.
"""

from __future__ import annotations

import re
import time

from batchscale.store.filesystem import Storage

POLL_SECONDS = 10.0  # how often a pack lists the crossings that others published
_NAME = re.compile(r"^g(\d+)-s(\d+)-t(\d+)$")


def crossings_dir(study: str, batch_size: int) -> str:
    return f"{study}/crossings/{batch_size}"


class CrossingBoard:
    """The earliest known crossing of each goal at one batch size: those published in the
    store (listed at most every ``poll_seconds``) and those this process published (at
    once: trials of one pack see each other's crossings without waiting)."""

    def __init__(self, fs: Storage, study: str, batch_size: int,
                 poll_seconds: float = POLL_SECONDS, clock=time.monotonic):
        self.fs, self.folder = fs, crossings_dir(study, batch_size)
        self.poll_seconds, self.clock = poll_seconds, clock
        self.best: dict[int, int] = {}
        self.listed_at: float | None = None

    def publish(self, trial_id: int, crossings: dict[int, int]) -> None:
        """Record a finished trial's first crossing step of each goal it beat (by index)."""
        for goal, step in crossings.items():
            self.fs.write_bytes(f"{self.folder}/g{goal}-s{step}-t{trial_id}", b"")
            self._note(goal, step)

    def earliest(self) -> dict[int, int]:
        """Goal index -> earliest crossing step known (refreshed from the store when the
        last listing is older than ``poll_seconds``)."""
        now = self.clock()
        if self.listed_at is None or now - self.listed_at >= self.poll_seconds:
            self.listed_at = now
            for name in self.fs.list_files(self.folder):
                match = _NAME.match(name.rsplit("/", 1)[-1])
                if match:
                    self._note(int(match[1]), int(match[2]))
        return dict(self.best)

    def _note(self, goal: int, step: int) -> None:
        if goal not in self.best or step < self.best[goal]:
            self.best[goal] = step
