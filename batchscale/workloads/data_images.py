"""The ``images`` format of a user's data: a folder with one subfolder per class (sorted
names = class indices), every image one size, decoded by Pillow to uint8 (one channel if
the first image is grey, else RGB). Hidden files and folders (``.DS_Store``) are skipped;
anything else that is not an image is refused (``data_checks``)."""

from __future__ import annotations

import hashlib
import io
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from batchscale.workloads.data_checks import check_same_size, refuse
from batchscale.workloads.data_readers import Facts, Loaded, one_line
from batchscale.workloads.data_sources import Source, folder_digest

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm")
GRAY_MODES = ("1", "L", "LA", "I", "I;16", "F")  # a first image in these: 1 channel, else RGB


def image_listing(source: Source) -> dict[str, list[str]]:
    """``{class: [relative image paths]}``: the folder's non-hidden subfolders, sorted."""
    fs = source.fs
    stray = [f for f in fs.list_files("") if not f.startswith(".")]
    if stray:
        refuse(source.url, f"holds the file {stray[0]!r} beside the class folders",
               "only one subfolder per class at the top")
    classes = [d for d in fs.list_dirs("") if not d.startswith(".")]
    if len(classes) < 2:
        refuse(source.url, f"has {len(classes)} class folder(s)", "a folder with one subfolder "
               "per class, at least two")
    listing = {}
    for name in classes:
        files = [f"{name}/{f}" for f in fs.list_files(name, recursive=True)
                 if not any(part.startswith(".") for part in f.split("/"))]
        if not files:
            refuse(source.url, f"class folder {name!r} holds no images", "at least one image per class")
        odd = [f for f in files if not f.lower().endswith(IMAGE_SUFFIXES)]
        if odd:
            refuse(source.url, f"{odd[0]} is not an image file", f"images ({', '.join(IMAGE_SUFFIXES)})")
        listing[name] = files
    return listing


def image_facts(source: Source, listing: dict | None = None) -> Facts:
    listing = listing or image_listing(source)
    first = next(iter(listing.values()))[0]
    with source.open(first) as f:
        size, mode = _open_image(source.url, first, f, header_only=True)
    channels = 1 if mode in GRAY_MODES else 3
    counts = {"train": sum(map(len, listing.values()))}
    return Facts(counts, (size[1], size[0], channels), np.dtype(np.uint8), (), list(listing))


def image_arrays(source: Source, threads: int = 8) -> Loaded:
    listing = image_listing(source)
    paths = [path for files in listing.values() for path in files]
    labels = np.concatenate([np.full(len(files), i, np.int64)
                             for i, files in enumerate(listing.values())])
    facts = image_facts(source, listing)
    height, width, channels = facts.input_shape
    images = np.empty((len(paths), height, width, channels), np.uint8)
    digests: dict[str, str] = {}

    def decode(index: int) -> None:
        path = paths[index]
        data = source.read(path)
        digests[path] = hashlib.sha256(data).hexdigest()
        image = _open_image(source.url, path, io.BytesIO(data), header_only=False)
        check_same_size(source.url, path, image.size, paths[0], (width, height))
        pixels = np.asarray(image.convert("L" if channels == 1 else "RGB"))
        images[index] = pixels.reshape(height, width, channels)

    with ThreadPoolExecutor(threads) as pool:  # Pillow decodes with the GIL released
        list(pool.map(decode, range(len(paths))))
    return Loaded({"train": (images, labels)}, folder_digest(digests), list(listing), len(paths))


def _open_image(where: str, path: str, f, header_only: bool):
    from PIL import Image, UnidentifiedImageError

    try:
        image = Image.open(f)
        if header_only:
            return image.size, image.mode
        image.load()
        return image
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
        why = "not a format Pillow knows" if isinstance(err, UnidentifiedImageError) else one_line(err)
        refuse(where, f"{path} is not an image Pillow can read ({why})",
               f"images ({', '.join(IMAGE_SUFFIXES)})")
