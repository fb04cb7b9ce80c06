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

A name is a claim, not a fact: a file copied from another study, written by hand, or left
by a trial since deleted would stop every trial of its batch size. So a board built by
``checked_board`` believes a file another process published only once ``crossing_problem``
finds it true: the trial it names is one of the batch size's planned trials, its
metadata.json says COMPLETE, and its measurements.csv, as its metadata's integrity record
says it was written, first beats that goal at that step. A file that fails is named in one
log line and ignored. Each file is checked once (a metadata.json and a measurements.csv
read) and its verdict kept, except that a trial not finished yet (a budget-stopped trial
continuing to a raised budget) is asked again at later polls.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from batchscale.core.goals import first_step_reaching
from batchscale.core.spec import StudySpec
from batchscale.store.filesystem import Storage
from batchscale.store.json_files import read_json_object
from batchscale.store.layout import StudyStore
from batchscale.store.trial_files import recorded_rows

POLL_SECONDS = 10.0  # how often a pack lists the crossings that others published
_NAME = re.compile(r"^g(\d+)-s(\d+)-t(\d+)$")
NOT_YET = "not finished yet"  # the one verdict asked again at later polls

# (goal index, step, trial id) -> None when the crossing is true, else why not
Check = Callable[[int, int, int], str | None]


def crossings_dir(study: str, batch_size: int) -> str:
    return f"{study}/crossings/{batch_size}"


class CrossingBoard:
    """The earliest known crossing of each goal at one batch size: those published in the
    store (listed at most every ``poll_seconds``; with a ``check``, only those it finds
    true) and those this process published (at once: trials of one pack see each other's
    crossings without waiting)."""

    def __init__(self, fs: Storage, study: str, batch_size: int,
                 poll_seconds: float = POLL_SECONDS, clock=time.monotonic,
                 check: Check | None = None, log=print):
        self.fs, self.folder = fs, crossings_dir(study, batch_size)
        self.poll_seconds, self.clock = poll_seconds, clock
        self.check, self.log = check, log
        self.best: dict[int, int] = {}
        self.listed_at: float | None = None
        self.verdicts: dict[str, str | None] = {}  # file name -> why not believed (None: believed)

    def publish(self, trial_id: int, crossings: dict[int, int]) -> None:
        """Record a finished trial's first crossing step of each goal it beat (by index)."""
        for goal, step in crossings.items():
            name = f"g{goal}-s{step}-t{trial_id}"
            self.fs.write_bytes(f"{self.folder}/{name}", b"")
            self.verdicts[name] = None  # this process just finished the trial: no need to check
            self._note(goal, step)

    def earliest(self) -> dict[int, int]:
        """Goal index -> earliest crossing step known (refreshed from the store when the
        last listing is older than ``poll_seconds``)."""
        now = self.clock()
        if self.listed_at is None or now - self.listed_at >= self.poll_seconds:
            self.listed_at = now
            for name in self.fs.list_files(self.folder):
                if self._believed(name):
                    match = _NAME.match(name)
                    self._note(int(match[1]), int(match[2]))
        return dict(self.best)

    def _believed(self, name: str) -> bool:
        """Whether the file ``name`` is a true crossing, checked once (a trial not finished
        yet is asked again); a file found false is named in one log line, once."""
        if name in self.verdicts and self.verdicts[name] != NOT_YET:
            return self.verdicts[name] is None
        match = _NAME.match(name)
        if match is None:
            why = "is not a crossing's name (g<goal>-s<step>-t<trial id>)"
        elif self.check is None:
            why = None
        else:
            why = self.check(int(match[1]), int(match[2]), int(match[3]))
        if why is not None and name not in self.verdicts:
            self.log(f"crossing {self.fs.url(f'{self.folder}/{name}')} ignored: {why}")
        self.verdicts[name] = why
        return why is None

    def _note(self, goal: int, step: int) -> None:
        if goal not in self.best or step < self.best[goal]:
            self.best[goal] = step


def checked_board(store: StudyStore, spec: StudySpec, batch_size: int, log=print) -> CrossingBoard:
    """The board of ``batch_size`` that believes another process's crossing only when
    ``crossing_problem`` finds it true."""
    return CrossingBoard(store.fs, spec.name, batch_size, log=log,
                         check=lambda goal, step, trial_id: crossing_problem(
                             store, spec, batch_size, goal, step, trial_id))


def crossing_problem(store: StudyStore, spec: StudySpec, batch_size: int, goal: int, step: int,
                     trial_id: int) -> str | None:
    """Why the crossing file ``g<goal>-s<step>-t<trial_id>`` of ``batch_size`` is not true
    (None: it is): a goal the spec does not have, a trial id outside the batch size's
    search rounds, a trial not COMPLETE (``NOT_YET`` while it has no finished record), a
    measurements.csv that is not the one its metadata.json records, or measurements whose
    first step beating the goal is not ``step``."""
    if goal >= len(spec.goals):
        return f"goal {goal}: the study has {len(spec.goals)} goal(s)"
    ids = {i for r in store.read_rounds(spec, batch_size) for i in r.trial_ids}
    if trial_id not in ids:
        return f"trial {trial_id} is not one of batch size {batch_size}'s trials"
    folder = f"{store.batch_dir(spec, batch_size)}/{trial_id}"
    meta, _ = read_json_object(store.fs, f"{folder}/metadata.json")
    status = (meta or {}).get("status")
    if status == "INFEASIBLE":
        return f"trial {trial_id} diverged (INFEASIBLE): its crossings never count"
    if status != "COMPLETE":
        return NOT_YET
    rows, why = recorded_rows(store.fs, folder, batch_size, trial_id)
    if rows is None:
        return f"trial {trial_id}'s measurements.csv {why}"
    first = first_step_reaching(rows, spec.goals[goal])
    if first != step:
        return (f"trial {trial_id}'s measurements first beat {spec.goals[goal].label} at "
                f"{'no step' if first is None else f'step {first}'}, not step {step}")
    return None
