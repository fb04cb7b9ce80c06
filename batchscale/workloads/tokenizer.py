"""The invertible sub-word tokenizer of the language-model data sets (LM1B, C4).

The paper tokenised LM1B with tensor2tensor's ``SubwordTextEncoder`` (its footnote 19
points at tensor2tensor's ``lm1b.py``: a ~2**15 vocabulary built from 63,000 training
sentences). tensorflow-datasets ships the same algorithm as
``tfds.deprecated.text.SubwordTextEncoder``: text is split at alphanumeric boundaries,
words are greedily matched against the longest known sub-words, and anything unknown
falls back to its UTF-8 bytes, so every string can be encoded and decoded back.

Ids follow tensor2tensor's layout: 0 is padding, 1 is the end-of-sentence token (also
fed as the first input of every sentence), sub-words and the 256 bytes follow from 2
(tfds' ids shifted by one). ``vocab_size`` counts all of them.

Encoding and building use tfds (imported on first use, preparation only). Decoding is
our own: tfds' ``decode`` leaves an escaped underscore (``\\&undsc``) in the text when
the vocabulary has merged the escape with its neighbours, so ``a_b`` would not come
back; ``decode`` here undoes the escape over the whole text, which inverts it. (Text
holding the escape itself, the 7 characters ``\\&undsc``, does not come back: tfds'
encoder already maps it like an underscore.)
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Iterator

from batchscale.workloads.inputs import available_cpus

PAD_ID = 0
EOS_ID = 1
_OFFSET = 1  # our id = tfds id + 1 (tfds: 0 padding, sub-words from 1, then bytes)
_NUM_BYTES = 256
_ESCAPED_UNDERSCORE = "\\&undsc"  # tfds' escape of "_" inside words


class SubwordTokenizer:
    """A sub-word vocabulary (the list tfds' ``SubwordTextEncoder`` is made of)."""

    def __init__(self, subwords: list[str]):
        self.subwords = list(subwords)
        self._encoder = None

    @classmethod
    def build(cls, texts: Iterable[str], target_vocab_size: int,
              max_subword_length: int = 20) -> SubwordTokenizer:
        """tfds' binary search for a vocabulary within ~1% of ``target_vocab_size`` (ours,
        counting the end-of-sentence id) from ``texts``."""
        from tensorflow_datasets.core.deprecated.text import SubwordTextEncoder

        encoder = SubwordTextEncoder.build_from_corpus(
            iter(texts), target_vocab_size - _OFFSET, max_subword_length=max_subword_length)
        return cls(encoder.subwords)

    @property
    def vocab_size(self) -> int:
        return 1 + _OFFSET + len(self.subwords) + _NUM_BYTES

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (never 0 or 1; empty for empty text)."""
        if self._encoder is None:
            from tensorflow_datasets.core.deprecated.text import SubwordTextEncoder

            self._encoder = SubwordTextEncoder(vocab_list=self.subwords)
        return [i + _OFFSET for i in self._encoder.encode(text)]

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``; padding and end-of-sentence ids are skipped."""
        pieces: list[str] = []
        pending = bytearray()

        def flush_bytes():
            if pending:  # byte fallbacks are literal text: escape them like the rest
                text = pending.decode("utf-8", "replace")
                pieces.append(text.replace("_", _ESCAPED_UNDERSCORE))
                pending.clear()

        for raw in ids:
            index = int(raw) - _OFFSET - 1  # position in the sub-word list, then the bytes
            if index < 0:
                continue
            if index < len(self.subwords):
                flush_bytes()
                subword = self.subwords[index]
                # A trailing "_" marks the end of a word followed by one space.
                pieces.append(subword[:-1] + " " if subword.endswith("_") else subword)
            elif index < len(self.subwords) + _NUM_BYTES:
                pending.append(index - len(self.subwords))
            else:
                raise ValueError(f"token id {raw} is outside the vocabulary of {self.vocab_size}")
        flush_bytes()
        return "".join(pieces).replace(_ESCAPED_UNDERSCORE, "_")

    # ---- the vocabulary file ---------------------------------------------------------
    def to_json(self) -> str:
        """JSON, so sub-words holding quotes, tabs or newlines survive (tfds' file is
        one quoted sub-word per line)."""
        return json.dumps({"format": "tfds SubwordTextEncoder sub-words; id = index + 2",
                           "pad_id": PAD_ID, "eos_id": EOS_ID, "vocab_size": self.vocab_size,
                           "subwords": self.subwords}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> SubwordTokenizer:
        return cls(json.loads(text)["subwords"])


def encode_all(tokenizer: SubwordTokenizer, texts: Iterable[str], workers: int = 1,
               chunk: int = 2048) -> Iterator[list[int]]:
    """``tokenizer.encode`` of every text, in order, streamed.

    With ``workers`` > 1 chunks are encoded by that many spawned processes (the Python
    encoder is the slow part of preparation: roughly 10-20k sentences a second per
    core). At most ``2 * workers`` chunks are in flight, so the corpus never sits in
    memory. Spawned, not forked: the parent runs TensorFlow's threads.
    """
    if workers <= 1:
        yield from map(tokenizer.encode, texts)
        return
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with context.Pool(workers, initializer=_init_worker, initargs=(tokenizer.subwords,)) as pool:
        pending: deque = deque()
        for batch in _chunks(texts, chunk):
            pending.append(pool.apply_async(_encode_chunk, (batch,)))
            if len(pending) >= 2 * workers:
                yield from pending.popleft().get()
        while pending:
            yield from pending.popleft().get()


def default_workers() -> int:
    return min(8, available_cpus())


def _chunks(items: Iterable, size: int) -> Iterator[list]:
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


_WORKER: SubwordTokenizer | None = None


def _init_worker(subwords: list[str]) -> None:
    global _WORKER
    _WORKER = SubwordTokenizer(subwords)


def _encode_chunk(texts: list[str]) -> list[list[int]]:
    return [_WORKER.encode(text) for text in texts]
