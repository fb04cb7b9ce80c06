"""An unreachable store is visible and survivable (issue 13).

The GCS emulator sits behind a TCP relay that the test takes down (connections refused,
open ones cut) and brings back on the same port: to the google-cloud-storage client in
the pipeline's processes this is a store that is unreachable for a while.

- ``run --local`` on a gs:// store, the store down for OUTAGE seconds while packs train:
  the console says within 10 s that the store is unreachable and that the run retries,
  then that it is back; the run ends with exit 0 and the same steps to result as an
  uninterrupted run.
- A pack whose store stays down longer than its calls retry
  (``BATCHSCALE_STORE_RETRY_SECONDS``) fails; run again once the store is back, it
  finishes with every measurement of an uninterrupted run: nothing was lost.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest
import yaml

from batchscale.search.trials import make_trials
from batchscale.store.layout import StudyStore
from batchscale.training.packs import run_pack
from batchscale.validation import parse_spec
from batchscale.workloads.prepare import prepare_dataset
from tests.conftest import tiny_spec_dict

OUTAGE = float(os.environ.get("BATCHSCALE_TEST_OUTAGE_SECONDS", 12))


class Relay:
    """127.0.0.1:<port> -> the emulator, which ``down()`` makes unreachable and ``up()``
    makes reachable again on the same port."""

    def __init__(self, target: str):
        self.target = target.removeprefix("http://").split(":")
        self.port = None
        self.server = None
        self.conns: list[socket.socket] = []
        self.up()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port or 0))
        server.listen(64)
        self.port, self.server = server.getsockname()[1], server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def down(self) -> None:
        # shutdown() first: on Linux it wakes the thread blocked in accept(), which close()
        # alone does not, and without it the old socket can stay listening (unanswered)
        # on the port that up() binds again
        try:
            self.server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.server.close()
        for conn in self.conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            except OSError:
                pass
        self.conns = []

    def _accept(self, server) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return  # taken down
            upstream = socket.create_connection((self.target[0], int(self.target[1])))
            self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source, sink) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.close()
                except OSError:
                    pass


@pytest.fixture
def relay(gcs_emulator):
    relay = Relay(gcs_emulator["host"])
    yield relay
    relay.down()


def _spec_dict(root: str) -> dict:
    return tiny_spec_dict(root, name="outage", batch_sizes=[16], trials_per_batch_size=3,
                          max_steps=2500, checkpoint_seconds=0.5,
                          goals=[{"metric": "classification_error", "value": 0.03}])


def _histories(spec, store) -> dict:
    out = {}
    for trial in make_trials(spec):
        meta = store.read_metadata(spec, trial)
        rows = [{k: v for k, v in r.items() if k != "wall_time"}
                for r in store.read_measurements(spec, trial)]
        out[trial.trial_id] = (meta["status"], meta["steps"], rows)
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run's histories (a local store: the values do not depend on it)."""
    root = str(tmp_path_factory.mktemp("reference"))
    spec, store = parse_spec(_spec_dict(root)), StudyStore(root)
    prepare_dataset(store, "digits", log=lambda *_: None)
    store.register_study(spec)
    run_pack(spec, make_trials(spec), store, log=lambda *_: None)
    return _histories(spec, store)


def _wait(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _training(spec, store) -> bool:
    try:
        return any((store.read_metadata(spec, t) or {}).get("status") == "INCOMPLETE"
                   for t in make_trials(spec))
    except Exception:
        return False


def test_run_local_says_the_store_is_unreachable_and_survives(relay, gcs_root, tmp_path, reference):
    spec_file = tmp_path / "outage.yaml"
    spec_file.write_text(yaml.safe_dump(_spec_dict(gcs_root)))
    spec, store = parse_spec(_spec_dict(gcs_root)), StudyStore(gcs_root)  # direct, not relayed
    env = {**os.environ, "STORAGE_EMULATOR_HOST": relay.url, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "batchscale.cli", "run", "--local", str(spec_file),
                             "--work-dir", str(tmp_path / "w")], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[tuple[float, str]] = []
    reader = threading.Thread(target=lambda: lines.extend((time.monotonic(), out) for out in proc.stdout),
                              daemon=True)
    reader.start()
    try:
        _wait(lambda: _training(spec, store), 120, "a trial to start training")
        relay.down()
        went_down = time.monotonic()
        time.sleep(OUTAGE)
        relay.up()
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(timeout=10)
    text = "".join(line for _, line in lines)
    assert proc.returncode == 0, text
    said = [(t - went_down, line) for t, line in lines if "unreachable" in line]
    assert said and said[0][0] < 10, text
    assert f"store {gcs_root} unreachable" in said[0][1] and "keeps retrying" in said[0][1]
    assert "store reachable again" in text
    assert _histories(spec, store) == reference


def test_a_longer_outage_fails_the_pack_and_loses_nothing(relay, gcs_root, tmp_path, reference):
    spec, store = parse_spec(_spec_dict(gcs_root)), StudyStore(gcs_root)
    prepare_dataset(store, "digits", log=lambda *_: None)
    store.register_study(spec)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec.to_dict()))
    env = {**os.environ, "STORAGE_EMULATOR_HOST": relay.url, "BATCHSCALE_STORE_RETRY_SECONDS": "3"}

    def pack():
        return subprocess.Popen([sys.executable, "-m", "tests.integration.pack_driver",
                                 str(spec_file), "16", "1"], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    first = pack()
    _wait(lambda: _training(spec, store), 120, "a trial to start training")
    relay.down()
    out, _ = first.communicate(timeout=120)  # its calls give up after 3 s
    assert first.returncode != 0, out
    relay.up()
    again = pack()
    out, _ = again.communicate(timeout=300)
    assert again.returncode == 0, out
    assert _histories(spec, store) == reference
