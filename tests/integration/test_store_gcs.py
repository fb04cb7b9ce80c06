"""The study store on gs://: every test of tests/unit/test_store.py that takes the ``root``
fixture, collected here again with ``root`` on GCS (the real google-cloud-storage client
against the in-process emulator of tests/conftest.py; nothing is mocked)."""

from __future__ import annotations

import inspect

import pytest

from tests.unit import test_store as on_local_folder

# Collected in this module, so they take the ``root`` fixture below.
globals().update({name: test for name, test in vars(on_local_folder).items()
                  if name.startswith("test_") and "root" in inspect.signature(test).parameters})


@pytest.fixture
def root(gcs_root) -> str:
    """An empty store root, gs://batchscale-test/<uuid> on the emulator."""
    return gcs_root
