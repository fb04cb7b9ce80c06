"""Sharded data sets: the shard format, writing splits, and streaming them back.

On a local store; tests/integration/test_shards_gcs.py reads the same shards back from
gs:// (the GCS emulator).
"""

import threading
import time

import numpy as np
import pytest

from batchscale.store.filesystem import open_root
from batchscale.workloads.shards import (
    ShardReader,
    decode_shard,
    encode_shard,
    ordered_examples,
    shuffled_examples,
    write_split,
)


def _examples(n):
    """Examples with a scalar label, a fixed 2x3 array, ragged token ids and raw bytes."""
    return [{"label": np.int64(i), "grid": np.full((2, 3), i, np.float32),
             "tokens": np.arange(i % 4, dtype=np.int32), "image": bytes([i]) * (i + 1)}
            for i in range(n)]


def _write(root, n=23, per_shard=5, split="train"):
    fs = open_root(str(root))
    summary = write_split(fs, "datasets/toy", split, _examples(n), per_shard, log=lambda *_: None)
    return fs, summary


def test_shard_round_trip_keeps_fixed_ragged_and_byte_fields():
    examples = _examples(6)
    examples[0]["image"] = np.frombuffer(examples[0]["image"], np.uint8)  # write_split does this
    for example in examples[1:]:
        example["image"] = np.frombuffer(example["image"], np.uint8)
    shard = decode_shard(encode_shard(examples))
    assert shard["label"].dtype == np.int64 and shard["label"].tolist() == list(range(6))
    assert shard["grid"].shape == (6, 2, 3) and shard["grid"].dtype == np.float32
    assert [t.tolist() for t in shard["tokens"]] == [list(range(i % 4)) for i in range(6)]
    assert shard["tokens"][0].dtype == np.int32 and len(shard["tokens"][0]) == 0
    assert [bytes(b) for b in shard["image"]] == [bytes([i]) * (i + 1) for i in range(6)]
    with np.load(__import__("io").BytesIO(encode_shard(examples))) as npz:  # no pickled objects
        assert all(npz[key].dtype != object for key in npz.files)


def test_equal_length_variable_fields_still_read_per_example():
    shard = decode_shard(encode_shard([{"tokens": np.array([1, 2])}, {"tokens": np.array([3, 4])}]))
    assert [t.tolist() for t in shard["tokens"]] == [[1, 2], [3, 4]]


def test_write_split_cuts_shards_and_summarises(tmp_path):
    fs, summary = _write(tmp_path, n=23, per_shard=5)
    assert summary == {"shards": [f"train/shard-{i:05d}.npz" for i in range(5)], "examples": 23}
    sizes = [len(decode_shard(fs.read_bytes(f"datasets/toy/{p}"))["label"]) for p in summary["shards"]]
    assert sizes == [5, 5, 5, 5, 3]
    with pytest.raises(RuntimeError, match="no examples"):
        write_split(fs, "datasets/toy", "validation", [], 5, log=lambda *_: None)


def _labels(shards):
    return [shard["label"].tolist() for shard in shards]


def test_reader_order_seed_and_repeat(tmp_path):
    fs, summary = _write(tmp_path, n=40, per_shard=4)  # 10 shards
    reader = ShardReader(fs, "datasets/toy", summary["shards"], parallel_reads=3, prefetch=2)
    in_order = _labels(reader.shards())
    assert [labels[0] for labels in in_order] == list(range(0, 40, 4))
    first = _labels(reader.shards(seed=1))
    assert first == _labels(reader.shards(seed=1)) != _labels(reader.shards(seed=2))
    assert sorted(first) == in_order and first != in_order

    stream = reader.shards(seed=1, repeat=True)
    epochs = [[next(stream)["label"][0] for _ in range(10)] for _ in range(3)]
    stream.close()
    assert [labels[0] for labels in first] == epochs[0]
    assert all(sorted(epoch) == list(range(0, 40, 4)) for epoch in epochs)
    assert epochs[1] != epochs[0]  # a fresh permutation each epoch


class _SlowFs:
    """Wraps a store's fs: each read sleeps, and the most reads at once is recorded."""

    def __init__(self, fs, delay=0.05, fail=None):
        self.fs, self.delay, self.fail = fs, delay, fail
        self.active = self.peak = self.reads = 0
        self.lock = threading.Lock()

    def read_bytes(self, path):
        with self.lock:
            self.active += 1
            self.reads += 1
            self.peak = max(self.peak, self.active)
        try:
            time.sleep(self.delay)
            if self.fail and path.endswith(self.fail):
                raise OSError(f"cannot read {path}")
            return self.fs.read_bytes(path)
        finally:
            with self.lock:
                self.active -= 1


def test_reader_reads_in_parallel_keeps_order_and_bounds_read_ahead(tmp_path):
    fs, summary = _write(tmp_path, n=48, per_shard=4)  # 12 shards
    slow = _SlowFs(fs)
    reader = ShardReader(slow, "datasets/toy", summary["shards"], parallel_reads=4, prefetch=2)
    labels = _labels(reader.shards())
    assert slow.peak == 4  # four reads were in flight at once
    assert [x[0] for x in labels] == list(range(0, 48, 4))  # and the order was kept

    slow = _SlowFs(fs, delay=0.01)
    stream = ShardReader(slow, "datasets/toy", summary["shards"], parallel_reads=2,
                         prefetch=2).shards(seed=0, repeat=True)
    next(stream)
    time.sleep(0.3)  # the producer fills its queue, then waits
    assert slow.reads <= 1 + 2 + 2 + 1  # taken + queued + in flight + one blocked put
    stream.close()


def test_reader_hands_errors_to_the_consumer_and_stops_when_closed(tmp_path):
    fs, summary = _write(tmp_path, n=20, per_shard=4)
    reader = ShardReader(_SlowFs(fs, delay=0, fail="shard-00002.npz"), "datasets/toy",
                         summary["shards"], parallel_reads=2)
    with pytest.raises(OSError, match="shard-00002"):
        list(reader.shards())
    before = {t for t in threading.enumerate() if t.name == "shard-reader"}
    stream = ShardReader(fs, "datasets/toy", summary["shards"]).shards(repeat=True)
    next(stream)
    stream.close()
    deadline = time.time() + 10  # the producer ends once its in-flight reads return
    while time.time() < deadline and not (
            {t for t in threading.enumerate() if t.name == "shard-reader"} <= before):
        time.sleep(0.05)
    assert {t for t in threading.enumerate() if t.name == "shard-reader"} <= before
    with pytest.raises(ValueError, match="no shards"):
        ShardReader(fs, "datasets/toy", [])


def test_example_streams_cover_each_example_once_in_a_seeded_order(tmp_path):
    fs, summary = _write(tmp_path, n=30, per_shard=4)
    reader = ShardReader(fs, "datasets/toy", summary["shards"])
    ordered = [int(e["label"]) for e in ordered_examples(reader.shards())]
    assert ordered == list(range(30))
    example = next(ordered_examples(reader.shards()))
    assert set(example) == {"label", "grid", "tokens", "image"}

    def shuffled(seed):
        return [int(e["label"]) for e in shuffled_examples(reader.shards(seed=seed), seed, 2)]

    assert sorted(shuffled(3)) == ordered
    assert shuffled(3) == shuffled(3) != shuffled(4)

