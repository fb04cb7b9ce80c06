"""Sharded data sets in the store: written once by data preparation, streamed by trials.

Large data sets (ImageNet, Open Images, LM1B, C4) do not fit a trial's memory, and a
trial pod should start training before it has read them all. Preparation writes each
split as numbered ``.npz`` shards under ``<root>/datasets/<name>/<split>/``; a trial
reads them through the store (local folder or gs://, the same code either way) with
several shards in flight at once and a bounded queue of shards read ahead.

A shard holds a few thousand examples as one array per field. Fixed-shape fields
(labels, 32x32 images) are stacked; variable-length fields (JPEG bytes, token ids) are
"ragged": their values concatenated in ``<field>.values`` and the boundaries in
``<field>.offsets`` (length n + 1), so no pickled objects are ever stored.
NumPy only: nothing here imports TensorFlow.
"""

from __future__ import annotations

import io
import queue
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from batchscale.core.errors import StoreDamaged
from batchscale.store.npz_files import read_npz

RAGGED = ".values"


def shard_name(split: str, index: int) -> str:
    return f"{split}/shard-{index:05d}.npz"


def encode_shard(examples: list[dict]) -> bytes:
    """One shard's bytes: a field whose values share one shape is stacked, any other is
    stored ragged (flattened values + offsets). Either way ``decode_shard(...)[field][i]``
    is example i's value."""
    arrays = {}
    for key in examples[0]:
        values = [np.asarray(example[key]) for example in examples]
        if len({v.shape for v in values}) == 1:
            arrays[key] = np.stack(values)
        else:
            arrays[key + RAGGED] = np.concatenate([v.reshape(-1) for v in values])
            arrays[key + ".offsets"] = np.cumsum([0] + [v.size for v in values]).astype(np.int64)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def decode_shard(data: bytes) -> dict[str, np.ndarray | list[np.ndarray]]:
    """Fields of one shard: arrays for fixed-shape fields, lists of 1-D arrays for ragged."""
    out: dict = {}
    npz = read_npz(data)
    for key, array in npz.items():
        if key.endswith(".offsets"):
            continue
        if key.endswith(RAGGED):
            name = key[: -len(RAGGED)]
            offsets = npz[name + ".offsets"]
            out[name] = [array[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]
        else:
            out[key] = array
    return out


def shard_length(shard: dict) -> int:
    return len(next(iter(shard.values())))


def write_split(fs, prefix: str, split: str, examples: Iterable[dict], examples_per_shard: int,
                log=print) -> dict:
    """Write ``examples`` (dicts of arrays/bytes) as shards under ``prefix``; return a summary
    ``{"shards": [paths relative to prefix], "examples": n}`` for the data set's info.json."""
    paths, batch, total = [], [], 0

    def flush():
        nonlocal batch
        path = shard_name(split, len(paths))
        fs.write_bytes(f"{prefix}/{path}", encode_shard(batch))
        paths.append(path)
        batch = []

    for example in examples:
        batch.append({k: np.frombuffer(v, np.uint8) if isinstance(v, bytes) else v
                      for k, v in example.items()})
        total += 1
        if len(batch) == examples_per_shard:
            flush()
            log(f"  {split}: {total} examples in {len(paths)} shards")
    if batch:
        flush()
    if not total:
        raise RuntimeError(f"split {split} produced no examples")
    return {"shards": paths, "examples": total}


class ShardReader:
    """Streams decoded shards of one split: ``parallel_reads`` shards fetched at once, up to
    ``prefetch`` decoded shards waiting, read by a background thread.

    ``shards(seed)`` visits every shard once per epoch; with ``seed`` the order is a fresh
    seeded permutation each epoch, with ``repeat`` it never ends.
    """

    def __init__(self, fs, prefix: str, paths: list[str], parallel_reads: int = 4, prefetch: int = 8):
        if not paths:
            raise StoreDamaged(f"no shards under {prefix}")
        self.fs, self.prefix, self.paths = fs, prefix, list(paths)
        self.parallel_reads, self.prefetch = max(1, parallel_reads), max(1, prefetch)

    def _order(self, seed: int | None, repeat: bool) -> Iterator[str]:
        rng = np.random.default_rng(seed)
        while True:
            order = rng.permutation(len(self.paths)) if seed is not None else range(len(self.paths))
            for i in order:
                yield self.paths[i]
            if not repeat:
                return

    def _read(self, path: str) -> dict:
        return decode_shard(self.fs.read_bytes(f"{self.prefix}/{path}"))

    def shards(self, seed: int | None = None, repeat: bool = False) -> Iterator[dict]:
        out: queue.Queue = queue.Queue(self.prefetch)
        stop = threading.Event()
        done = object()

        def produce():
            try:
                with ThreadPoolExecutor(self.parallel_reads) as pool:
                    pending = []
                    for path in self._order(seed, repeat):
                        pending.append(pool.submit(self._read, path))
                        if len(pending) >= self.parallel_reads:
                            if not _put(out, pending.pop(0).result(), stop):
                                return
                    for future in pending:
                        if not _put(out, future.result(), stop):
                            return
                _put(out, done, stop)
            except BaseException as err:  # handed to the consumer, raised there
                _put(out, err, stop)

        thread = threading.Thread(target=produce, daemon=True, name="shard-reader")
        thread.start()
        try:
            while True:
                item = out.get()
                if item is done:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()


def _put(out: queue.Queue, item, stop: threading.Event) -> bool:
    """Put unless the consumer has gone; False tells the producer to stop."""
    while not stop.is_set():
        try:
            out.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


def shuffled_examples(shards: Iterator[dict], seed: int, buffer_shards: int = 4) -> Iterator[dict]:
    """Examples from a stream of shards, shuffled within a window of ``buffer_shards`` shards
    (the shard order itself is shuffled by the reader)."""
    rng = np.random.default_rng(seed)
    window: list[dict] = []
    for shard in shards:
        window.extend(_split_examples(shard))
        if len(window) >= buffer_shards * shard_length(shard):
            yield from _drain(window, rng, keep=len(window) // 2)
    yield from _drain(window, rng, keep=0)


def _split_examples(shard: dict) -> list[dict]:
    return [{k: v[i] for k, v in shard.items()} for i in range(shard_length(shard))]


def _drain(window: list[dict], rng, keep: int) -> Iterator[dict]:
    order = rng.permutation(len(window))
    emit, remain = order[: len(window) - keep], order[len(window) - keep:]
    out = [window[i] for i in emit]
    window[:] = [window[i] for i in remain]
    yield from out


def ordered_examples(shards: Iterator[dict]) -> Iterator[dict]:
    """Examples in storage order (evaluation: deterministic, one pass)."""
    for shard in shards:
        yield from _split_examples(shard)
