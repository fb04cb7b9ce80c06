"""The console of ``batchscale run --local`` while the pipeline runs.

On a terminal, a live progress bar drawn by rich: the phase (preparing data, training,
analysing ...), trials done out of those known, how many diverged and run now, elapsed
time and an ETA from the rates measured in this run (counting the trials later search
rounds will likely add, ``rounds.expected``), with the lines worth keeping
(best steps per batch size as they improve, a task that failed, a host that cannot be
reached, trials that wait on another writer's lease) printed above it. Anywhere else (a
pipe, a CI log, a file) the same facts as plain lines, one per change, each stamped with
the seconds since the run started: a live bar would only fill a log with redraws.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import time

from batchscale.core.spec import StudySpec
from batchscale.pipelines.progress import Progress

# A pack's ``lease:`` lines (``training.packs.WaitNotice``, ``store.leases``), "lease: " cut off.
WAITS = re.compile(r"^trials? ([\d/, ]+) waits? on another writer \((.*)\); taken over by (\d\d:\d\d:\d\d)")
TAKEN = re.compile(r"^trial (\d+/\d+) taken over from ")
STALE_SECONDS = 15.0  # a wait past its time by this much, never said again, is over

OFFLINE_HINT = ("without network, prepare the data set where there is one or choose one that "
                "ships offline (`batchscale workloads` lists their sources)")


class RunConsole:
    """Where progress and events go; ``live`` defaults to whether stdout is a terminal."""

    def __init__(self, live: bool | None = None, stream=None):
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self.last_line = ""
        self.last_best = ""
        self.bar = None
        if self.live:
            self.bar = _two_line_bar(self.stream)
            self.task = self.bar.add_task("starting", total=None, detail="", eta="")
            self.bar.start()

    def status(self, elapsed: float, phase: str, progress: Progress) -> None:
        """The study's state after a poll: redrawn on a terminal, a line when it changed."""
        line = f"{phase}: {progress.line()}"
        if self.bar is not None:
            later = progress.eta_later()
            self.bar.update(self.task, description=phase, completed=progress.done,
                            total=progress.total or None, eta=progress.eta_time(),
                            detail=progress.counts() + (f"; ETA {later}" if later else ""))
            best = progress.best()
            if best != self.last_best and any(s is not None for s in progress.best_steps.values()):
                self.say(elapsed, f"best steps per batch size {best}")
            self.last_best = best
        elif line != self.last_line:
            eta = progress.eta()
            self._print(f"[{elapsed:7.0f}s] {line}" + (f" | {eta}" if eta else ""))
        self.last_line = line

    def say(self, elapsed: float, text: str) -> None:
        """One line that stays: printed above the bar on a terminal."""
        self._print(f"[{elapsed:7.0f}s] {text}")

    def _print(self, text: str) -> None:
        if self.bar is not None:
            self.bar.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            print(text, file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def _two_line_bar(stream):
    """rich's live bar on two lines: the phase, the bar, the elapsed time and the ETA, then
    the counts (and what the ETA includes), which wrap. On one line, as before, an
    80-column terminal cut the counts and the ETA short."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.text import Text

    class TwoLines(Progress):
        def get_renderables(self):
            yield self.make_tasks_table(self.tasks)
            for task in self.tasks:
                if task.fields.get("detail"):
                    yield Text("  " + task.fields["detail"])

    return TwoLines(TextColumn("[bold]{task.description}"), BarColumn(), TimeElapsedColumn(),
                    TextColumn("{task.fields[eta]}"),
                    console=Console(file=stream, force_terminal=True, highlight=False),
                    refresh_per_second=4)


class RunWatch:
    """One poll of the run: what the task log says (phase, an unreachable host, a failed
    task: each said once, at once) and what the store says (trials done, best steps)."""

    def __init__(self, spec: StudySpec, store, log_path: str, console, started: float):
        from batchscale.pipelines.task_log import TaskLog

        self.spec, self.store, self.log_path, self.console = spec, store, log_path, console
        self.started = started
        self.task_log = TaskLog(log_path)
        self.phase, self.rounds = "starting", 0
        self.outage: float | None = None  # when the store was first found unreachable
        self.resumed: set[str] = set()  # BATCH/ID of the trials resumed from checkpoints
        self.waits = WriterWaits()

    def elapsed(self) -> float:
        return time.time() - self.started

    def log_events(self) -> None:
        from batchscale.pipelines.task_log import PLANNING_TASKS, TRAINING_TASKS, phase_of

        for event in self.task_log.read():
            if event.kind == "task":
                self.rounds += event.task in PLANNING_TASKS
                self.phase = phase_of(event.task)
                if event.task in PLANNING_TASKS + TRAINING_TASKS and self.spec.max_rounds > 1:
                    self.phase += f" (round {max(self.rounds, 1)} of up to {self.spec.max_rounds})"
            elif event.kind == "network":
                hint = f"; {OFFLINE_HINT}" if event.task == "prepare-data" else ""
                self.console.say(self.elapsed(), (
                    f"{phase_of(event.task) if event.task else self.phase}: cannot reach "
                    f"{event.detail}; the task keeps retrying (Ctrl-C stops the run){hint}; "
                    f"log: {self.log_path}"))
            elif event.kind == "resumed":
                self.resumed.add(event.detail)
                self.waits.drop([event.detail])
            elif event.kind == "lease" and (said := self.waits.read(event.detail)):
                phase = phase_of(event.task) if event.task else self.phase
                self.console.say(self.elapsed(), f"{phase}: {said}")
            elif event.kind == "failed":
                self.console.say(self.elapsed(), (
                    f"task {event.task} failed: {event.detail or 'see the log'}; "
                    f"log: {self.log_path}"))

    def poll(self, tracker) -> None:
        from batchscale.store.gcs_storage import retry_seconds_setting

        try:
            progress = tracker.poll()
        except (ValueError, KeyError):  # a file being replaced: read it next poll
            return
        except Exception as err:  # unreachable (connection refused, timeouts, 5xx)
            if self.outage is None:
                self.outage = time.time()
                self.console.say(self.elapsed(), (
                    f"store {self.store.url()} unreachable ({type(err).__name__}); the run "
                    f"keeps retrying each call for up to {retry_seconds_setting():.0f}s"))
            return
        if self.outage is not None:
            self.console.say(self.elapsed(),
                             f"store reachable again after {time.time() - self.outage:.0f}s")
            self.outage = None
        self.waits.drop(f"{b}/{i}" for b, done in tracker.results.items() for i in done)
        self.console.status(self.elapsed(), self.phase, self.with_resumed(progress))

    def with_resumed(self, progress: Progress) -> Progress:
        """``progress`` with what only the task log knows: the count of trials resumed, and
        of those waiting on another writer (and until when at the latest)."""
        waiting, until = self.waits.now()
        return dataclasses.replace(progress, resumed=len(self.resumed), waiting=waiting,
                                   waiting_until=until)


class WriterWaits:
    """The trials this run's packs leave to another writer that holds their leases, from
    the packs' ``lease:`` lines: ``read`` returns what the console says (a trial starts
    waiting on a writer, is taken over, a lease file is malformed; a wait said again
    with a later time is not news), ``now`` the count and the latest time for the
    progress line. A wait ends when its trial is taken over, resumed or finished, or
    ``STALE_SECONDS`` after its time if no pack said it again."""

    def __init__(self, clock=time.time):
        self.clock = clock
        self.waiting: dict[str, tuple[str, float, str]] = {}  # B/ID -> (writer, until, "HH:MM:SS")

    def read(self, detail: str) -> str | None:
        if match := WAITS.match(detail):
            names = [name.strip() for name in match[1].split(",")]
            news = any(self.waiting.get(name, ("",))[0] != match[2] for name in names)
            until = clock_time(match[3], self.clock())
            self.waiting.update((name, (match[2], until, match[3])) for name in names)
            return detail if news else None
        if match := TAKEN.match(detail):
            self.drop([match[1]])
        return detail

    def drop(self, names) -> None:
        for name in names:
            self.waiting.pop(name, None)

    def now(self) -> tuple[int, str]:
        """How many trials wait now, and the latest time one is taken over by ("": none)."""
        stale = self.clock() - STALE_SECONDS
        self.waiting = {name: wait for name, wait in self.waiting.items() if wait[1] >= stale}
        if not self.waiting:
            return 0, ""
        return len(self.waiting), max(self.waiting.values(), key=lambda wait: wait[1])[2]


def clock_time(hhmmss: str, now: float) -> float:
    """The time ``HH:MM:SS`` (this machine's local time) nearest to ``now``."""
    hour, minute, second = (int(part) for part in hhmmss.split(":"))
    day = time.localtime(now)
    at = time.mktime((day.tm_year, day.tm_mon, day.tm_mday, hour, minute, second, 0, 0, -1))
    return min((at - 86400, at, at + 86400), key=lambda t: abs(t - now))


def picked_up_line(progress: Progress) -> str | None:
    """``resumed 5 trials from checkpoints, re-used 12 finished trials``: what a run took
    over from an earlier one, said once at its end (None: nothing, a fresh study)."""
    parts = [f"resumed {progress.resumed} trial{'s' if progress.resumed != 1 else ''} from "
             "checkpoints" if progress.resumed else "",
             f"re-used {progress.reused} finished trial{'s' if progress.reused != 1 else ''}"
             if progress.reused else ""]
    return ", ".join(p for p in parts if p) or None
