"""The paper's text data sets as language-modelling workloads: LM1B and C4 (for Common Crawl).

Preparation (TensorFlow and tensorflow-datasets, imported when it runs) streams the
sentences from tfds, builds the sub-word vocabulary (``tokenizer``) from the first
training sentences, and writes every sentence's token ids as ragged shards (see
``shards``) plus ``vocab.json``. Trials stream those shards through ``TextPipeline``
(NumPy only). How each split is made:

- LM1B (tfds ``lm1b``: ``train`` = the official 30,301,028 training sentences; ``test`` =
  all 50 held-out files, 306,688 sentences, in tfds' hash order, which no longer says
  which file a sentence came from). The paper's validation and test sets are held-out
  files 00000 and 00001 (6,075 and 6,206 sentences); ours are the first 6,075 and the
  next 6,206 sentences of tfds' ``test``: same sizes, random held-out sentences.
- C4 (tfds ``c4/en``) stands in for the paper's Common Crawl corpus (not public; 24,006
  sub-words, ~25.8 billion sentences, validation the first 6,075 held-out sentences).
  C4 holds documents; a sentence is a piece of a line (C4 keeps a document's lines)
  ending in ``.``, ``!`` or ``?`` (plus closing quotes) before a space and a capital,
  digit or opening quote (``split_sentences``; abbreviations such as "Mr." split too).
  Training sentences come from the first documents of tfds ``train`` up to a bound
  (``Preparation.train_sentences``, 100 million by default, roughly 5 million
  documents, so that few studies repeat data); validation and test are the first 6,075 and next
  6,075 sentences of tfds ``validation`` (the paper had no Common Crawl test set).

Next-token convention (tensor2tensor's, which the paper used): a sentence of m sub-words
w_1..w_m is predicted as w_1..w_m followed by the end-of-sentence id 1, each from the
tokens before it, the first from id 1. So inputs = [1, w_1, .., w_m], targets =
[w_1, .., w_m, 1], weights 1 on those m + 1 positions and 0 on padding (id 0); the
per-token cross entropy averages over m + 1 tokens per sentence (tensor2tensor's count
"including eos"). Training clips the m + 1 targets to ``train_length`` (64) tokens;
evaluation clips LM1B nowhere and C4 at ``eval_length`` (476), as the paper did.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator
from itertools import islice

import numpy as np

from batchscale.workloads.dataset_record import DatasetInfo
from batchscale.workloads.shards import write_split
from batchscale.workloads.text_pipeline import TextPipeline  # noqa: F401  (the pipeline)
from batchscale.workloads.tokenizer import EOS_ID, SubwordTokenizer, default_workers, encode_all

VOCAB_FILE = "vocab.json"


@dataclasses.dataclass(frozen=True)
class Preparation:
    """How a text data set is prepared, fixed once it is in the store (info.json records it).

    ``vocab_size``: target of the vocabulary search (ours: padding, end of sentence,
    sub-words and 256 bytes), reached within ~1%. ``vocab_sentences``: how many of the
    first training sentences the vocabulary is built from. ``train_sentences``: bound on
    the training sentences read (None: all). ``max_tokens``: sentences are stored
    clipped to this many sub-words (None: whole). ``workers``: encoding processes (0:
    up to 8 by CPU count).
    """

    tfds_name: str
    train_split: str
    holdout_split: str
    vocab_size: int
    vocab_sentences: int
    validation_sentences: int
    test_sentences: int
    train_sentences: int | None = None
    max_tokens: int | None = None
    documents: bool = False  # tfds texts are documents to split into sentences
    examples_per_shard: int = 100_000
    workers: int = 0
    data_dir: str | None = None  # tfds data_dir (None: tfds' default, TFDS_DATA_DIR)


PREPARATION = {
    # tensor2tensor's LanguagemodelLm1b32k: approx_vocab_size 2**15, 63,000 sentences.
    "lm1b": Preparation("lm1b", "train", "test", vocab_size=2**15, vocab_sentences=63_000,
                        validation_sentences=6_075, test_sentences=6_206),
    "c4": Preparation("c4/en", "train", "validation", vocab_size=24_006, vocab_sentences=200_000,
                      validation_sentences=6_075, test_sentences=6_075,
                      train_sentences=100_000_000, max_tokens=1024, documents=True),
}

_SENTENCE_BREAK = re.compile(
    r"(?:(?<=[.!?])|(?<=[.!?][\"'”’)\]]))\s+(?=[\"'“‘(\[]?[A-Z0-9])")


def split_sentences(document: str) -> list[str]:
    """The sentences of a C4 document: its lines, split after sentence-ending punctuation."""
    return [s.strip() for line in document.split("\n") for s in _SENTENCE_BREAK.split(line)
            if s.strip()]


def _tfds_sentences(prep: Preparation, split: str) -> Iterator[str]:
    import tensorflow_datasets as tfds

    data = tfds.load(prep.tfds_name, split=split, shuffle_files=False, try_gcs=True,
                     data_dir=prep.data_dir)
    for example in tfds.as_numpy(data):
        text = example["text"].decode("utf-8")
        if prep.documents:
            yield from split_sentences(text)
        elif text.strip():
            yield text.strip()


def prepare_text(store, info: DatasetInfo, log=print, prep: Preparation | None = None) -> dict:
    """Write ``info``'s vocabulary and shards into ``store``; return info.json's extra keys."""
    prep = prep or PREPARATION[info.name]
    prefix = f"datasets/{info.name}"
    log(f"{info.name}: building a ~{prep.vocab_size} sub-word vocabulary from the first "
        f"{prep.vocab_sentences} {prep.tfds_name} {prep.train_split} sentences")
    tokenizer = SubwordTokenizer.build(
        islice(_tfds_sentences(prep, prep.train_split), prep.vocab_sentences), prep.vocab_size)
    store.fs.write_text(f"{prefix}/{VOCAB_FILE}", tokenizer.to_json())
    log(f"{info.name}: vocabulary of {tokenizer.vocab_size} ids written")
    dtype = np.uint16 if tokenizer.vocab_size <= 2**16 else np.int32
    val, test = prep.validation_sentences, prep.test_sentences
    sources = {
        "validation": (prep.holdout_split, 0, val),
        "test": (prep.holdout_split, val, val + test),
        "train": (prep.train_split, 0, prep.train_sentences),
    }
    splits = {}
    for split, (source, start, stop) in sources.items():
        texts = islice(_tfds_sentences(prep, source), start, stop)
        stats = {"tokens": 0, "max_tokens": 0}
        examples = _examples(encode_all(tokenizer, texts, prep.workers or default_workers()),
                             prep.max_tokens, dtype, stats)
        splits[split] = {**write_split(store.fs, prefix, split, examples, prep.examples_per_shard,
                                       log=log), **stats,
                         "source": f"{prep.tfds_name} {source}[{start}:{'' if stop is None else stop}]"}
        log(f"{info.name}: {split}: {splits[split]['examples']} sentences, {stats['tokens']} tokens")
    return {"splits": splits, "vocab_size": tokenizer.vocab_size, "num_classes": tokenizer.vocab_size,
            "vocab_file": VOCAB_FILE, "pad_id": 0, "eos_id": EOS_ID,
            "token_dtype": np.dtype(dtype).name, "preparation": dataclasses.asdict(prep)}


def _examples(encoded: Iterable[list[int]], max_tokens, dtype, stats: dict) -> Iterator[dict]:
    for ids in encoded:
        ids = ids[:max_tokens] if max_tokens else ids
        stats["tokens"] += len(ids)
        stats["max_tokens"] = max(stats["max_tokens"], len(ids))
        yield {"tokens": np.asarray(ids, dtype=dtype)}


_LM = dict(source="tfds", loader=f"{__name__}:prepare_text", input_shape=(None,),
           task="language_model", storage="shards", pipeline=f"{__name__}:TextPipeline")

DATASETS = [
    DatasetInfo(
        name="lm1b",
        description="LM1B (One Billion Word benchmark) via tensorflow-datasets: the official "
                    "30,301,028 training sentences, 6,075/6,206 held-out sentences for "
                    "validation/test, ~32k sub-word vocabulary",
        num_classes=2**15, split_sizes={"train": 30_301_028, "validation": 6_075, "test": 6_206},
        options={"train_length": 64},
        notes="Validation/test are the first 6,075 and next 6,206 sentences of tfds' lm1b test "
              "split (all 50 held-out files, shuffled by tfds), not held-out files 00000/00001. "
              "Vocabulary: tfds' SubwordTextEncoder (tensor2tensor's algorithm) from the first "
              "63,000 training sentences, without tensor2tensor's replacement of words outside "
              "the original LM1B vocabulary by UNK. Cross entropy counts each sentence's "
              "end-of-sentence token, as tensor2tensor did.",
        **_LM),
    DatasetInfo(
        name="c4",
        description="C4 English (tfds c4/en) as a public stand-in for the paper's Common Crawl "
                    "(not public): sentences from C4 documents, ~24k sub-word vocabulary, a "
                    "bounded 100M-sentence training set",
        num_classes=24_006, split_sizes={"train": 100_000_000, "validation": 6_075, "test": 6_075},
        options={"train_length": 64, "eval_length": 476},
        notes="Sentences are C4 lines split after ., ! or ?; training reads the first documents "
              "of c4/en train until 100M sentences (Preparation.train_sentences); validation and "
              "test are the first 6,075 and next 6,075 sentences of c4/en validation. The goal "
              "3.9 is LM1B's: the paper gives none for Common Crawl and C4's vocabulary differs. "
              "tfds must find c4/en prepared (data_dir or tfds' GCS copy): generating it "
              "needs Apache Beam over Common Crawl.",
        **_LM),
]
