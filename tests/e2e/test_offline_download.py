"""A study whose data set must be downloaded, run where there is no network: the console
says so in one line, with the log file's path, within seconds of the first failed
connection (tensorflow-datasets itself keeps retrying for minutes).

"No network" is made, not assumed: the run is started in a network namespace of its own
(``unshare -n``: only a loopback device, down), so the test means the same on a machine
that has network. Where unshare is missing or not permitted (not root), it is skipped
(it fails in CI: tests/system_tools.py).
"""

import os
import re
import selectors
import signal
import subprocess
import sys
import time
from datetime import datetime

from batchscale.pipelines.task_log import NETWORK
from tests.system_tools import missing, program

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOG_STAMP = re.compile(r"\[KFP Executor (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})")


def _need_unshare() -> None:
    """``unshare -n`` that works here (util-linux, and the right to make a network
    namespace: root), else a skip (a failure in CI: tests/system_tools.py)."""
    how = "apt-get install util-linux, and run the tests as root"
    unshare = program("unshare", what="`unshare -n` (util-linux)", how=how)
    if subprocess.run([unshare, "-n", "true"], capture_output=True).returncode != 0:
        missing("`unshare -n` permitted (a network namespace of its own)", how)


def test_a_download_without_network_is_said_in_one_line_within_seconds(tmp_path):
    _need_unshare()
    command = ["unshare", "-n", sys.executable, "-m", "batchscale.cli", "run", "--local",
               "--dataset", "mnist", "--store", str(tmp_path / "store")]
    env = {**os.environ, "PYTHONPATH": ROOT, "PYTHONUNBUFFERED": "1",
           "TFDS_DATA_DIR": str(tmp_path / "tfds")}  # no cached download to fall back on
    child = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines, said, seen_at = [], None, None
    selector = selectors.DefaultSelector()
    selector.register(child.stdout, selectors.EVENT_READ)
    deadline = time.time() + 120
    try:
        while said is None and time.time() < deadline and child.poll() is None:
            if selector.select(timeout=1):
                line = child.stdout.readline()
                lines.append(line)
                if "cannot reach" in line:
                    said, seen_at = line, datetime.now()
    finally:
        os.killpg(child.pid, signal.SIGTERM)  # the CLI stops its pipeline, as on Ctrl-C
        child.wait(timeout=60)
    assert said is not None, "".join(lines)[-3000:]
    log_path = next(x.split("kfp task logs: ", 1)[1].strip() for x in lines if "kfp task logs: " in x)
    assert said.count("\n") == 1 and "preparing data: cannot reach " in said
    assert f"log: {log_path}" in said and "ships offline" in said
    # within 10 s of the first failed connection the task logged
    log = open(log_path, errors="replace").read()
    first = next(x for x in log.splitlines() if NETWORK.search(x) and LOG_STAMP.search(x))
    failed_at = datetime.strptime(LOG_STAMP.search(first).group(1), "%Y-%m-%d %H:%M:%S,%f")
    delay = (seen_at - failed_at).total_seconds()
    print(f"console line {delay:.1f}s after the first failed connection")
    assert 0 <= delay < 10, delay
