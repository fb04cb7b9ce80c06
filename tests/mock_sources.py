"""Offline stand-ins for tensorflow-datasets sources, shared by the data and training tests.

tfds cannot download here. ``tfds.testing.mock_data`` runs the real tfds loading code on
generated examples; where its random examples do not suit a data set (Open Images'
label sequences, checkable English text), these serve fixed examples through the
mock's ``as_dataset_fn`` instead.
"""

from __future__ import annotations

import dataclasses
import io
import random

import numpy as np
import pytest

from batchscale.store.layout import StudyStore
from batchscale.workloads import text_datasets as text
from batchscale.workloads.prepare import prepare_dataset


def encode(pixels, fmt="PNG"):
    buffer = io.BytesIO()
    _image().fromarray(np.asarray(pixels, np.uint8)).save(buffer, format=fmt)
    return buffer.getvalue()


def _image():
    from PIL import Image

    return Image


# ---- Open Images ----------------------------------------------------------------------
def open_images_source(n, seed=0):
    """Open Images-like examples: JPEG bytes and objects_trainable of every label source."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        k = int(rng.integers(0, 5))
        yield {"image": encode(rng.integers(0, 255, (*rng.integers(12, 40, 2), 3)), "JPEG"),
               "objects_trainable": {"label": rng.integers(0, 7186, k),
                                     "confidence": rng.choice([0, 10], k).astype(np.int32),
                                     "source": rng.integers(0, 3, k)}}


def mock_open_images(n: int):
    """tfds mock data serving ``n`` Open Images-like examples (image bytes undecoded)."""
    import tensorflow as tf
    import tensorflow_datasets as tfds

    def as_dataset(self, split, decoders=None, read_config=None, **kwargs):
        spec = {"image": tf.TensorSpec((), tf.string), "objects_trainable": {
            "label": tf.TensorSpec((None,), tf.int64), "confidence": tf.TensorSpec((None,), tf.int32),
            "source": tf.TensorSpec((None,), tf.int64)}}
        return tf.data.Dataset.from_generator(lambda: open_images_source(n), output_signature=spec)

    return tfds.testing.mock_data(as_dataset_fn=as_dataset)


# ---- text -------------------------------------------------------------------------------
WORDS = ("the cat dog sat on a mat and ran to my house big small red blue it was not "
         "very good news today market price rose fell 3.5 % , ; snake_case café naïve").split()
C4_FEATURES = ("url", "timestamp", "content-type", "content-length")


def english(n: int, seed: int, longest: int = 30) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, longest))) + " ."
            for _ in range(n)]


def documents(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["\n".join(" ".join(s.capitalize()[:-2] + "." for s in english(rng.randint(1, 3), rng.random()))
                      for _ in range(rng.randint(1, 3))) for _ in range(n)]


CORPUS = {
    "lm1b": {"train": english(80, 0), "test": english(30, 1)},
    "c4": {"train": documents(40, 2), "validation": documents(10, 3)},
}
LM1B_TINY = text.Preparation("lm1b", "train", "test", vocab_size=300, vocab_sentences=60,
                             validation_sentences=12, test_sentences=9, examples_per_shard=16,
                             workers=1)
C4_TINY = text.Preparation("c4/en", "train", "validation", vocab_size=300, vocab_sentences=40,
                           validation_sentences=5, test_sentences=4, train_sentences=30,
                           max_tokens=40, documents=True, examples_per_shard=8, workers=1)


def mock_corpus(corpus: dict):
    """tfds mock data serving ``corpus[dataset][split]`` as the ``text`` feature."""
    import tensorflow as tf
    import tensorflow_datasets as tfds

    def as_dataset(self, split, **kwargs):
        texts = corpus[self.name][str(split)]
        extra = {k: texts for k in C4_FEATURES} if self.name == "c4" else {}
        return tf.data.Dataset.from_tensor_slices({"text": texts, **extra})

    return tfds.testing.mock_data(as_dataset_fn=as_dataset)


def prepare_text(root: str, name: str, prep: text.Preparation, tmp_path) -> StudyStore:
    store = StudyStore(root)
    prep = dataclasses.replace(prep, data_dir=str(tmp_path / "tfds"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(text.PREPARATION, name, prep)
        prepare_dataset(store, name, log=lambda *_: None)
    return store


