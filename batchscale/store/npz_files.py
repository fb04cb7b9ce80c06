"""The one way batchscale reads ``.npz`` bytes: every member at once, no pickles, one
thread at a time.

Why a lock: NumPy parses each member's header with ``ast.literal_eval``, and on CPython
3.11 (what the images run) the AST constructor keeps its recursion depth in state the
whole interpreter shares (cpython gh-106905). When a garbage collection inside one
thread's parse lets another thread parse too, the first raises ``SystemError: AST
constructor recursion depth mismatch``. Trials read data shards from several threads
while the main thread may read a checkpoint, and a CI run lost a test to exactly this.
Members are read eagerly inside the lock, so no lazily loaded member parses a header
later outside it. Decoding an uncompressed ``.npz`` is a copy, so serialising it costs
little; fetching the bytes (the slow part) stays parallel.
"""

from __future__ import annotations

import io
import threading

import numpy as np

_HEADER_PARSE = threading.Lock()


def read_npz(data: bytes) -> dict[str, np.ndarray]:
    """Every member of an ``.npz`` archive, by name. Object arrays are refused (numpy's
    ValueError), as are bytes that are not an archive (OSError, zipfile.BadZipFile...)."""
    with _HEADER_PARSE, np.load(io.BytesIO(data), allow_pickle=False) as npz:
        return {name: npz[name] for name in npz.files}
