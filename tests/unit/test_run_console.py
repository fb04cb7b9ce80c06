"""run --local's console: a line per change where stdout is no terminal; rich's live bar
(phase, counts, ETA) with lasting lines above it on a terminal."""

import io

from batchscale.cli.run_console import RunConsole
from batchscale.pipelines.progress import Progress


def _progress(done, best=None, eta=None):
    return Progress(done, 4, 0, {16: best, 128: None}, running=1, eta_seconds=eta)


def test_plain_lines_only_when_something_changed():
    out = io.StringIO()
    console = RunConsole(live=False, stream=out)
    console.status(3, "training", _progress(1))
    console.status(6, "training", _progress(1, eta=20))  # only the ETA moved: no line
    console.status(9, "training", _progress(2, best=40, eta=12))
    console.say(10, "task train-pack failed: ValueError: x; log: /l.log")
    console.status(12, "analysing", _progress(2, best=40, eta=12))
    lines = out.getvalue().splitlines()
    assert lines == [
        "[      3s] training: trials 1/4 done, 1 in progress | best steps per batch size 16:- 128:-",
        "[      9s] training: trials 2/4 done, 1 in progress | best steps per batch size 16:40 128:-"
        " | ETA 12s",
        "[     10s] task train-pack failed: ValueError: x; log: /l.log",
        "[     12s] analysing: trials 2/4 done, 1 in progress | best steps per batch size 16:40 128:-"
        " | ETA 12s",
    ]


def test_a_terminal_gets_a_live_bar_with_lasting_lines_above_it():
    out = io.StringIO()
    console = RunConsole(live=True, stream=out)
    console.status(3, "preparing data", _progress(0))
    console.status(9, "training", _progress(2, best=40, eta=130))
    console.say(10, "store reachable again after 12s")
    console.close()
    text = out.getvalue()
    assert "training" in text and "2/4 done, 1 in progress" in text and "ETA 2m10s" in text
    assert "[      9s] best steps per batch size 16:40 128:-" in text  # kept above the bar
    assert "[     10s] store reachable again after 12s" in text
    assert "\x1b[" in text  # drawn by rich, not as plain lines


def test_the_watch_names_the_phase_and_round_and_says_a_failure_at_once(tmp_path):
    """RunWatch joins the task log (phase, failures) and the store (counts) into the lines."""
    from batchscale.cli.run_console import RunWatch
    from batchscale.pipelines.progress import ProgressTracker
    from batchscale.store.layout import StudyStore
    from batchscale.validation import parse_spec
    from tests.conftest import tiny_spec_dict

    spec = parse_spec(tiny_spec_dict(str(tmp_path / "store"), max_rounds=3))
    store = StudyStore(spec.store)
    log = tmp_path / "run.log"
    out = io.StringIO()
    watch = RunWatch(spec, store, str(log), RunConsole(live=False, stream=out), started=0.0)
    tracker = ProgressTracker(spec, store)
    start = "00:00:01.000 - INFO - Executing task \x1b[96m'{}'\x1b[0m\n"
    log.write_text(start.format("prepare-data"))
    watch.log_events()
    watch.poll(tracker)
    with open(log, "a") as fh:
        # the compiler numbers a component's copies (one per round): plan-round-2, train-pack-2
        fh.write(start.format("plan-round") + start.format("train-pack") + start.format("plan-round-2")
                 + start.format("train-pack-2"))
        fh.write("    OSError: [Errno 28] No space left on device\n")
        fh.write("00:00:09.000 - ERROR - Task \x1b[96m'train-pack-2'\x1b[0m finished with status "
                 "\x1b[91mFAILURE\x1b[0m\n")
    watch.log_events()
    watch.poll(tracker)
    lines = [line.split("] ", 1)[1] for line in out.getvalue().splitlines()]
    assert lines[0].startswith("preparing data: trials 0/4 done")
    assert lines[1] == f"task train-pack failed: OSError: [Errno 28] No space left on device; log: {log}"
    assert lines[2].startswith("training (round 2 of up to 3): trials 0/4 done")
