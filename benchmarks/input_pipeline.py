"""How fast the streaming input pipelines feed a trial, on synthetic data in a local store.

ImageNet-like: JPEGs of random size (short side 300-500 px, as ImageNet's typical
images), written as shards exactly as preparation writes them, then read back through
``ImageStream`` with the paper's training augmentation at 224 px and at a smaller crop.
LM1B-like: random token sentences (mean ~20 tokens, as LM1B's training set) through
``TextPipeline``. Prints examples per second; compare the numbers of one run only.

    .venv/bin/python benchmarks/input_pipeline.py [--images 512] [--sentences 200000]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from batchscale.store.layout import StudyStore  # noqa: E402
from batchscale.workloads import get_dataset  # noqa: E402
from batchscale.workloads.dataset_registry import open_pipeline  # noqa: E402
from batchscale.workloads.shards import write_split  # noqa: E402


def _jpegs(n: int, rng) -> list[bytes]:
    from PIL import Image

    out = []
    for _ in range(n):
        short, long = int(rng.integers(300, 501)), int(rng.integers(400, 640))
        pixels = rng.integers(0, 256, (short, long, 3), dtype=np.uint8)
        pixels = (pixels // 32 * 32).astype(np.uint8)  # blocky, so JPEG sizes look like photos'
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
        out.append(buffer.getvalue())
    return out


def _timed(batches, count: int, batch_size: int) -> float:
    next(batches)  # start-up (threads, first shards) not counted
    started = time.perf_counter()
    for _ in range(count):
        next(batches)
    return count * batch_size / (time.perf_counter() - started)


def bench_images(root: str, n: int, threads: int) -> None:
    rng = np.random.default_rng(0)
    store = StudyStore(root)
    images = _jpegs(n, rng)
    examples = ({"image": images[i], "label": np.int64(i % 1000)} for i in range(n))
    split = write_split(store.fs, "datasets/imagenet", "train", examples, 128, log=lambda *_: None)
    store.write_dataset_info("imagenet", {"splits": {"train": split}, "num_classes": 1000})
    for size in (224, 64):
        pipeline = open_pipeline(store, get_dataset("imagenet"), {"image_size": size})
        pipeline.threads = threads
        rate = _timed(pipeline.train_batches(64, seed=0), max(2, n // 64), 64)
        print(f"imagenet-like train batches at {size}px, {threads} decode threads: {rate:,.0f} images/s")


def bench_text(root: str, n: int) -> None:
    rng = np.random.default_rng(1)
    store = StudyStore(root)
    lengths = np.clip(rng.geometric(1 / 20, n), 1, 200)
    examples = ({"tokens": rng.integers(2, 32000, k).astype(np.uint16)} for k in lengths)
    split = write_split(store.fs, "datasets/lm1b", "train", examples, 16384, log=lambda *_: None)
    store.write_dataset_info("lm1b", {"splits": {"train": split}, "vocab_size": 32000,
                                      "token_dtype": "uint16", "pad_id": 0, "eos_id": 1})
    pipeline = open_pipeline(store, get_dataset("lm1b"), {"train_length": 64})
    for batch_size in (256, 4096):
        rate = _timed(pipeline.train_batches(batch_size, seed=0), 20, batch_size)
        print(f"lm1b-like train batches of {batch_size}: {rate:,.0f} sentences/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--sentences", type=int, default=200_000)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    print(json.dumps({"cpus": os.cpu_count(), **vars(args)}))
    with tempfile.TemporaryDirectory() as root:
        bench_images(os.path.join(root, "img"), args.images, args.threads)
        bench_text(os.path.join(root, "txt"), args.sentences)


if __name__ == "__main__":
    main()
