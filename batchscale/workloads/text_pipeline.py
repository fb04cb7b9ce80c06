"""Language-model batches streamed from a prepared text data set's shards (NumPy only).

``TextPipeline`` implements ``inputs.InputPipeline`` for the text data sets of ``text``:
each split's shards hold every sentence's sub-word ids as one flat array plus offsets,
and batches are cut, shuffled and padded on those arrays directly (no per-sentence
Python objects), so even a 2**16-sentence batch costs a few vectorised NumPy calls.

Batch convention (see ``text``): inputs = [1, w_1, .., w_m], targets = [w_1, .., w_m, 1]
(1 = end of sentence), weights 1 on those m + 1 positions; 0 pads all three. A batch is
padded to the smallest power of two >= 16 covering its longest sentence, capped at the
clip length, so a jitted model sees few shapes: 16, 32 and 64 in training.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from batchscale.store.npz_files import read_npz
from batchscale.workloads.dataset_record import DatasetInfo
from batchscale.workloads.inputs import InputPipeline
from batchscale.workloads.shards import ShardReader
from batchscale.workloads.tokenizer import EOS_ID

MIN_BUCKET = 16  # padded lengths are powers of two from here (few shapes to compile)
SHUFFLE_SHARDS = 4  # training shuffles within a window of this many shards' sentences


class Ragged:
    """Sentences as one flat token array and offsets (n + 1), as a shard stores them."""

    def __init__(self, values: np.ndarray, offsets: np.ndarray):
        self.values, self.offsets = values, np.asarray(offsets, dtype=np.int64)

    @classmethod
    def from_lists(cls, sentences: list) -> Ragged:
        lengths = [len(s) for s in sentences]
        values = np.concatenate([np.asarray(s, np.int32) for s in sentences]) if sentences else []
        return cls(np.asarray(values, np.int32), np.cumsum([0] + lengths))

    @classmethod
    def from_npz(cls, data: bytes, field: str = "tokens") -> Ragged:
        npz = read_npz(data)
        if f"{field}.values" in npz:
            return cls(npz[f"{field}.values"], npz[f"{field}.offsets"])
        stacked = npz[field]  # every sentence of the shard had the same length
        return cls(stacked.reshape(-1), np.arange(len(stacked) + 1) * stacked.shape[1])

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def slice(self, start: int, stop: int) -> Ragged:
        lo, hi = self.offsets[start], self.offsets[stop]
        return Ragged(self.values[lo:hi], self.offsets[start:stop + 1] - lo)

    def take(self, indices: np.ndarray) -> Ragged:
        starts, lengths = self.offsets[indices], self.lengths[indices]
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        positions = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
        return Ragged(self.values[positions], offsets)

    @staticmethod
    def concat(parts: list[Ragged]) -> Ragged:
        if len(parts) == 1:
            return parts[0]
        ends = np.cumsum([0] + [p.offsets[-1] for p in parts[:-1]])
        offsets = np.concatenate([[0]] + [p.offsets[1:] + e for p, e in zip(parts, ends)])
        return Ragged(np.concatenate([p.values for p in parts]), offsets)

    def batch(self, cap: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(inputs, targets, weights) of the module docstring's convention, padded to the
        power of two (>= MIN_BUCKET) covering the longest sentence, at most ``cap``."""
        lengths = self.lengths
        full = lengths + 1 if cap is None else np.minimum(lengths + 1, cap)
        longest = int(full.max())
        width = max(MIN_BUCKET, 1 << (longest - 1).bit_length())
        width = width if cap is None else min(width, cap)
        column = np.arange(width)[None, :]
        tokens = np.zeros((len(self), width), np.int32)
        inside = column < lengths[:, None]
        if len(self.values):
            positions = np.minimum(self.offsets[:-1, None] + column, len(self.values) - 1)
            tokens = np.where(inside, self.values[positions], 0).astype(np.int32)
        mask = column < full[:, None]
        targets = np.where(mask & ~inside, EOS_ID, tokens).astype(np.int32)
        inputs = np.concatenate([np.full((len(self), 1), EOS_ID, np.int32), targets[:, :-1]], 1)
        return np.where(mask, inputs, 0).astype(np.int32), targets, mask.astype(np.float32)


def _batches(chunks: Iterable[Ragged], batch_size: int, final: bool) -> Iterator[Ragged]:
    """Exactly ``batch_size`` sentences at a time from a stream of chunks (the remainder
    too when ``final``), copying only where a batch spans two chunks."""
    carry: Ragged | None = None
    for chunk in chunks:
        if carry is not None and len(carry):
            need = batch_size - len(carry)
            if len(chunk) < need:
                carry = Ragged.concat([carry, chunk])
                continue
            yield Ragged.concat([carry, chunk.slice(0, need)])
            chunk = chunk.slice(need, len(chunk))
        whole = len(chunk) - len(chunk) % batch_size
        for start in range(0, whole, batch_size):
            yield chunk.slice(start, start + batch_size)
        carry = chunk.slice(whole, len(chunk))
    if final and carry is not None and len(carry):
        yield carry


def _window_shuffled(shards: Iterable[Ragged], rng, window: int) -> Iterator[Ragged]:
    """Sentences shuffled within a window of ``window`` shards' worth (the reader shuffles
    the shard order): when the window is full, a random half of it leaves."""
    pool: list[Ragged] = []
    shard_size = 0
    for shard in shards:
        pool.append(shard)
        shard_size = max(shard_size, len(shard))
        if sum(map(len, pool)) >= window * shard_size:
            merged = Ragged.concat(pool)
            order = rng.permutation(len(merged))
            keep = len(merged) // 2
            yield merged.take(order[keep:])
            pool = [merged.take(order[:keep])]
    if pool:
        yield Ragged.concat(pool)


class _RaggedReader(ShardReader):
    """A ShardReader handing out ``Ragged`` token shards (no per-sentence arrays)."""

    def _read(self, path: str) -> Ragged:
        return Ragged.from_npz(self.fs.read_bytes(f"{self.prefix}/{path}"))


class TextPipeline(InputPipeline):
    """Streams a prepared text data set's shards as language-model batches (NumPy only).

    Options: ``train_length`` (training targets per sentence, default 64) and
    ``eval_length`` (evaluation clip; absent: none).
    """

    task = "language_model"
    input_shape = (None,)
    in_memory = False

    def __init__(self, store, info: DatasetInfo, stored: dict, options: dict | None = None):
        options = {**info.options, **(options or {})}
        self.fs, self.prefix, self.splits = store.fs, f"datasets/{info.name}", stored["splits"]
        self.num_outputs = int(stored["vocab_size"])
        self.num_train_examples = int(self.splits["train"]["examples"])
        self.train_length = int(options.get("train_length", 64))
        self.eval_length = int(options["eval_length"]) if options.get("eval_length") else None

    def _reader(self, split: str) -> _RaggedReader:
        return _RaggedReader(self.fs, self.prefix, self.splits[split]["shards"])

    def train_batches(self, batch_size: int, seed: int) -> Iterator[tuple]:
        rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
        shards = self._reader("train").shards(seed=seed, repeat=True)
        for batch in _batches(_window_shuffled(shards, rng, SHUFFLE_SHARDS), batch_size, False):
            yield batch.batch(self.train_length)

    def eval_batches(self, split: str, batch_size: int, limit: int | None = None) -> Iterator[tuple]:
        stop = self.splits[split]["examples"] if limit is None else limit

        def first(shards):
            seen = 0
            for shard in shards:
                if seen >= stop:
                    return
                yield shard.slice(0, min(len(shard), stop - seen))
                seen += len(shard)

        for batch in _batches(first(self._reader(split).shards()), batch_size, True):
            yield batch.batch(self.eval_length)
