"""Write a data set's train/validation/test splits into the store, once."""

from __future__ import annotations

from batchscale.store.layout import StudyStore
from batchscale.workloads import get_dataset


def prepare_dataset(store: StudyStore, name: str, log=print) -> dict:
    """Load ``name`` from its source and cache its splits; a no-op when already cached.

    "arrays" data sets are loaded whole and written as one .npz per split; "shards"
    data sets are streamed into shards by their own preparer, which returns what
    info.json records about them (shard lists, example counts, vocabulary size...).
    info.json is written last: its presence marks a complete cache.
    Returns a summary (split sizes, where the cache is, whether it was re-used).
    """
    info = get_dataset(name)
    summary = {"dataset": name, "location": store.url(f"datasets/{name}"),
               "split_sizes": info.split_sizes}
    if store.has_dataset(name):
        log(f"dataset {name}: re-using {summary['location']}")
        return {**summary, "reused": True}
    log(f"dataset {name}: loading from {info.source} ({info.description})")
    record = {
        "name": name, "source": info.source, "description": info.description, "task": info.task,
        "storage": info.storage, "split_sizes": info.split_sizes,
        "input_shape": list(info.input_shape), "num_classes": info.num_classes,
        "pixel_max": info.pixel_max,
    }
    if info.storage == "arrays":
        splits = info.load()
        record["examples"] = {split: len(x) for split, (x, _) in splits.items()}
        store.write_dataset(name, splits, record)
    else:
        record.update(info.function(info.loader)(store, info, log))
        store.write_dataset_info(name, record)
    log(f"dataset {name}: wrote {summary['location']}")
    return {**summary, "reused": False}
