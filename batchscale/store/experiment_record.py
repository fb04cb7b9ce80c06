"""An experiment's record in the store: ``<root>/<experiment>/experiment.json``.

The experiment's folder is the store root of its studies (``core.experiment``); the
record beside them says what the experiment is (its raw spec: base, axis, options), so
``batchscale report <root>/<experiment>`` can rebuild the comparison from the store alone,
and a study run cannot land in an experiment's folder by its name. The studies
themselves stay ordinary studies; the record adds, it never replaces any of their files.
"""

from __future__ import annotations

import json

from batchscale.core.errors import SpecError
from batchscale.store.filesystem import open_root
from batchscale.store.json_files import read_json_object

EXPERIMENT_FILE = "experiment.json"


def write_experiment_record(root: str, name: str, raw: dict) -> None:
    """Write (or replace) the record of experiment ``name`` under store root ``root``.
    Replacing is safe: each study guards its own compatibility (``study_spec.json``)."""
    open_root(root).write_text(f"{name}/{EXPERIMENT_FILE}", json.dumps(raw, indent=2, sort_keys=True))


def read_experiment_record(location: str) -> tuple[dict | None, str | None]:
    """The raw experiment recorded at ``location`` (``<root>/<experiment>``), or None and why
    not (``json_files.read_json_object``: missing, empty, not JSON ...)."""
    return read_json_object(open_root(location), EXPERIMENT_FILE)


def is_experiment_folder(location: str) -> bool:
    """Whether ``location`` holds an experiment's record (a folder ``report`` reads as one)."""
    return open_root(location).exists(EXPERIMENT_FILE)


def refuse_study_folder(root: str, name: str) -> None:
    """Refuse (one-line SpecError) an experiment ``name`` whose folder under ``root`` is a
    study's (it holds study_spec.json): its record and studies would land among that
    study's files. Every way in checks it before writing: ``run --local`` before the
    pipeline starts, the pipeline's first task (a cluster run) before the record."""
    if open_root(root).exists(f"{name}/study_spec.json"):
        raise SpecError(f"experiment: {root.rstrip('/')}/{name} is a study's folder (it holds "
                        "study_spec.json); give the experiment another name or store")
