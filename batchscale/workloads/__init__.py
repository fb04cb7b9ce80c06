"""Registries of data sets and models, readable without importing TensorFlow or Keras.

A study names its workload by strings (dataset, model, optimizer). Validation needs
facts about them (split sizes, metrics, known names) long before anything trains, so
the registries here hold plain metadata; the loaders and model builders they point to
import their heavy libraries only when called.
"""

from batchscale.workloads.dataset_registry import DATASETS, DatasetInfo, get_dataset
from batchscale.workloads.models import (
    MODEL_FAMILIES,
    TASKS,
    build_model,
    check_model_name,
    model_tasks,
)

__all__ = [
    "DATASETS",
    "DatasetInfo",
    "MODEL_FAMILIES",
    "TASKS",
    "build_model",
    "check_model_name",
    "get_dataset",
    "model_tasks",
]
