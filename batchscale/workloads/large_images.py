"""ImageNet and Open Images: prepared from tensorflow-datasets into shards of JPEG bytes.

Neither fits a trial's memory, so preparation copies each image's encoded bytes (never
decoded here) and its label(s) into shards in the store (``shards``), and trials stream
them through ``image_stream.ImageStream``, which decodes, augments and batches. Both
take the workload option ``image_size`` (the crop, default 224; see ``image_stream``).

tensorflow-datasets is imported only when a preparer runs. Under
``tfds.testing.mock_data`` (tests) a source has no recorded split sizes and ignores
split slices; preparers then record ``"mock": true`` and skip the size checks.

``split_sizes`` here are what tfds yields, not the paper's where the two cannot agree
(ImageNet's test hold-out, Open Images' training set: see each entry's notes); the
prepared counts are in the store's info.json.
"""

from __future__ import annotations

import numpy as np

from batchscale.core.names import DATA_SPLITS
from batchscale.workloads.dataset_record import DatasetInfo
from batchscale.workloads.shards import write_split

EXAMPLES_PER_SHARD = 1000  # ~100 MB of ImageNet JPEGs: few files, yet many shards to shuffle

IMAGENET_TRAIN = 1_281_167  # the official ILSVRC2012 training set
IMAGENET_TEST = 50_045  # held out of it as the paper's test set
IMAGENET_SLICES = {
    "train": f"train[:{IMAGENET_TRAIN - IMAGENET_TEST}]",
    "validation": "validation",  # the official validation set
    "test": f"train[{IMAGENET_TRAIN - IMAGENET_TEST}:]",
}
OPEN_IMAGES_TFDS = "open_images_v4/original"
OPEN_IMAGES_TRAIN = 1_743_042  # tfds' train split: the images with boxes, before our filter
HUMAN_SOURCES = ("verification", "crowdsource-verification")  # human-verified image labels
POSITIVE = 10  # tfds stores confidence * 10: 10 is a verified positive, 0 a verified negative


def _builder(name: str):
    import tensorflow_datasets as tfds

    builder = tfds.builder(name)
    builder.download_and_prepare()  # a no-op once prepared (and under mock data)
    return builder


def _write_splits(store, info: DatasetInfo, builder, slices: dict, examples, log,
                  examples_per_shard: int, decoders) -> dict:
    """Shard every split; ``examples(split, tfds examples)`` yields what to store."""
    import tensorflow_datasets as tfds

    mock = builder.info.splits.total_num_examples == 0
    splits = {}
    for split in DATA_SPLITS:
        dataset = builder.as_dataset(split=slices[split], decoders=decoders, shuffle_files=False)
        splits[split] = write_split(store.fs, f"datasets/{info.name}", split,
                                    examples(split, tfds.as_numpy(dataset)), examples_per_shard, log)
        count = splits[split]["examples"]
        if not mock and count != info.split_sizes[split]:
            log(f"  {split}: {count} examples, registered {info.split_sizes[split]}")
    return {"splits": splits, "mock": mock,
            "tfds": {"name": builder.info.full_name, "splits": slices}}


def prepare_imagenet(store, info: DatasetInfo, log=print,
                     examples_per_shard: int = EXAMPLES_PER_SHARD) -> dict:
    """ILSVRC2012 as JPEG bytes + label: train minus a 50,045 hold-out (the test set),
    the official validation set as validation."""
    import tensorflow_datasets as tfds

    builder = _builder("imagenet2012")
    sizes = {name: split.num_examples for name, split in builder.info.splits.items()}
    if sizes and sizes.get("train") != IMAGENET_TRAIN:
        raise RuntimeError(f"imagenet2012 has {sizes} examples; expected {IMAGENET_TRAIN} in train")

    def examples(split, source):
        for example in source:
            yield {"image": example["image"], "label": np.int64(example["label"])}

    return _write_splits(store, info, builder, IMAGENET_SLICES, examples, log, examples_per_shard,
                         {"image": tfds.decode.SkipDecoding()})


def human_positives(objects: dict, human_sources: np.ndarray) -> np.ndarray:
    """Sorted trainable class ids an image has as human-verified positive labels (tfds
    ``objects_trainable``: label, confidence * 10, source); machine labels are ignored."""
    keep = np.isin(objects["source"], human_sources) & (np.asarray(objects["confidence"]) == POSITIVE)
    return np.unique(np.asarray(objects["label"])[keep]).astype(np.int32)


def prepare_open_images(store, info: DatasetInfo, log=print,
                        examples_per_shard: int = EXAMPLES_PER_SHARD) -> dict:
    """Open Images V4 as JPEG bytes + positive trainable class ids; images without any
    human-verified positive among the 7,186 trainable classes are left out (the paper's
    filter)."""
    import tensorflow_datasets as tfds

    builder = _builder(OPEN_IMAGES_TFDS)
    objects = builder.info.features["objects_trainable"]
    human = np.array([objects["source"].str2int(name) for name in HUMAN_SOURCES])
    dropped = dict.fromkeys(DATA_SPLITS, 0)

    def examples(split, source):
        for example in source:
            labels = human_positives(example["objects_trainable"], human)
            if len(labels):
                yield {"image": example["image"], "labels": labels}
            else:
                dropped[split] += 1

    decoders = tfds.decode.PartialDecoding(
        {"image": True, "objects_trainable": True}, decoders={"image": tfds.decode.SkipDecoding()})
    slices = {split: split for split in DATA_SPLITS}
    record = _write_splits(store, info, builder, slices, examples, log, examples_per_shard, decoders)
    log(f"  left out images without a human-verified trainable positive: {dropped}")
    return {**record, "num_classes": objects["label"].num_classes,
            "images_without_positives": dropped}


_MANUAL = ("needs the ImageNet download: put ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar "
           "(from https://image-net.org/download-images, after registering) in tfds' manual_dir, "
           "by default ~/tensorflow_datasets/downloads/manual/ (<data_dir>/downloads/manual), or "
           "build it first with `tfds build imagenet2012 --manual_dir=DIR`.")

DATASETS = [
    DatasetInfo(
        name="imagenet",
        description="ImageNet (ILSVRC2012, tfds imagenet2012): train minus 50,045 held-out "
        "test images / official validation; VGG-style scale augmentation, mean RGB subtracted",
        source="tfds",
        loader=f"{__name__}:prepare_imagenet",
        num_classes=1000,
        input_shape=(224, 224, 3),
        split_sizes={"train": IMAGENET_TRAIN - IMAGENET_TEST, "validation": 50_000,
                     "test": IMAGENET_TEST},
        storage="shards",
        pipeline="batchscale.workloads.image_stream:ImageStream",
        options={"image_size": 224},
        notes="Preparation " + _MANUAL + " The paper reports 1,281,167 training images and "
        "50,045 test images split from the official training set, but that set has only "
        "1,281,167 images: we hold out 50,045 of them (the last 50,045 in tfds' order) as "
        "the test set and train on the other 1,231,122.",
    ),
    DatasetInfo(
        name="open_images",
        description="Open Images V4 (tfds open_images_v4/original), 7,186 trainable classes, "
        "human-verified positive image labels, images with at least one; multi-label",
        source="tfds",
        loader=f"{__name__}:prepare_open_images",
        num_classes=7186,
        input_shape=(224, 224, 3),
        # What tfds gives: train at most its 1,743,042 images (the paper had 4,526,492, see
        # notes); validation and test the paper's filtered sizes.
        split_sizes={"train": OPEN_IMAGES_TRAIN, "validation": 41_225, "test": 124_293},
        task="multilabel",
        storage="shards",
        pipeline="batchscale.workloads.image_stream:ImageStream",
        options={"image_size": 224},
        notes="Labels as in the paper: tfds' objects_trainable (the 7,186 trainable classes), "
        "positives only where a human verified them (sources verification and "
        "crowdsource-verification, confidence 1), all other classes negative. But tfds "
        "downloads only the 1,743,042 training images that have bounding boxes (the "
        "CVDF tars), not all ~9M: our training set is at most that (the prepared count is "
        "in info.json; split_sizes holds the bound), against the paper's 4,526,492. "
        "Validation (41,620) and test (125,436) are complete, so their filtered sizes "
        "should match the paper's. Download ~565 GiB.",
    ),
]
