"""The IDX reader: arrays of every IDX type, gzip or not, and one ValueError line for a
truncated or corrupt file. The real Fashion-MNIST files: tests/unit/test_fashion_mnist.py."""

import gzip
import struct

import numpy as np
import pytest

from batchscale.workloads.idx_files import parse_idx, read_idx, read_idx_recorded


def idx_bytes(array: np.ndarray, type_code: int) -> bytes:
    """``array`` written as an IDX file by hand: magic, big-endian dims, big-endian values."""
    header = bytes([0, 0, type_code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


@pytest.mark.parametrize("dtype, type_code", [
    (np.uint8, 0x08), (np.int8, 0x09), (np.int16, 0x0B), (np.int32, 0x0C),
    (np.float32, 0x0D), (np.float64, 0x0E)])
def test_every_type_reads_back_in_native_order(tmp_path, dtype, type_code):
    array = (np.arange(2 * 3 * 4) - 7).reshape(2, 3, 4).astype(dtype)
    if dtype == np.uint8:
        array = np.arange(24, dtype=np.uint8).reshape(2, 3, 4) * 10
    raw = idx_bytes(array, type_code)
    (tmp_path / "plain").write_bytes(raw)
    (tmp_path / "packed.gz").write_bytes(gzip.compress(raw))
    for name in ("plain", "packed.gz"):
        got = read_idx(str(tmp_path / name))
        assert got.dtype == np.dtype(dtype) and got.dtype.isnative and got.shape == (2, 3, 4)
        assert np.array_equal(got, array)


def test_digests_name_the_file_and_its_content(tmp_path):
    import hashlib

    raw = idx_bytes(np.arange(5, dtype=np.uint8), 0x08)
    for level in (1, 9):  # two compressions of the same content
        (tmp_path / f"x{level}.gz").write_bytes(gzip.compress(raw, compresslevel=level, mtime=level))
    (a, da), (b, db) = (read_idx_recorded(str(tmp_path / f"x{n}.gz")) for n in (1, 9))
    assert np.array_equal(a, b) and da["sha256"] != db["sha256"]
    assert da["content_sha256"] == db["content_sha256"] == hashlib.sha256(raw).hexdigest()
    assert da["sha256"] == hashlib.sha256((tmp_path / "x1.gz").read_bytes()).hexdigest()


GOOD = idx_bytes(np.arange(12, dtype=np.uint8).reshape(3, 4), 0x08)


@pytest.mark.parametrize("data, message", [
    (b"\x00\x00", r"^labels: 2 bytes, too short for an IDX header$"),
    (b"\x01\x00\x08\x01" + GOOD[4:], r"^labels: not an IDX file \(magic number 01000801;"),
    (b"\x00\x00\x07\x01" + GOOD[4:], r"^labels: not an IDX file \(magic number 00000701;"),
    (b"\x00\x00\x08\x00", r"^labels: not an IDX file .* at least one dimension\)$"),
    (GOOD[:9], r"^labels: truncated: 9 bytes, the header of 2 dimensions needs 12$"),
    (GOOD[:-1], r"^labels: truncated: 23 bytes, dimensions \(3, 4\) of uint8 need 24$"),
    (GOOD + b"\x00", r"^labels: trailing bytes: 25 bytes, dimensions \(3, 4\) of uint8 need 24$"),
    (GOOD[:12] + b"\x00" * 12 + GOOD[12:], r"^labels: trailing bytes: 36 bytes"),
])
def test_corrupt_headers_and_sizes_are_one_line(data, message):
    with pytest.raises(ValueError, match=message) as caught:
        parse_idx(data, "labels")
    assert "\n" not in str(caught.value)


def test_a_truncated_or_corrupt_gzip_file_is_one_line(tmp_path):
    packed = gzip.compress(GOOD)
    (tmp_path / "cut.gz").write_bytes(packed[:-6])
    (tmp_path / "bad.gz").write_bytes(packed[:10] + b"\xff" * 8 + packed[18:])
    (tmp_path / "short.gz").write_bytes(gzip.compress(GOOD[:-3]))
    for name, message in (("cut.gz", r"^cut\.gz: not a readable gzip file \("),
                          ("bad.gz", r"^bad\.gz: not a readable gzip file \("),
                          ("short.gz", r"^short\.gz: truncated: 21 bytes")):
        with pytest.raises(ValueError, match=message) as caught:
            read_idx(str(tmp_path / name))
        assert "\n" not in str(caught.value)
