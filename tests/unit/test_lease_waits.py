"""Waits on another writer, made visible: a pack's ``lease:`` lines (training.packs.WaitNotice
and store.leases' take-over and malformed-file lines) and what run --local's console makes
of them (cli.run_console.WriterWaits through RunWatch: a lasting line when a trial starts
waiting, is taken over or a lease file is malformed; the count and time in the status)."""

from __future__ import annotations

import io
import time

from batchscale.cli.run_console import STALE_SECONDS, RunConsole, RunWatch, WriterWaits, clock_time
from batchscale.core.spec import TrialSpec
from batchscale.store.leases import Holding
from batchscale.training import packs
from batchscale.training.packs import WaitNotice


def _trial(trial_id: int) -> TrialSpec:
    return TrialSpec("tiny", 16, trial_id, {"learning_rate": 0.1})


def _hhmmss(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def test_a_pack_says_which_trials_wait_on_whom_until_when_and_not_every_second(monkeypatch):
    said = []
    notice = WaitNotice(said.append)
    soon, later = time.time() + 100, time.time() + 150
    pod, other = Holding("pod-7:1:x", soon), Holding("pod-9:4:y", later)
    notice.say([(_trial(1), pod), (_trial(2), Holding("pod-7:1:x", later)), (_trial(3), other)])
    assert said == [f"lease: trials 16/1, 16/2 wait on another writer (pod-7:1:x); taken over by "
                    f"{_hhmmss(later)} unless it renews its lease",
                    f"lease: trial 16/3 waits on another writer (pod-9:4:y); taken over by "
                    f"{_hhmmss(later)} unless it renews its lease"]
    notice.say([(_trial(1), pod), (_trial(2), pod), (_trial(3), other)])  # same waits: quiet
    assert len(said) == 2
    notice.say([(_trial(1), pod)])  # fewer trials wait: said at once
    assert said[2:] == [f"lease: trial 16/1 waits on another writer (pod-7:1:x); taken over by "
                        f"{_hhmmss(soon)} unless it renews its lease"]
    monkeypatch.setattr(packs, "WAIT_REPEAT_SECONDS", 0.0)  # the minute has passed: said again
    notice.say([(_trial(1), Holding("pod-7:1:x", later))])
    assert said[3].endswith(f"taken over by {_hhmmss(later)} unless it renews its lease")


def test_the_console_shows_the_waits_until_they_end(tmp_path):
    """The pack's own lines, as kfp.local writes them into the task log, through RunWatch."""
    from batchscale.pipelines.progress import ProgressTracker
    from batchscale.store.layout import StudyStore
    from batchscale.validation import parse_spec
    from tests.conftest import tiny_spec_dict

    spec = parse_spec(tiny_spec_dict(str(tmp_path / "store"), batch_sizes=[16]))
    store = StudyStore(spec.store)
    lines = []
    until = time.time() + 170
    WaitNotice(lines.append).say([(_trial(1), Holding("pod-7:1:x", until)),
                                  (_trial(2), Holding("pod-7:1:x", until))])
    lines.append("lease: lease file /s/tiny/leases/16/3/0.json is malformed (not JSON); treated as expired")
    log = tmp_path / "run.log"
    log.write_text("00:00:01.000 - INFO - Executing task \x1b[96m'train-pack'\x1b[0m\n"
                   + "".join(f"    {line}\n" for line in lines))
    out = io.StringIO()
    watch = RunWatch(spec, store, str(log), RunConsole(live=False, stream=out), started=time.time())
    tracker = ProgressTracker(spec, store)
    watch.log_events()
    watch.poll(tracker)
    shown = [line.split("] ", 1)[1] for line in out.getvalue().splitlines()]
    assert shown == [
        f"training: trials 16/1, 16/2 wait on another writer (pod-7:1:x); taken over by {_hhmmss(until)} "
        "unless it renews its lease",
        "training: lease file /s/tiny/leases/16/3/0.json is malformed (not JSON); treated as expired",
        f"training: trials 0/2 done, 2 waiting on another writer until {_hhmmss(until)} | best steps "
        "per batch size 16:-"]

    with open(log, "a") as fh:  # said again a minute later (not news), then one taken over
        fh.write(f"    {lines[0]}\n    lease: trial 16/1 taken over from pod-7:1:x (expired)\n")
    watch.log_events()
    watch.poll(tracker)
    shown = [line.split("] ", 1)[1] for line in out.getvalue().splitlines()][3:]
    assert shown == ["training: trial 16/1 taken over from pod-7:1:x (expired)",
                     f"training: trials 0/2 done, 1 waiting on another writer until {_hhmmss(until)} | "
                     "best steps per batch size 16:-"]

    second = _trial(2)  # the other writer finished it: no longer waited for
    store.write_metadata(spec, second, {"trial_id": 2, "status": "INFEASIBLE",
                                        "parameters": second.parameters})
    watch.poll(tracker)
    assert out.getvalue().splitlines()[-1].split("] ", 1)[1] == (
        "training: trials 1/2 done, 1 diverged | best steps per batch size 16:-")


def test_a_wait_nobody_repeats_ends_after_its_time():
    now = [1_000_000.0]
    waits = WriterWaits(clock=lambda: now[0])
    until = _hhmmss(now[0] + 30)
    assert waits.read(f"trial 16/4 waits on another writer (w); taken over by {until} unless ...")
    assert waits.now() == (1, until)
    now[0] += 30 + STALE_SECONDS + 1
    assert waits.now() == (0, "")


def test_a_clock_time_is_read_as_the_one_nearest_now():
    now = time.mktime((2026, 11, 27, 0, 0, 5, 0, 0, -1))  # just past midnight
    assert now - clock_time("23:59:59", now) == 6
    assert clock_time("00:03:05", now) - now == 180
