"""What kfp.local's task log says as it grows, for ``run --local``'s console: which task
runs (the study's phase), a task that cannot reach the network, a task that failed.

``batchscale run --local`` sends kfp.local's output (every task's own output streamed into
it) to a log file and keeps the console for progress. The store tells how many trials
are done; only this log tells that the study is still preparing its data, or that a
download is retrying against a network that is not there (tensorflow-datasets retries
for minutes, silently on the console) or that a task just failed, before the pipeline
as a whole gives up. ``TaskLog.read`` returns what is new since its last call.

kfp.local runs the iterations of a loop at once (a study's pack lanes), their output
interleaved line by line, so the log cannot say which line is whose. The reason given for a
failed task is the last error line since the log last showed no task running: a lane that
starts while another runs does not wipe the other's error.

A failed task's reason is one line, the last of these its output shows: an exception line
(``ValueError: ...``), or the shell's line for a process a signal ended (``Killed``: SIGKILL,
the kernel's out-of-memory killer or a ``kill -9``; ``Segmentation fault``, ...); a task
that showed neither is named with its last line of output.

The lines read are kfp.local 2.17's: ``Executing task 'NAME'`` and ``Task 'NAME' finished
with status FAILURE`` (ANSI colours stripped), urllib3/requests/socket error texts, the
shell's signal lines (each kfp task runs under ``sh -ec``), and
the trainer's ``trial B/ID: resumed from its checkpoint at step S``
(``training.trial_lifecycle``), which only the log tells: the store shows a resumed trial
as one more unfinished trial.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
SUFFIX = re.compile(r"-\d+$")
STARTED = re.compile(r"Executing task '([a-z0-9-]+)'")
FINISHED = re.compile(r"Task '([a-z0-9-]+)' finished with status ([A-Z]+)")
EXCEPTION = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception)): (.+)$")
# A connection that cannot be made, and the host it was for.
NETWORK = re.compile(r"(NameResolutionError|Failed to resolve|Temporary failure in name resolution|"
                     r"Name or service not known|Network is unreachable|No route to host|"
                     r"Connection refused|Max retries exceeded|urlopen error)")
# What ``sh`` prints for a child a signal ended, and what each means.
SIGNAL_LINE = re.compile(r"^\s*(Killed|Terminated|Segmentation fault|Aborted|Bus error|"
                         r"Illegal instruction)( \(core dumped\))?\s*$")
SIGNALS = {"Killed": "SIGKILL: out of memory, or kill -9", "Terminated": "SIGTERM",
           "Segmentation fault": "SIGSEGV: a crash in native code", "Aborted": "SIGABRT",
           "Bus error": "SIGBUS", "Illegal instruction": "SIGILL"}
# Lines that are kfp's own, not a task's output: its logger, its executor's, its rules.
KFP_LINE = re.compile(r"^\s*(\d\d:\d\d:\d\d\.\d+ - [A-Z]+ - |\[KFP Executor|-{20,}\s*$)")
RESUMED = re.compile(r"\btrial (\d+)/(\d+): resumed from its checkpoint at step (\d+)")
LEASE = re.compile(r"^\s*lease: (.+)$")  # a pack's waits on other writers (store.leases)
HOST = re.compile(r"(?:host='|Failed to resolve ')([^':]+)")
REASON = re.compile(r"\(\[Errno -?\d+\] ([^)\]]+)\)|\[Errno -?\d+\] ([^'\")\]]+)")

# The pipeline's tasks (component names as kfp.local logs them) and the phase each is.
PHASES = {"prepare-data": "preparing data", "plan-round": "planning",
          "train-pack": "training", "aggregate": "analysing",
          # an experiment's (pipelines.experiment)
          "prepare-experiment-data": "preparing data", "plan-experiment-round": "planning",
          "train-experiment-pack": "training", "compare-experiment": "analysing and comparing"}
PLANNING_TASKS = ("plan-round", "plan-experiment-round")  # one per search round
TRAINING_TASKS = ("train-pack", "train-experiment-pack")


@dataclass(frozen=True)
class LogEvent:
    """``kind``: "task" (``task`` started), "network" (``detail``: host and reason),
    "failed" (``task`` failed; ``detail``: why, in one line: its last exception or signal
    line, else ``no error line; its last output: ...``, or "" when it printed nothing),
    "resumed" (a trial resumed from its checkpoint; ``detail``: ``BATCH_SIZE/TRIAL_ID``) or
    "lease" (a ``lease: `` line of a pack about other writers' leases; ``detail``: the rest).
    ``task`` is the component's name, without the compiler's copy number."""

    kind: str
    task: str = ""
    detail: str = ""


class TaskLog:
    """Follows one log file from where the last ``read`` stopped (whole lines only)."""

    def __init__(self, path: str):
        self.path = path
        self.offset = 0
        self.partial = ""
        self.task = ""  # the task that started last (the study's phase)
        self.running = 0  # tasks started and not yet finished (lanes run at once)
        self.last_exception = ""  # the last exception or signal line of the task
        self.last_output = ""  # the task's last line of output
        self.unreachable: set[str] = set()  # hosts already reported

    def read(self) -> list[LogEvent]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return []
        self.offset += len(data)
        text = self.partial + data.decode("utf-8", errors="replace")
        # tqdm bars in tasks' output end lines with '\r': count them as line ends too
        lines = re.split(r"\r\n|\r|\n", text)
        self.partial = lines.pop()
        return self.feed(lines)

    def feed(self, lines: list[str]) -> list[LogEvent]:
        """The events in these whole lines of the log, in order."""
        events = []
        for line in lines:
            event = self._classify(ANSI.sub("", line))
            if event is not None:
                events.append(event)
        return events

    def _classify(self, line: str) -> LogEvent | None:
        if match := STARTED.search(line):
            if not self.running:  # nothing else runs: what came before is another task's
                self.last_exception, self.last_output = "", ""
            self.task, self.running = component(match.group(1)), self.running + 1
            return LogEvent("task", self.task)
        if match := FINISHED.search(line):
            self.running = max(0, self.running - 1)
            if match.group(2) == "FAILURE":
                return LogEvent("failed", component(match.group(1)), self._why())
            return None
        if match := SIGNAL_LINE.match(line):
            self.last_exception = f"{match.group(1)} ({SIGNALS[match.group(1)]})"
        elif line.strip() and not KFP_LINE.match(line):
            self.last_output = line.strip()
        if match := RESUMED.search(line):
            return LogEvent("resumed", self.task, f"{match.group(1)}/{match.group(2)}")
        if match := LEASE.match(line):
            return LogEvent("lease", self.task, match.group(1).strip())
        if match := EXCEPTION.match(line):
            self.last_exception = f"{match.group(1).rsplit('.', 1)[-1]}: {match.group(2).strip()}"
        if NETWORK.search(line):
            host = HOST.search(line)
            name = host.group(1) if host else "a remote host"
            if name in self.unreachable:
                return None
            self.unreachable.add(name)
            reason = REASON.search(line)
            why = (reason.group(1) or reason.group(2)).strip() if reason else NETWORK.search(line).group(1)
            return LogEvent("network", self.task, f"{name} ({why})")
        return None

    def _why(self) -> str:
        if self.last_exception:
            return self.last_exception
        if self.last_output:
            return f"no error line; its last output: {self.last_output[:200]}"
        return ""


def failures(text: str) -> list[LogEvent]:
    """The "failed" events of a whole log's text, in order."""
    log = TaskLog("")
    return [e for e in log.feed(re.split(r"\r\n|\r|\n", text)) if e.kind == "failed"]


def component(task: str) -> str:
    """The component a task runs: the KFP compiler names the copies of a component in a
    pipeline ``train-pack``, ``train-pack-2``, … (one per search round here)."""
    return SUFFIX.sub("", task)


def phase_of(task: str) -> str:
    return PHASES.get(task, task.replace("-", " "))
