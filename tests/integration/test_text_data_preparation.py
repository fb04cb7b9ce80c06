"""LM1B and C4 as language-model data: tokenizer, preparation from tfds mock data, batches.

tfds cannot download here, so preparation reads ``tfds.testing.mock_data``: either a
fixed small English-like corpus handed to the mock (``as_dataset_fn``), which makes
sentence contents and token counts checkable, or tfds' own random strings. TensorFlow
runs in-process, parallel encoding spawns processes and one store is on the GCS
emulator. The registry and the batches checked by hand are in tests/unit/test_text_data.py.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from batchscale.store.layout import StudyStore
from batchscale.workloads import text_datasets as text
from batchscale.workloads.dataset_registry import get_dataset, open_pipeline
from batchscale.workloads.tokenizer import EOS_ID, SubwordTokenizer, encode_all
from tests.mock_sources import C4_TINY, CORPUS, LM1B_TINY, english, mock_corpus
from tests.mock_sources import prepare_text as prepare


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """Local stores with tiny LM1B and C4 prepared from the fixed mock corpus."""
    tmp = tmp_path_factory.mktemp("text")
    with mock_corpus(CORPUS):
        return {name: prepare(str(tmp / name), name, prep, tmp)
                for name, prep in (("lm1b", LM1B_TINY), ("c4", C4_TINY))}


def pipeline(stores, name, **options):
    return open_pipeline(stores[name], get_dataset(name), options)


def tokenizer_of(store: StudyStore, name: str) -> SubwordTokenizer:
    return SubwordTokenizer.from_json(store.fs.read_text(f"datasets/{name}/vocab.json"))


def eval_rows(pipe, split, batch_size=5, limit=None):
    """Every evaluated sentence as (inputs, targets) rows cut to their weights."""
    rows = []
    for inputs, targets, weights in pipe.eval_batches(split, batch_size, limit):
        for x, y, w in zip(inputs, targets, weights):
            n = int(w.sum())
            rows.append((x[:n], y[:n]))
    return rows


# ---- tokenizer ------------------------------------------------------------------------
def test_tokenizer_is_invertible_and_is_tfds_subword_encoder():
    from tensorflow_datasets.core.deprecated.text import SubwordTextEncoder

    corpus = english(200, 5) + ["def my_function(x_1): return x_1 * 2", "a__b _c d_ __init__"] * 5
    tok = SubwordTokenizer.build(corpus, 320)
    assert abs(tok.vocab_size - 320) <= 4  # tfds' search stops within 1%
    reference = SubwordTextEncoder(vocab_list=tok.subwords)
    tricky = ["snake_case and __dunder__ names", "x_1=y_2", "  two  spaces\tand tab ",
              "unicode: café naïve 漢字 😀", "", "_", "trailing_", "UPPER lower 123.45 %"]
    for sentence in corpus[:50] + tricky:
        ids = tok.encode(sentence)
        assert tok.decode(ids) == sentence
        assert ids == [i + 1 for i in reference.encode(sentence)]  # tfds' ids, shifted by one
        assert all(2 <= i < tok.vocab_size for i in ids)
    assert tok.decode([EOS_ID, *tok.encode("a cat"), EOS_ID, 0, 0]) == "a cat"
    again = SubwordTokenizer.from_json(tok.to_json())
    assert again.subwords == tok.subwords and again.vocab_size == tok.vocab_size


@pytest.mark.slow
def test_parallel_encoding_matches_serial():
    tok = SubwordTokenizer.build(english(100, 6), 300)
    texts = english(300, 7)
    assert list(encode_all(tok, texts, workers=2, chunk=16)) == [tok.encode(t) for t in texts]



# ---- preparation ----------------------------------------------------------------------
def test_lm1b_preparation_maps_the_splits(prepared):
    store = prepared["lm1b"]
    info = store.read_dataset_info("lm1b")
    tok = tokenizer_of(store, "lm1b")
    assert info["vocab_size"] == info["num_classes"] == tok.vocab_size
    assert abs(tok.vocab_size - 300) <= 5 and info["token_dtype"] == "uint16"
    assert (info["pad_id"], info["eos_id"], info["vocab_file"]) == (0, 1, "vocab.json")
    splits = info["splits"]
    assert {s: splits[s]["examples"] for s in splits} == {"train": 80, "validation": 12, "test": 9}
    assert len(splits["train"]["shards"]) == 5  # 16 sentences a shard
    expected = {"train": CORPUS["lm1b"]["train"], "validation": CORPUS["lm1b"]["test"][:12],
                "test": CORPUS["lm1b"]["test"][12:21]}
    pipe = pipeline(prepared, "lm1b")
    for split, sentences in expected.items():
        rows = eval_rows(pipe, split)
        assert [tok.decode(y) for _, y in rows] == sentences  # storage order, untouched text
        assert splits[split]["tokens"] == sum(len(tok.encode(s)) for s in sentences)


def test_c4_preparation_makes_bounded_sentences(prepared):
    store = prepared["c4"]
    info = store.read_dataset_info("c4")
    tok = tokenizer_of(store, "c4")
    sentences = {split: [s for d in CORPUS["c4"][source] for s in text.split_sentences(d)]
                 for split, source in (("train", "train"), ("holdout", "validation"))}
    expected = {"train": sentences["train"][:30], "validation": sentences["holdout"][:5],
                "test": sentences["holdout"][5:9]}
    assert {s: info["splits"][s]["examples"] for s in expected} == {"train": 30, "validation": 5,
                                                                    "test": 4}
    pipe = pipeline(prepared, "c4", eval_length=1000)
    for split, want in expected.items():
        decoded = [tok.decode(y) for _, y in eval_rows(pipe, split)]
        assert [t if len(tok.encode(t)) <= 40 else tok.decode(tok.encode(t)[:40]) for t in want] == decoded
    assert info["splits"]["train"]["max_tokens"] <= 40
    assert info["preparation"]["train_sentences"] == 30


def test_preparation_on_gcs_from_random_mock_data(gcs_root, tmp_path):
    import tensorflow_datasets as tfds

    tiny = dataclasses.replace(LM1B_TINY, vocab_sentences=20, validation_sentences=5, test_sentences=5,
                               examples_per_shard=8)
    with tfds.testing.mock_data(num_examples=24):
        store = prepare(gcs_root, "lm1b", tiny, tmp_path)
    info = store.read_dataset_info("lm1b")
    assert {s: info["splits"][s]["examples"] for s in info["splits"]} == {
        "train": 24, "validation": 5, "test": 5}
    assert store.fs.exists("datasets/lm1b/vocab.json")
    assert store.fs.exists("datasets/lm1b/train/shard-00002.npz")
    pipe = open_pipeline(StudyStore(gcs_root), get_dataset("lm1b"))
    inputs, targets, weights = next(pipe.train_batches(16, seed=0))
    assert inputs.shape == targets.shape == weights.shape and inputs.shape[0] == 16
    assert sum(len(y) for _, y in eval_rows(pipe, "validation")) == info["splits"]["validation"]["tokens"] + 5


def test_train_batches_follow_the_contract(prepared):
    pipe = pipeline(prepared, "lm1b", train_length=8)
    assert (pipe.task, pipe.input_shape, pipe.num_train_examples) == ("language_model", (None,), 80)
    assert pipe.num_outputs == prepared["lm1b"].read_dataset_info("lm1b")["vocab_size"]
    batches = pipe.train_batches(7, seed=0)
    for _ in range(30):  # 210 sentences: past two epochs of 80
        inputs, targets, weights = next(batches)
        assert inputs.shape == targets.shape == weights.shape == (7, 8)
        assert inputs.dtype == targets.dtype == np.int32 and weights.dtype == np.float32
        assert (inputs[:, 0] == EOS_ID).all()
        real = weights > 0
        assert (real == (targets != 0)).all() and (real == (inputs != 0)).all()
        assert (inputs[:, 1:][real[:, 1:]] == targets[:, :-1][real[:, 1:]]).all()
        lengths = real.sum(1)
        ends = targets[np.arange(7), lengths - 1]
        assert ((ends == EOS_ID) | (lengths == 8)).all()
        assert ((targets == EOS_ID).sum(1) == (ends == EOS_ID)).all()  # EOS only last


def test_eval_batches_do_not_clip_lm1b_but_clip_c4(prepared):
    lm1b = pipeline(prepared, "lm1b", train_length=8)
    tok = tokenizer_of(prepared["lm1b"], "lm1b")
    want = [len(tok.encode(s)) + 1 for s in CORPUS["lm1b"]["test"][:12]]
    assert max(want) > 8
    batches = list(lm1b.eval_batches("validation", 5))
    assert [len(b[0]) for b in batches] == [5, 5, 2]
    assert [int(w.sum()) for b in batches for w in b[2]] == want
    assert all(b[0].shape[1] in (16, 32, 64, 128) and b[0].shape[1] >= b[2].sum(1).max() for b in batches)
    assert [len(b[0]) for b in lm1b.eval_batches("train", 32, limit=40)] == [32, 8]
    c4 = pipeline(prepared, "c4", eval_length=8)
    for inputs, _, weights in c4.eval_batches("validation", 4):
        assert inputs.shape[1] <= 8 and weights.sum(1).max() <= 8


def test_train_order_is_reproducible_for_a_seed(prepared):
    pipe = pipeline(prepared, "lm1b")

    def first(seed, n=25):
        batches = pipe.train_batches(8, seed)
        return [next(batches)[1] for _ in range(n)]

    a, b, c = first(3), first(3), first(4)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, c))
    # Shuffled, not storage order, and every training sentence comes round (200 > 2 epochs).
    seen = [tuple(row[row > 0]) for batch in a for row in batch]
    stored = [tuple(y) for _, y in eval_rows(pipe, "train")]
    assert seen[:16] != stored[:16] and set(seen) == set(stored)


def test_info_json_records_the_preparation(prepared):
    info = json.loads(prepared["lm1b"].fs.read_text("datasets/lm1b/info.json"))
    assert info["preparation"]["vocab_sentences"] == 60 and info["task"] == "language_model"
    assert info["splits"]["validation"]["source"] == "lm1b test[0:12]"
    assert info["splits"]["test"]["source"] == "lm1b test[12:21]"
