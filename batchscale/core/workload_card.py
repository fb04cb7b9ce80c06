"""Which model and data a study trains, in words: what the Kubeflow UI shows of a run.

A run's ``study_spec`` parameter holds the whole spec, but a reader of the UI looks for two
facts: which model function and which data. ``prepare_data`` writes them as a Markdown
artifact (``workload_markdown``, from the run's own spec, so an edit in the UI shows) with
the same facts as the artifact's metadata (``workload_metadata``); the pipeline version's
description says them in a line (``workload_line``, the compiled default spec's).

Plain functions of a ``core.spec.Workload``; leaf layer.
"""

from __future__ import annotations

from batchscale.core.names import is_model_function


def model_words(workload) -> str:
    """The model and where it comes from."""
    if is_model_function(workload.model):
        return f"`{workload.model}` (your function, from the trainer image)"
    return f"`{workload.model}` (batchscale's registry)"


def data_words(workload) -> str:
    """The data and how it is read: a registry name, or the user's files with their format,
    label column (parquet, csv) and validation carve."""
    files = workload.data
    if files is None:
        return f"`{workload.dataset}` (batchscale's registry)"
    how = [files.format]
    if files.format in ("parquet", "csv"):
        how.append(f"label column `{files.label}`")
    how.append(f"without a validation split, {files.validation_fraction:g} of train is carved off "
               f"with seed {files.seed}")
    return f"`{files.path}` ({'; '.join(how)})"


def workload_line(workload) -> str:
    """One line: model, data, optimizer (the pipeline version's description)."""
    data = workload.data.path if workload.data is not None else workload.dataset
    return f"model {workload.model} on data {data}, optimizer {workload.optimizer}"


def workload_metadata(workload) -> dict[str, str]:
    """The facts as plain strings (a KFP artifact's metadata)."""
    facts = {"model": workload.model, "dataset": workload.dataset, "optimizer": workload.optimizer}
    if workload.data is not None:
        facts.update(data_path=workload.data.path, data_format=workload.data.format)
    if workload.task:
        facts["task"] = workload.task
    return facts


def workload_markdown(study: str, workload, prepared: dict | None = None) -> str:
    """The Markdown card of a study's workload; ``prepared``: ``prepare_dataset``'s summary
    (where the splits are cached, their sizes, whether the cache was re-used)."""
    rows = [("model", model_words(workload)), ("data", data_words(workload))]
    if workload.data is not None:
        rows.append(("data set in the store", f"`{workload.dataset}`"))
    if workload.task:
        rows.append(("task", workload.task.replace("_", " ")))
    rows += [("optimizer", f"`{workload.optimizer}`"), ("precision", workload.precision)]
    prepared = prepared or {}
    if prepared.get("location"):
        reused = " (re-used)" if prepared.get("reused") else ""
        rows.append(("prepared splits", f"`{prepared['location']}`{reused}"))
    sizes = prepared.get("split_sizes") or {}
    if sizes:
        rows.append(("examples", ", ".join(f"{split} {count:,}" if isinstance(count, int) else
                                           f"{split} {count}" for split, count in sizes.items())))
    lines = [f"### Study {study}: workload", "", "| | |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines) + "\n"
