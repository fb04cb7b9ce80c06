"""Reading kfp.local's task log as it grows: phases, unreachable hosts (once each), failed
tasks with their last exception, whole lines only. The lines are kfp.local 2.17's and
urllib3's, as a ``run --local`` of fashion_mnist without network wrote them."""

from batchscale.pipelines.task_log import TaskLog, phase_of

START = "00:14:25.637 - INFO - Executing task \x1b[96m'{}'\x1b[0m\n"
RETRY = ("    [KFP Executor 2026-11-25 00:14:28,261 WARNING]: Retrying (Retry(total=4, connect=None, "
         "read=None, redirect=None, status=None)) after connection broken by 'NameResolutionError("
         "\"HTTPConnection(host='{}', port=80): Failed to resolve '{}' ([Errno -3] Temporary "
         "failure in name resolution)\")': /t10k-images-idx3-ubyte.gz\n")
FAILED = "00:16:01.002 - ERROR - Task \x1b[96m'{}'\x1b[0m finished with status \x1b[91mFAILURE\x1b[0m\n"


def test_phases_network_and_failures(tmp_path):
    path = tmp_path / "run.log"
    log = TaskLog(str(path))
    assert log.read() == []  # no file yet
    host = "fashion-mnist.s3-website.eu-central-1.amazonaws.com"
    with open(path, "w") as fh:
        fh.write(START.format("prepare-data"))
        fh.write("    Dl Completed...:   0%|          | 0/1 [00:00<?, ? url/s]\r")  # a tqdm redraw
        fh.write(RETRY.format(host, host) * 3)  # the same host again: said once
        fh.write("    ValueError: first\n    urllib3.exceptions.MaxRetryError: gave up\n")
        fh.write(FAILED.format("prepare-data"))
        fh.write(START.format("aggregate")[:-12])  # cut mid-line: nothing until the line is whole
    events = log.read()
    assert [(e.kind, e.task) for e in events] == [("task", "prepare-data"), ("network", "prepare-data"),
                                                  ("failed", "prepare-data")]
    assert events[1].detail == f"{host} (Temporary failure in name resolution)"
    assert events[2].detail == "MaxRetryError: gave up"  # the last exception before the failure
    with open(path, "a") as fh:
        fh.write(START.format("aggregate")[-12:])
    assert [(e.kind, e.task) for e in log.read()] == [("task", "aggregate")]
    assert log.read() == []


def test_a_new_task_forgets_the_last_tasks_exception(tmp_path):
    path = tmp_path / "run.log"
    path.write_text("    KeyError: old\n" + START.format("train-pack") + FAILED.format("train-pack"))
    [_, failed] = TaskLog(str(path)).read()
    assert failed.detail == ""


def test_phase_names():
    assert [phase_of(t) for t in ("prepare-data", "plan-round", "train-pack", "aggregate")] == [
        "preparing data", "planning", "training", "analysing"]
    assert phase_of("new-task") == "new task"


def test_a_trial_resumed_from_its_checkpoint_is_an_event(tmp_path):
    """The trainer's own line (training.trial_lifecycle, as a pack task prints it into the
    kfp log) names the trial; a trial starting afresh is no event."""
    path = tmp_path / "run.log"
    path.write_text(START.format("train-pack-2") + "trial 16/3: resumed from its checkpoint at step 40\n"
                    "trial 16/4: starts at step 0\n"
                    "    [KFP Executor] trial 128/1: resumed from its checkpoint at step 0\n")
    events = TaskLog(str(path)).read()
    assert [(e.kind, e.task, e.detail) for e in events] == [
        ("task", "train-pack", ""), ("resumed", "train-pack", "16/3"), ("resumed", "train-pack", "128/1")]


SUCCESS = "00:16:02.002 - INFO - Task \x1b[96m'{}'\x1b[0m finished with status \x1b[92mSUCCESS\x1b[0m\n"


def test_a_lane_starting_while_another_runs_keeps_the_others_error(tmp_path):
    """kfp.local runs a loop's iterations (a study's lanes) at once, their lines interleaved:
    a lane that starts after another printed its error, and prints a warning of its own,
    leaves the failed lane's reason as its error line (as a CI run of the failed-pack test
    showed, when the reason came out as the other lane's ``warnings.warn(``)."""
    path = tmp_path / "run.log"
    path.write_text(START.format("train-pack")
                    + "            FileExistsError: [Errno 17] File exists: '/s/128/2'\n"
                    + "            LaneFailedError: 1 of 2 packs failed: b128-t2 (FileExistsError)\n"
                    + START.format("train-pack")
                    + "            /x/y.py:3: UserWarning: something\n            warnings.warn(\n"
                    + FAILED.format("train-pack") + SUCCESS.format("train-pack")
                    + "    ValueError: printed after both lanes finished\n"
                    + START.format("aggregate") + FAILED.format("aggregate"))
    events = [e for e in TaskLog(str(path)).read() if e.kind == "failed"]
    assert [(e.task, e.detail) for e in events] == [
        ("train-pack", "LaneFailedError: 1 of 2 packs failed: b128-t2 (FileExistsError)"),
        ("aggregate", "")]  # nothing ran when it started: the lanes' lines are not its own
