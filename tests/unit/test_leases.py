"""One writer per trial: the lease protocol of batchscale.store.leases on a local store
(two Leases objects stand for two writers; a pid that no process has stands for a
writer killed with kill -9)."""

from __future__ import annotations

import json
import socket
import time

from batchscale.store.filesystem import open_root
from batchscale.store.leases import Leases, lease_dir

DIRECTORY = lease_dir("study", 16, 3)


def writers(tmp_path, **timing):
    fs = open_root(str(tmp_path))
    said = []
    return fs, Leases(fs, said.append, **timing), Leases(fs, said.append, **timing), said


def test_a_held_lease_is_not_taken_and_a_given_back_one_is(tmp_path):
    fs, a, b, _ = writers(tmp_path)
    assert a.acquire(DIRECTORY) and a.acquire(DIRECTORY)  # taking it again: still ours
    assert not b.acquire(DIRECTORY)
    assert b.holder(DIRECTORY) == a.owner
    a.release(DIRECTORY)
    assert fs.list_files(DIRECTORY) == [] and b.holder(DIRECTORY) is None
    assert b.acquire(DIRECTORY)
    assert not a.acquire(DIRECTORY)


def test_an_expired_lease_is_taken_over_and_its_old_holder_learns_it(tmp_path):
    fs, a, b, said = writers(tmp_path, lease_seconds=0.3, renew_seconds=60)
    assert a.acquire(DIRECTORY)
    a.renew()  # renewed in time: still held
    assert not b.acquire(DIRECTORY)
    time.sleep(0.4)  # a stopped renewing (stalled, cut off)
    assert b.acquire(DIRECTORY)
    assert fs.list_files(DIRECTORY) == ["0.json", "1.json"]  # the next epoch, created once
    a.renew()
    assert DIRECTORY not in a.held
    assert any(line.startswith(f"lease of {DIRECTORY} lost to {b.owner}") for line in said)
    b.release(DIRECTORY)
    assert fs.list_files(DIRECTORY) == []


def test_a_dead_writer_on_this_machine_is_recognised_at_once(tmp_path):
    fs, a, _, _ = writers(tmp_path)
    gone = {"owner": "x:4194303:dead", "host": socket.gethostname(), "pid": 4194303,
            "expires": time.time() + 3600}  # above Linux's pid_max: no such process
    fs.write_text(f"{DIRECTORY}/0.json", json.dumps(gone))
    assert a.holder(DIRECTORY) is None
    assert a.acquire(DIRECTORY) and a.held[DIRECTORY] == 1


def test_a_writer_on_another_machine_holds_until_its_lease_expires(tmp_path):
    fs, a, _, _ = writers(tmp_path)
    other = {"owner": "pod-7:1:x", "host": "pod-7", "pid": 1, "expires": time.time() + 3600}
    fs.write_text(f"{DIRECTORY}/0.json", json.dumps(other))
    assert not a.acquire(DIRECTORY) and a.holder(DIRECTORY) == "pod-7:1:x"
    fs.write_text(f"{DIRECTORY}/0.json", json.dumps({**other, "expires": time.time() - 1}))
    assert a.acquire(DIRECTORY)


def test_renewal_runs_in_the_background_and_stops_with_release_all(tmp_path):
    fs, a, _, _ = writers(tmp_path, lease_seconds=5, renew_seconds=0.05)
    assert a.acquire(DIRECTORY)
    first = json.loads(fs.read_text(f"{DIRECTORY}/0.json"))["expires"]
    time.sleep(0.3)
    assert json.loads(fs.read_text(f"{DIRECTORY}/0.json"))["expires"] > first
    a.release_all()
    assert fs.list_files(DIRECTORY) == [] and a.held == {}


def test_a_renewal_under_way_never_writes_a_released_lease_back(tmp_path):
    """release() while the renewal thread is writing the same lease: the renewal finishes
    first and the release then deletes, never the other way round (a CI run once found the
    lease file back after release_all)."""
    import threading

    fs, a, _, _ = writers(tmp_path, lease_seconds=5, renew_seconds=3600)  # renewed by hand
    assert a.acquire(DIRECTORY)
    writing, go = threading.Event(), threading.Event()
    write = fs.write_bytes

    def slow_write(path, data):
        writing.set()
        go.wait(5)
        write(path, data)

    fs.write_bytes = slow_write
    renewal = threading.Thread(target=a.renew)
    renewal.start()
    assert writing.wait(5)
    release = threading.Thread(target=a.release, args=(DIRECTORY,))
    release.start()
    time.sleep(0.2)  # the release is now waiting for the renewal's write, or (the bug) done
    go.set()
    renewal.join(5)
    release.join(5)
    assert fs.list_files(DIRECTORY) == [] and a.held == {}
