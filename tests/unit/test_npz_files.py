"""read_npz: every member, no pickles, and safe to call from several threads at once
(CPython 3.11's AST constructor is not: see batchscale/store/npz_files.py)."""

from __future__ import annotations

import gc
import io
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from batchscale.store.npz_files import read_npz

REPO = Path(__file__).resolve().parents[2]


def _archive(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def test_every_member_comes_back_exactly():
    arrays = {"x": np.arange(12, dtype=np.float32).reshape(3, 4), "y": np.array([1, 2, 3], np.int64),
              "empty": np.zeros((0, 5), np.uint8)}
    got = read_npz(_archive(**arrays))
    assert sorted(got) == sorted(arrays)
    for name, array in arrays.items():
        assert got[name].dtype == array.dtype and np.array_equal(got[name], array)


def test_pickled_members_and_non_archives_are_refused():
    with pytest.raises(ValueError, match="allow_pickle"):
        read_npz(_archive(objects=np.array([{"a": 1}, None], dtype=object)))
    with pytest.raises((OSError, ValueError)):
        read_npz(b"not an archive")


def test_threads_reading_at_once_never_trip_the_ast_constructor():
    """Two threads at different stack depths read archives while every garbage collection
    hands the GIL over. Without read_npz's lock, CPython 3.11 raised 'AST constructor
    recursion depth mismatch' within about a second in every one of 5 tries here."""
    data = _archive(**{f"a{i}": np.arange(i + 1) for i in range(20)})
    errors: list[BaseException] = []
    stop = threading.Event()

    def read(depth: int):
        if depth:
            return read(depth - 1)
        while not stop.is_set():
            read_npz(data)

    def worker(depth: int):
        try:
            read(depth)
        except BaseException as err:  # noqa: BLE001 - recorded and asserted below
            errors.append(err)
            stop.set()

    def hand_over(phase, info):
        time.sleep(1e-6)  # releases the GIL in the middle of whatever allocation collected

    threshold = gc.get_threshold()
    gc.set_threshold(1)
    gc.callbacks.append(hand_over)
    try:
        threads = [threading.Thread(target=worker, args=(depth,)) for depth in (0, 7)]
        for thread in threads:
            thread.start()
        stop.wait(3.0)
        stop.set()
        for thread in threads:
            thread.join()
    finally:
        gc.callbacks.remove(hand_over)
        gc.set_threshold(*threshold)
    assert not errors, f"{sys.version.split()[0]}: {errors[0]!r}"


def test_nothing_else_in_the_package_calls_np_load():
    """One reader: a second np.load call site would bring the thread hazard back."""
    callers = [str(path.relative_to(REPO)) for folder in ("batchscale", "components", "pipelines")
               for path in (REPO / folder).rglob("*.py")
               if "np.load(" in path.read_text() and path.name != "npz_files.py"]
    assert callers == []
