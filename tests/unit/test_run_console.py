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


def test_the_console_says_how_many_trials_resumed_and_were_re_used(tmp_path):
    """A re-run: trial 16/1 finished in an earlier run (re-used), trial 16/2 resumes from
    the checkpoint that run left. The line is the trainer's own (TrialLife.start, as a pack
    task prints it into the kfp log); the count shows in the status and in the last line."""
    from batchscale.cli.run_console import RunWatch, picked_up_line
    from batchscale.pipelines.progress import ProgressTracker
    from batchscale.search.trials import make_trials
    from batchscale.store.checkpoints import write_checkpoint
    from batchscale.store.layout import StudyStore
    from batchscale.training.trial_lifecycle import TrialLife
    from batchscale.validation import parse_spec
    from tests.conftest import tiny_spec_dict

    spec = parse_spec(tiny_spec_dict(str(tmp_path / "store")))
    store = StudyStore(spec.store)
    first, second = make_trials(spec)[:2]
    store.write_metadata(spec, first, {"trial_id": 1, "status": "COMPLETE", "parameters": first.parameters})
    store.write_measurements(spec, first, [{"step": 0, "val/classification_error": 0.9}])
    write_checkpoint(store, spec, second, {}, {"step": 40, "rows": []})
    printed = []
    TrialLife(store, spec, second, dict(second.parameters), {"status": "INCOMPLETE"}, printed.append).start()
    assert printed == ["trial 16/2: resumed from its checkpoint at step 40"]

    log = tmp_path / "run.log"
    log.write_text("00:00:01.000 - INFO - Executing task \x1b[96m'train-pack'\x1b[0m\n"
                   + "".join(f"    {line}\n" for line in printed))
    out = io.StringIO()
    watch = RunWatch(spec, store, str(log), RunConsole(live=False, stream=out), started=0.0)
    tracker = ProgressTracker(spec, store)
    watch.log_events()
    watch.poll(tracker)
    assert out.getvalue().split("] ", 1)[1].startswith(
        "training: trials 1/4 done (1 re-used), 1 resumed from checkpoints, 1 in progress | ")
    final = watch.with_resumed(tracker.poll())
    assert picked_up_line(final) == "resumed 1 trial from checkpoints, re-used 1 finished trial"
    assert picked_up_line(Progress(4, 4, 0, {}, reused=0, resumed=0)) is None
    assert picked_up_line(Progress(4, 4, 0, {}, reused=0, resumed=3)) == "resumed 3 trials from checkpoints"


def test_the_live_bar_fits_80_columns_with_every_count_and_what_the_eta_includes():
    import re

    out = io.StringIO()
    console = RunConsole(live=True, stream=out)  # rich's console: 80 columns on a StringIO
    console.status(37, "training (round 2 of up to 3)", Progress(
        9, 18, 4, {16: None}, added=9, running=6, eta_seconds=107, later=7.2, reused=4, resumed=1))
    console.close()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    assert max(len(piece) for piece in re.split(r"[\r\n]", text)) <= 80
    words = " ".join(text.split())
    assert "ETA 1m47s" in words
    assert ("9/18 done (4 re-used), 4 diverged, 9 added by later rounds, 1 resumed from checkpoints, "
            "6 in progress; ETA incl. ~7 trials later rounds may add") in words
