"""Write a data set's train/validation/test splits into the store, once."""

from __future__ import annotations

from components.store import StudyStore
from components.workloads import get_dataset


def prepare_dataset(store: StudyStore, name: str, log=print) -> dict:
    """Load ``name`` from its source and cache its splits; a no-op when already cached.

    Returns a summary (split sizes, where the cache is, whether it was re-used).
    """
    info = get_dataset(name)
    summary = {"dataset": name, "location": store.url(f"datasets/{name}"),
               "split_sizes": info.split_sizes}
    if store.has_dataset(name):
        log(f"dataset {name}: re-using {summary['location']}")
        return {**summary, "reused": True}
    log(f"dataset {name}: loading from {info.source} ({info.description})")
    splits = info.load()
    store.write_dataset(name, splits, {
        "name": name, "source": info.source, "description": info.description,
        "split_sizes": info.split_sizes, "image_shape": list(info.image_shape),
        "num_classes": info.num_classes, "pixel_max": info.pixel_max,
    })
    log(f"dataset {name}: wrote {summary['location']}")
    return {**summary, "reused": False}
