"""Behaviour of batchscale.store.filesystem on GCS: the same tests as on a local folder.

Every test of tests/unit/test_storage.py that takes the ``store`` fixture is collected
here again with ``store`` on GCS: the real google-cloud-storage client against the
in-process gcp-storage-emulator (tests/conftest.py); nothing is mocked. Plus what only
gs:// roots have.
"""

from __future__ import annotations

import inspect

import pytest

from batchscale.store.filesystem import GCSStorage, Storage, open_root
from tests.unit import test_storage as on_local_folder

# Collected in this module, so they take the ``store`` fixture below.
globals().update({name: test for name, test in vars(on_local_folder).items()
                  if name.startswith("test_") and "store" in inspect.signature(test).parameters})


@pytest.fixture
def store(gcs_root) -> Storage:
    """An empty store under a fresh gs://batchscale-test/<uuid> root on the emulator."""
    return open_root(gcs_root)


def test_open_root_gcs(gcs_emulator, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator["host"])
    s = open_root("gs://batchscale-test/some/prefix/")
    assert isinstance(s, GCSStorage)
    assert s.root == "gs://batchscale-test/some/prefix"
    assert s.url("x.json") == "gs://batchscale-test/some/prefix/x.json"

    bare = open_root("gs://batchscale-test")
    assert isinstance(bare, GCSStorage)
    assert bare.root == "gs://batchscale-test"
    assert bare.url("x.json") == "gs://batchscale-test/x.json"


def test_a_stalled_connection_does_not_block_the_emulator(gcs_emulator, gcs_root):
    """The test emulator serves one connection at a time; one that opens and sends nothing
    (a request cut mid-way by the outage tests' relay) is dropped after the connection
    timeout (tests/conftest.py), so the next client is served instead of hanging."""
    import socket
    import time

    from tests.conftest import EMULATOR_CONNECTION_TIMEOUT

    host, port = gcs_emulator["host"].removeprefix("http://").split(":")
    stalled = socket.create_connection((host, int(port)))
    try:
        started = time.monotonic()
        fs = open_root(gcs_root)
        fs.write_text("after-a-stall.txt", "served")
        assert fs.read_text("after-a-stall.txt") == "served"
        assert time.monotonic() - started < EMULATOR_CONNECTION_TIMEOUT + 10
    finally:
        stalled.close()
