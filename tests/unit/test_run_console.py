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
        "[      3s] training: trials 1/4 done, 1 running | best steps per batch size 16:- 128:-",
        "[      9s] training: trials 2/4 done, 1 running | best steps per batch size 16:40 128:- | ETA 12s",
        "[     10s] task train-pack failed: ValueError: x; log: /l.log",
        "[     12s] analysing: trials 2/4 done, 1 running | best steps per batch size 16:40 128:- | ETA 12s",
    ]


def test_a_terminal_gets_a_live_bar_with_lasting_lines_above_it():
    out = io.StringIO()
    console = RunConsole(live=True, stream=out)
    console.status(3, "preparing data", _progress(0))
    console.status(9, "training", _progress(2, best=40, eta=130))
    console.say(10, "store reachable again after 12s")
    console.close()
    text = out.getvalue()
    assert "training" in text and "2/4 done, 1 running" in text and "ETA 2m10s" in text
    assert "[      9s] best steps per batch size 16:40 128:-" in text  # kept above the bar
    assert "[     10s] store reachable again after 12s" in text
    assert "\x1b[" in text  # drawn by rich, not as plain lines
