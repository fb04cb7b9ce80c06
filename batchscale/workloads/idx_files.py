"""The IDX file format of MNIST and Fashion-MNIST, read with NumPy alone.

An IDX file (LeCun's format, http://yann.lecun.com/exdb/mnist/) is a 4-byte magic
number, ``00 00 <type> <ndim>``, then ``ndim`` big-endian uint32 dimensions, then the
values, big-endian, in C order. The originals ship gzip-compressed (``*-ubyte.gz``);
Debian's ``dataset-fashion-mnist`` installs them so. ``read_idx`` accepts either form
(a file starting with gzip's magic bytes is decompressed) and checks the header against
the data: a truncated or corrupt file is one ``ValueError`` line naming the file, never
a reshape error or a silently short array.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import zlib

import numpy as np

from batchscale.core.errors import InputError

# The type byte -> the values' big-endian NumPy dtype (the format's six types).
IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
GZIP_MAGIC = b"\x1f\x8b"


def decompressed(raw: bytes, name: str = "IDX file") -> bytes:
    """``raw`` itself, or its gzip payload where it starts with gzip's magic bytes."""
    if not raw.startswith(GZIP_MAGIC):
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as err:
        raise InputError(f"{name}: not a readable gzip file ({err})") from None


def parse_idx(data: bytes, name: str = "IDX file") -> np.ndarray:
    """The array an uncompressed IDX payload holds, in native byte order."""
    if len(data) < 4:
        raise InputError(f"{name}: {len(data)} bytes, too short for an IDX header")
    zero, type_code, ndim = data[:2], data[2], data[3]
    if zero != b"\x00\x00" or type_code not in IDX_TYPES or ndim == 0:
        raise InputError(f"{name}: not an IDX file (magic number {data[:4].hex()}; expected "
                         f"0000 then a type byte in {sorted(hex(t) for t in IDX_TYPES)} "
                         "and at least one dimension)")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise InputError(f"{name}: truncated: {len(data)} bytes, the header of {ndim} "
                         f"dimensions needs {header}")
    dims = tuple(int(d) for d in np.frombuffer(data, ">u4", count=ndim, offset=4))
    dtype = np.dtype(IDX_TYPES[type_code])
    expected = header + int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    if len(data) != expected:
        problem = "truncated" if len(data) < expected else "trailing bytes"
        raise InputError(f"{name}: {problem}: {len(data)} bytes, dimensions {dims} of "
                         f"{dtype.name} need {expected}")
    values = np.frombuffer(data, dtype, offset=header).reshape(dims)
    return values.astype(dtype.newbyteorder("="))


def read_idx(path: str) -> np.ndarray:
    """The array in the IDX file at ``path`` (gzip-compressed or not)."""
    return read_idx_recorded(path)[0]


def read_idx_recorded(path: str) -> tuple[np.ndarray, dict]:
    """The array in the IDX file at ``path`` and what identifies the file: the sha256 of
    its bytes as they are and of its IDX content once decompressed. The first names
    exactly what was read; the second also matches a copy compressed differently
    (Debian's ``.gz`` files are recompressed, not byte-identical to the upstream ones)."""
    name = os.path.basename(path)
    with open(path, "rb") as handle:
        raw = handle.read()
    data = decompressed(raw, name)
    digests = {"sha256": hashlib.sha256(raw).hexdigest(),
               "content_sha256": hashlib.sha256(data).hexdigest(), "bytes": len(raw)}
    return parse_idx(data, name), digests
