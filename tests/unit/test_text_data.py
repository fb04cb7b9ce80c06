"""LM1B and C4 as language-model data: the registry, sentence splitting, batches by hand.

Building the tokenizer (tfds' SubwordTextEncoder, which imports TensorFlow), preparing
both data sets from tfds mock data and the pipelines over prepared stores are in
tests/integration/test_text_data_preparation.py.
"""

from __future__ import annotations

import numpy as np

from batchscale.workloads import text_datasets as text
from batchscale.workloads.dataset_registry import get_dataset
from batchscale.workloads.defaults import workload_defaults
from batchscale.workloads.text_pipeline import Ragged


# ---- registry -------------------------------------------------------------------------
def test_registry_entries():
    for name in ("lm1b", "c4"):
        info = get_dataset(name)
        assert (info.task, info.storage, info.metrics) == ("language_model", "shards",
                                                            ("cross_entropy_error",))
        assert workload_defaults(name, "transformer_base").goal == {"metric": "cross_entropy_error",
                                                                     "value": 3.9}
        assert info.options["train_length"] == 64
    assert get_dataset("lm1b").split_sizes == {"train": 30_301_028, "validation": 6_075, "test": 6_206}
    assert get_dataset("c4").options["eval_length"] == 476 and "Common Crawl" in get_dataset("c4").description


def test_split_sentences():
    doc = ('Prices rose 3.5% today. The market "closed." Then it fell!\n'
           "Is it over? yes it is.\n\n  A second line without an end")
    assert text.split_sentences(doc) == [
        "Prices rose 3.5% today.", 'The market "closed."', "Then it fell!", "Is it over? yes it is.",
        "A second line without an end"]


# ---- batches --------------------------------------------------------------------------
def test_hand_checked_batch_and_per_token_cross_entropy():
    sentences = Ragged.from_lists([[5, 6], [7, 8, 9], [10]])
    inputs, targets, weights = sentences.batch(None)
    assert inputs.shape == (3, 16) and inputs.dtype == targets.dtype == np.int32
    assert weights.dtype == np.float32
    assert targets[:, :5].tolist() == [[5, 6, 1, 0, 0], [7, 8, 9, 1, 0], [10, 1, 0, 0, 0]]
    assert inputs[:, :5].tolist() == [[1, 5, 6, 0, 0], [1, 7, 8, 9, 0], [1, 10, 0, 0, 0]]
    assert weights.sum() == 2 + 1 + 3 + 1 + 1 + 1 and not targets[:, 5:].any() and not inputs[:, 5:].any()
    # The paper's cross entropy: -sum log p(w_j | w_<j) over real tokens / their count.
    vocab = 11
    probs = np.full((3, 16, vocab), 0.05)
    probs[np.arange(3)[:, None], np.arange(16)[None, :], targets] = 0.5  # 0.5 on each target
    per_token = -np.log(probs[np.arange(3)[:, None], np.arange(16)[None, :], targets])
    assert np.isclose((per_token * weights).sum() / weights.sum(), np.log(2))
    # Clipped at 3: the long sentence loses its end-of-sentence target, the shape is 3.
    inputs, targets, weights = sentences.batch(3)
    assert targets.tolist() == [[5, 6, 1], [7, 8, 9], [10, 1, 0]]
    assert inputs.tolist() == [[1, 5, 6], [1, 7, 8], [1, 10, 0]]
    assert weights.sum() == 3 + 3 + 2


def test_shards_read_back_ragged_or_stacked():
    from batchscale.workloads.shards import encode_shard

    ragged = Ragged.from_npz(encode_shard([{"tokens": np.array([2, 3], np.uint16)},
                                           {"tokens": np.array([4], np.uint16)}]))
    stacked = Ragged.from_npz(encode_shard([{"tokens": np.array([2, 3], np.uint16)},
                                            {"tokens": np.array([4, 5], np.uint16)}]))
    assert ragged.lengths.tolist() == [2, 1] and ragged.values.tolist() == [2, 3, 4]
    assert stacked.lengths.tolist() == [2, 2] and stacked.values.tolist() == [2, 3, 4, 5]
    assert stacked.take(np.array([1, 0])).values.tolist() == [4, 5, 2, 3]
