"""Fashion-MNIST's sources: the original IDX files where they are at hand, else
tensorflow-datasets.

The full data set (60,000 + 10,000 images) needs no download where its IDX files are on
disk: Debian's package ``dataset-fashion-mnist`` installs them in ``DEBIAN_FOLDER``, and a
user may name any folder holding them. The source is chosen when the data set is
prepared, in this order:

1. the folder in the environment variable ``BATCHSCALE_FASHION_MNIST_DIR`` (read at call
   time), which must hold the four files: an explicit choice is never silently ignored;
2. a tensorflow-datasets copy already prepared locally (``tfds build fashion_mnist``, or
   an earlier download): no download, and the same examples as studies prepared before
   the IDX reader existed;
3. Debian's package folder, where it holds the four files;
4. tensorflow-datasets, which downloads (and, without network, keeps retrying).

Both give the paper's 55,000/5,000/10,000 split from the official training and test
sets, but not the same examples: the IDX split takes the training file's first 55,000
images in file order and its last 5,000 for validation, while tfds shuffled the examples
when it prepared the data set, so its ``train[:55000]`` is another subset. What a prepared
store came from is therefore recorded (``provenance`` in its info.json): the source, the
folder, each file's sha256, and the split rule.
"""

from __future__ import annotations

import os

import numpy as np

from batchscale.core.errors import InputError
from batchscale.workloads.idx_files import read_idx_recorded

FOLDER_VARIABLE = "BATCHSCALE_FASHION_MNIST_DIR"
DEBIAN_FOLDER = "/usr/share/datasets/fashion-mnist"
DEBIAN_PACKAGE = "dataset-fashion-mnist"
IDX_FILES = {  # (images, labels) of the official training and test sets, without ".gz"
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
IDX_SHAPES = {"train": (60_000, 28, 28), "test": (10_000, 28, 28)}
TRAIN_EXAMPLES = 55_000  # the rest of the training file (5,000) is the validation split
IDX_SPLIT_RULE = ("train: examples 0-54999 of the IDX training file; validation: examples "
                  "55000-59999 (the last 5,000, as tfds' train[55000:] slices); test: the IDX "
                  "test file; each in file order")


def idx_paths(folder: str) -> tuple[dict[str, str], list[str]]:
    """``({file stem: path}, [missing stems])`` of the four IDX files in ``folder``, each
    gzip-compressed (``.gz``, preferred) or not."""
    found, missing = {}, []
    for stem in (name for pair in IDX_FILES.values() for name in pair):
        path = next((p for p in (os.path.join(folder, stem + ".gz"), os.path.join(folder, stem))
                     if os.path.isfile(p)), None)
        if path is None:
            missing.append(stem)
        else:
            found[stem] = path
    return found, missing


def tfds_prepared(name: str = "fashion_mnist") -> bool:
    """Whether tensorflow-datasets holds a prepared copy of ``name`` (no download needed)."""
    try:
        import tensorflow_datasets as tfds
    except ImportError:
        return False
    builder = tfds.builder(name)  # no folder: no need to ask (tfds would log a warning)
    return builder.data_path.exists() and bool(builder.is_prepared())


def choose_source(environ=None) -> tuple[str, str]:
    """``("idx", folder)`` or ``("tfds", why)``, in the order of the module's docstring."""
    environ = os.environ if environ is None else environ
    folder = environ.get(FOLDER_VARIABLE, "").strip()
    if folder:
        if not os.path.isdir(folder):
            raise InputError(f"{FOLDER_VARIABLE}={folder}: not a folder; name the folder that "
                             "holds Fashion-MNIST's four IDX files, or unset it")
        missing = idx_paths(folder)[1]
        if missing:
            raise InputError(f"{FOLDER_VARIABLE}={folder}: no {', '.join(missing)} "
                             "(.gz or not) there; it must hold Fashion-MNIST's four IDX files")
        return "idx", folder
    if tfds_prepared():
        return "tfds", "a prepared tensorflow-datasets copy"
    if not idx_paths(DEBIAN_FOLDER)[1]:
        return "idx", DEBIAN_FOLDER
    return "tfds", (f"no IDX files ({FOLDER_VARIABLE} unset, Debian's {DEBIAN_PACKAGE} "
                    "not installed): a tensorflow-datasets download")


def load_idx_folder(folder: str) -> dict:
    """The paper's split of the IDX files in ``folder`` (see ``IDX_SPLIT_RULE``), and what
    info.json records about them: ``{split: (uint8 (N, 28, 28, 1), int64 (N,)),
    "record": {"provenance": ...}}``."""
    paths = idx_paths(folder)[0]
    arrays, files = {}, {}
    for part, stems in IDX_FILES.items():
        (images, image_file), (labels, label_file) = (read_idx_recorded(paths[s]) for s in stems)
        for stem, digests in ((stems[0], image_file), (stems[1], label_file)):
            files[os.path.basename(paths[stem])] = digests
        if images.shape != IDX_SHAPES[part] or images.dtype != np.uint8:
            raise InputError(f"{paths[stems[0]]}: {images.dtype} images of shape {images.shape}; "
                             f"Fashion-MNIST's are uint8 {IDX_SHAPES[part]}")
        largest = int(labels.max()) if labels.size else None
        if labels.shape != images.shape[:1] or labels.dtype != np.uint8 or largest > 9:
            raise InputError(f"{paths[stems[1]]}: {labels.dtype} labels of shape {labels.shape} "
                             f"(largest {largest}); expected uint8 ({len(images)},) in 0..9")
        arrays[part] = (images[..., None], labels.astype(np.int64))
    (train_x, train_y), test = arrays["train"], arrays["test"]
    chosen_by = "Debian package " + DEBIAN_PACKAGE if folder == DEBIAN_FOLDER else FOLDER_VARIABLE
    return {
        "train": (train_x[:TRAIN_EXAMPLES], train_y[:TRAIN_EXAMPLES]),
        "validation": (train_x[TRAIN_EXAMPLES:], train_y[TRAIN_EXAMPLES:]),
        "test": test,
        "record": {"provenance": {"source": "idx folder", "folder": os.path.abspath(folder),
                                  "chosen_by": chosen_by, "files": files,
                                  "split_rule": IDX_SPLIT_RULE}},
    }


def load_fashion_mnist() -> dict:
    """Fashion-MNIST with the paper's 55,000/5,000/10,000 split, from the first source at
    hand (see the module's docstring); ``"record"`` says which (``"provenance"``)."""
    from batchscale.workloads.small_images import PAPER_SLICES, load_tfds_splits

    kind, where = choose_source()
    if kind == "idx":
        return load_idx_folder(where)
    splits = load_tfds_splits("fashion_mnist", PAPER_SLICES)
    splits["record"]["provenance"]["chosen_by"] = where
    return splits
