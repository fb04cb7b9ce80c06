"""The buffers that carry a pack's batch indices to its compiled training chunks.

A chunk of ``lax.fori_loop`` steps (``vmapped_step.PackStep.run_chunk``) reads its batch
indices from one int32 array (steps, trials, batch). Its shape is part of the compiled
loop, so it cannot follow every chunk's length; a buffer of the largest size sent 8 MiB
for a 3-step chunk at batch 4,000. Buffers here take a few sizes only: a chunk's steps
rounded up to a power of two, at least ``MIN_BUFFER`` indices (smaller buffers cost
nothing worth a compilation), at most ``chunk_capacity`` steps. The rows past the chunk's
steps are never read, so which buffer carries the steps changes no number.
"""

from __future__ import annotations

import numpy as np

INDEX_BUDGET = 1 << 21  # int32 batch indices per chunk buffer (8 MiB): bounds a chunk's steps
MAX_CHUNK_STEPS = 512
MIN_BUFFER = 1 << 16  # int32 indices (256 KiB) below which a buffer is too cheap to shrink


def chunk_capacity(width: int, batch_size: int) -> int:
    """Steps one chunk buffer holds for ``width`` trials at ``batch_size``."""
    return int(max(1, min(MAX_CHUNK_STEPS, INDEX_BUDGET // max(1, width * batch_size))))


def buffer_steps(steps: int, width: int, batch_size: int) -> int:
    """Rows of the index buffer that carries a chunk of ``steps`` (at most
    ``chunk_capacity``) steps: the next power of two, at least ``MIN_BUFFER`` indices, at
    most the capacity. Each size is one compiled loop, so sizes are few: fc_128_128's
    quickstart packs compile one (batch sizes 8-2,048) or two (batch 4,000)."""
    capacity = chunk_capacity(width, batch_size)
    floor = MIN_BUFFER // max(1, width * batch_size)
    return int(min(capacity, max(1 << max(0, steps - 1).bit_length(), floor)))


def index_buffer(steps: int, width: int, batch_size: int) -> np.ndarray:
    """A zeroed int32 buffer (rows, width, batch) for a chunk of ``steps`` steps: a caller
    that fills its first ``steps`` rows in place and hands it to ``PackStep.run_chunk``
    (``steps=``) sends it as it is, without another copy. Rows: ``buffer_steps`` where the
    chunk fits one call, else ``steps`` (``run_chunk`` cuts it into calls)."""
    fits = steps <= chunk_capacity(width, batch_size)
    rows = buffer_steps(steps, width, batch_size) if fits else steps
    return np.zeros((rows, width, batch_size), np.int32)


def call_buffer(indices: np.ndarray, start: int, length: int, rows: int) -> np.ndarray:
    """The ``rows``-row int32 buffer of one compiled call whose ``length`` steps start at
    row ``start`` of ``indices``: a view where ``indices`` already is such a buffer,
    else a zero-padded copy. Rows past ``length`` are never read."""
    if indices.dtype == np.int32 and indices.shape[0] >= start + rows:
        return indices[start:start + rows]
    buffer = np.zeros((rows, *indices.shape[1:]), np.int32)
    buffer[:length] = indices[start:start + length]
    return buffer
