"""Streamed image data sets (ImageNet, Open Images): JPEG bytes in, float32 batches out.

Preparation stores each image's encoded bytes untouched (see ``large_images``); trials
decode and augment them here, as the paper did following Simonyan & Zisserman (2014),
Appendix A.1:

- training: a random integer S in [256, 512], an aspect-preserving resize so the
  smaller side is S, a random 224 x 224 crop, a random horizontal flip;
- evaluation: the smaller side resized to 256, the central 224 x 224 crop;
- both: the global mean RGB of Simonyan & Zisserman subtracted (pixels stay 0..255
  otherwise, no division).

The crop size is the workload option ``image_size`` (default 224); the resize sizes
scale with it (S in [256, 512] * image_size / 224), so tests and toy studies can run
at a few pixels. Decoding and resizing use Pillow, which releases the GIL while it
decodes and resamples, so a thread pool decodes in parallel; JPEGs are decoded at a
reduced DCT scale when that still leaves the smaller side >= S (``Image.draft``), and
resizing is Pillow's antialiased bilinear. Random choices are drawn in example order
from a seeded generator, so a seed fixes the whole training stream whatever the
threads do.
"""

from __future__ import annotations

import io
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import islice

import numpy as np

from batchscale.workloads.inputs import InputPipeline, available_cpus
from batchscale.workloads.shards import ShardReader, ordered_examples, shuffled_examples

MEAN_RGB = np.array([123.68, 116.779, 103.939], np.float32)  # Simonyan & Zisserman
PAPER_CROP = 224


def resize_sides(image_size: int) -> tuple[int, int, int]:
    """(smallest training S, largest training S, evaluation side) for a crop of
    ``image_size``: the paper's 256, 512 and 256 at 224, scaled in proportion."""
    def scale(side: int) -> int:
        return max(image_size, round(side * image_size / PAPER_CROP))

    return scale(256), scale(512), scale(256)


def decode(data, side: int):
    """An RGB Pillow image of encoded bytes (JPEG, PNG...), decoded at the smallest JPEG
    scale whose smaller side is still >= ``side``."""
    from PIL import Image

    image = Image.open(io.BytesIO(bytes(data)))
    image.draft("RGB", (side, side))  # no-op for formats other than JPEG
    return image.convert("RGB")


def resize_smaller_side(image, side: int):
    """Aspect-preserving resize so the smaller side is ``side`` (bilinear)."""
    from PIL import Image

    width, height = image.size
    if width <= height:
        size = (side, max(side, round(height * side / width)))
    else:
        size = (max(side, round(width * side / height)), side)
    return image if size == image.size else image.resize(size, Image.BILINEAR)


def crop_box(width: int, height: int, size: int, u_x: float | None = None,
             u_y: float | None = None) -> tuple[int, int, int, int]:
    """A ``size`` square inside the image: at uniform fractions ``u_x, u_y`` in [0, 1) of
    the free room, or central when they are None."""
    room_x, room_y = width - size, height - size
    left = room_x // 2 if u_x is None else int(u_x * (room_x + 1))
    top = room_y // 2 if u_y is None else int(u_y * (room_y + 1))
    return left, top, left + size, top + size


def train_image(data, size: int, side: int, u_x: float, u_y: float, flip: bool, out=None):
    """One training input: resize to ``side``, crop at (u_x, u_y), maybe flip, minus mean."""
    image = resize_smaller_side(decode(data, side), side)
    pixels = np.asarray(image.crop(crop_box(*image.size, size, u_x, u_y)))
    if flip:
        pixels = pixels[:, ::-1]
    return np.subtract(pixels, MEAN_RGB, out=out, dtype=np.float32)


def eval_image(data, size: int, side: int, out=None):
    """One evaluation input: resize to ``side``, central crop, minus the mean RGB."""
    image = resize_smaller_side(decode(data, side), side)
    pixels = np.asarray(image.crop(crop_box(*image.size, size)))
    return np.subtract(pixels, MEAN_RGB, out=out, dtype=np.float32)


class ImageStream(InputPipeline):
    """A sharded image data set as batches (see ``batchscale.workloads.inputs``).

    Shards (fields ``image`` = encoded bytes and ``label`` or ``labels``) are read ahead
    by a ``ShardReader``; training shuffles shard order and examples within a window of
    shards, every epoch anew; ``threads`` decode, ``prefetch_batches`` batches ahead.
    Targets: int64 labels (classification) or float32 multi-hot rows (multilabel, from
    each example's positive class ids).
    """

    def __init__(self, store, info, stored: dict, options: dict, *, threads: int | None = None,
                 prefetch_batches: int = 2):
        self.task = info.task
        self.image_size = int(options.get("image_size", PAPER_CROP))
        self.input_shape = (self.image_size, self.image_size, 3)
        self.num_outputs = int(stored.get("num_classes", info.num_classes))
        self.splits = stored["splits"]
        self.num_train_examples = int(self.splits["train"]["examples"])
        self.fs, self.prefix = store.fs, f"datasets/{info.name}"
        self.threads = threads or min(32, available_cpus())
        self.prefetch_batches = prefetch_batches
        self.min_side, self.max_side, self.eval_side = resize_sides(self.image_size)

    def reader(self, split: str) -> ShardReader:
        return ShardReader(self.fs, self.prefix, self.splits[split]["shards"])

    def train_batches(self, batch_size: int, seed: int) -> Iterator[tuple]:
        """Endless batches of exactly ``batch_size``; the seed fixes order and augmentation."""
        shards = self.reader("train").shards(seed=seed, repeat=True)
        rng = np.random.default_rng([seed, 2])

        def jobs():
            for example in shuffled_examples(shards, seed=[seed, 1]):
                side = int(rng.integers(self.min_side, self.max_side + 1))
                u_x, u_y, flip = rng.random(3)
                yield example, (side, u_x, u_y, flip < 0.5)

        try:
            yield from self._batches(jobs(), batch_size)
        finally:
            shards.close()

    def eval_batches(self, split: str, batch_size: int, limit: int | None = None) -> Iterator[tuple]:
        """One pass over ``split`` (its first ``limit`` examples) in storage order."""
        shards = self.reader(split).shards()
        examples = islice(ordered_examples(shards), limit)
        try:
            yield from self._batches(((example, None) for example in examples), batch_size)
        finally:
            shards.close()

    def _batches(self, jobs: Iterator[tuple], batch_size: int) -> Iterator[tuple]:
        pool = ThreadPoolExecutor(self.threads, thread_name_prefix="decode")
        pending: deque = deque()
        try:
            while True:
                while len(pending) <= self.prefetch_batches:
                    chunk = list(islice(jobs, batch_size))
                    if not chunk:
                        break
                    pending.append(self._submit(pool, chunk))
                if not pending:
                    return
                images, targets, futures = pending.popleft()
                for future in futures:
                    future.result()
                yield images, targets
        finally:
            try:
                pool.shutdown(wait=True, cancel_futures=True)
            except AttributeError:  # an unclosed stream at interpreter exit: stdlib torn down
                pass

    def _submit(self, pool: ThreadPoolExecutor, chunk: list) -> tuple:
        images = np.empty((len(chunk), *self.input_shape), np.float32)
        step = max(1, min(32, -(-len(chunk) // self.threads)))
        futures = [pool.submit(self._fill, images, start, chunk[start:start + step])
                   for start in range(0, len(chunk), step)]
        return images, self._targets([example for example, _ in chunk]), futures

    def _fill(self, images: np.ndarray, start: int, jobs: list) -> None:
        for i, (example, augment) in enumerate(jobs, start):
            if augment is None:
                eval_image(example["image"], self.image_size, self.eval_side, out=images[i])
            else:
                train_image(example["image"], self.image_size, *augment, out=images[i])

    def _targets(self, examples: list[dict]) -> np.ndarray:
        if self.task == "multilabel":
            targets = np.zeros((len(examples), self.num_outputs), np.float32)
            for row, example in enumerate(examples):
                targets[row, np.asarray(example["labels"], np.int64)] = 1.0
            return targets
        return np.array([example["label"] for example in examples], np.int64)
