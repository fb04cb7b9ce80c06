"""One writer per trial: the lease protocol of batchscale.store.leases on a local store
(two Leases objects stand for two writers; a pid that no process has stands for a
writer killed with kill -9)."""

from __future__ import annotations

import json
import socket
import time

import pytest

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


# ---- issue 26: a lease binds no longer than LEASE_SECONDS after a reader first saw it ----

FAR_FUTURE = {"owner": "pod-7:1:forged", "host": "pod-7", "pid": 1, "expires": time.time() + 10**9}


def test_a_far_future_lease_of_another_host_is_taken_over_within_the_lease_duration(tmp_path):
    """A forged expiry, or a writer whose clock runs ahead, binds no longer than a dead
    writer's lease: LEASE_SECONDS after this reader first saw the record."""
    fs, a, _, said = writers(tmp_path, lease_seconds=1.0, renew_seconds=60)
    fs.write_text(f"{DIRECTORY}/0.json", json.dumps(FAR_FUTURE))
    first = time.time()
    holding = a.holding(DIRECTORY)
    assert holding.owner == "pod-7:1:forged" and first < holding.until <= time.time() + 1.0
    assert not a.acquire(DIRECTORY)
    while not a.acquire(DIRECTORY):
        assert time.time() - first < 1.0 + 1.0, "not taken over within the bound"
        time.sleep(0.02)
    assert time.time() - first >= 1.0 and a.held[DIRECTORY] == 1
    assert said == [f"lease: {DIRECTORY} taken over from pod-7:1:forged "
                    "(not renewed for 1 s since this writer first saw it)"]


def test_an_expiry_written_sooner_than_the_window_binds_until_then(tmp_path):
    fs, a, _, said = writers(tmp_path, lease_seconds=60)
    fs.write_text(f"{DIRECTORY}/0.json", json.dumps({**FAR_FUTURE, "expires": time.time() + 0.3}))
    assert abs(a.holding(DIRECTORY).until - (time.time() + 0.3)) < 0.1
    time.sleep(0.35)
    assert a.holding(DIRECTORY) is None and a.acquire(DIRECTORY, "trial 16/3")
    assert said == ["lease: trial 16/3 taken over from pod-7:1:forged (expired)"]


def test_each_renewal_restarts_the_readers_window(tmp_path):
    """A holder on another host that keeps rewriting its record (a renewal changes it) is
    never taken over, however far ahead its clock; once it stops, within the window."""
    fs, a, _, _ = writers(tmp_path, lease_seconds=1.0)
    for renewal in range(15):  # 1.5 s: longer than a window
        fs.write_text(f"{DIRECTORY}/0.json", json.dumps({**FAR_FUTURE, "renewal": renewal}))
        last_seen = time.time()
        assert not a.acquire(DIRECTORY)
        time.sleep(0.1)
    while not a.acquire(DIRECTORY):
        time.sleep(0.02)
    assert 1.0 <= time.time() - last_seen < 1.0 + 1.0


def test_a_live_renewing_holder_is_never_taken_over(tmp_path):
    fs, a, b, said = writers(tmp_path, lease_seconds=1.0, renew_seconds=0.1)
    assert a.acquire(DIRECTORY)
    records = set()
    for _ in range(50):  # 2.5 s: more than two lease durations
        assert not b.acquire(DIRECTORY) and b.holder(DIRECTORY) == a.owner
        records.add(fs.read_text(f"{DIRECTORY}/0.json"))
        time.sleep(0.05)
    assert len(records) > 5  # renewed all along, each record new
    assert fs.list_files(DIRECTORY) == ["0.json"] and said == []
    a.release_all()
    assert b.acquire(DIRECTORY)
    b.release_all()


MALFORMED = {
    "not-json": b'{"owner": "x", ',
    "not-utf8": b"\xff\xfe{}",
    "a-list": b"[1, 2]",
    "owner-missing": json.dumps({k: v for k, v in FAR_FUTURE.items() if k != "owner"}).encode(),
    "expires-missing": json.dumps({k: v for k, v in FAR_FUTURE.items() if k != "expires"}).encode(),
    "expires-a-string": json.dumps({**FAR_FUTURE, "expires": "soon"}).encode(),
    "expires-nan": json.dumps({**FAR_FUTURE, "expires": float("nan")}).encode(),
    "expires-bool": json.dumps({**FAR_FUTURE, "expires": True}).encode(),
    "pid-a-string": json.dumps({**FAR_FUTURE, "host": socket.gethostname(), "pid": "one"}).encode(),
    "pid-a-fraction": json.dumps({**FAR_FUTURE, "pid": 1.5}).encode(),
    "host-a-number": json.dumps({**FAR_FUTURE, "host": 7}).encode(),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_lease_is_named_once_and_treated_as_expired(case, tmp_path):
    fs, a, b, said = writers(tmp_path)
    fs.write_bytes(f"{DIRECTORY}/0.json", MALFORMED[case])
    assert a.holder(DIRECTORY) is None and a.holding(DIRECTORY) is None
    assert a.acquire(DIRECTORY) and a.held[DIRECTORY] == 1  # the next epoch: taken over
    assert len(said) == 1  # named once, however often it is read
    assert said[0].startswith(f"lease: lease file {fs.url(DIRECTORY + '/0.json')} is malformed (")
    assert said[0].endswith("); treated as expired")
    assert not b.acquire(DIRECTORY)  # the new epoch binds
    a.release(DIRECTORY)
    assert fs.list_files(DIRECTORY) == []  # the malformed file went with it


def test_the_malformed_lines_say_what_is_wrong(tmp_path):
    fs, a, _, said = writers(tmp_path)
    problems = {}
    for case in ("not-json", "not-utf8", "a-list", "owner-missing", "expires-a-string", "pid-a-string"):
        fs.write_bytes(f"{DIRECTORY}/0.json", MALFORMED[case])
        a.holder(DIRECTORY)
        problems[case] = said[-1].split(" is malformed (", 1)[1].rsplit(");", 1)[0]
    assert problems == {"not-json": "not JSON", "not-utf8": "cannot be read (UnicodeDecodeError)",
                        "a-list": "not a JSON object (list)", "owner-missing": "owner is missing",
                        "expires-a-string": 'expires is not a number: "soon"',
                        "pid-a-string": 'pid is not a whole number: "one"'}


def test_a_pid_beyond_any_this_machine_gives_is_a_gone_process(tmp_path):
    fs, a, _, _ = writers(tmp_path)
    fs.write_text(f"{DIRECTORY}/0.json", json.dumps({**FAR_FUTURE, "host": socket.gethostname(),
                                                     "pid": 2**70}))
    assert a.holder(DIRECTORY) is None and a.acquire(DIRECTORY)


def test_a_renewal_changes_the_record(tmp_path):
    fs, a, _, _ = writers(tmp_path, renew_seconds=3600)
    assert a.acquire(DIRECTORY)
    before = fs.read_text(f"{DIRECTORY}/0.json")
    a.renew()
    after = json.loads(fs.read_text(f"{DIRECTORY}/0.json"))
    assert after["renewal"] == json.loads(before)["renewal"] + 1
    a.release_all()
