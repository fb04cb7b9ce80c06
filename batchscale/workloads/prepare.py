"""Write a data set's train/validation/test splits into the store, once."""

from __future__ import annotations

from batchscale.store.layout import StudyStore
from batchscale.workloads import get_dataset
from batchscale.workloads.dataset_record import DatasetInfo


def prepare_dataset(store: StudyStore, dataset: str | DatasetInfo, log=print) -> dict:
    """Load a data set from its source and cache its splits; a no-op when already cached.

    ``dataset``: a registry name, or a ``DatasetInfo`` (``dataset_registry.dataset_for``
    gives a user's own files one). "arrays" data sets are loaded whole and written as one
    .npz per split (info.json records each one's sha256); "shards" data sets are streamed
    into shards by their own preparer, which returns what info.json records about them
    (shard lists, example counts, vocabulary size...). info.json is written last: its
    presence marks a complete cache. A user's files are re-used only while they are what
    was prepared (their sha256 as recorded), else refused in one line.
    Returns a summary (split sizes, where the cache is, whether it was re-used).
    """
    info = dataset if isinstance(dataset, DatasetInfo) else get_dataset(dataset)
    name = info.name
    summary = {"dataset": name, "location": store.url(f"datasets/{name}"),
               "split_sizes": info.split_sizes}
    if store.has_dataset(name):
        if info.files is not None:
            from batchscale.workloads.data_files import check_source_unchanged

            check_source_unchanged(store, info)
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
        record.update(splits.pop("record", {}))
        record["examples"] = {split: len(x) for split, (x, _) in splits.items()}
        store.write_dataset(name, splits, record)
    else:
        record.update(info.function(info.loader)(store, info, log))
        store.write_dataset_info(name, record)
    log(f"dataset {name}: wrote {summary['location']}")
    return {**summary, "reused": False}
