"""A user's model file that changed since its study trained with it is refused in one
line (``workload_check.check_model_source``): the study's finished trials are of the old
code, and a re-run would re-use them as the new model's. The first pack task records the
file's sha256; the CLI only reads the record."""

from __future__ import annotations

import pytest

from batchscale.core.errors import SpecError
from batchscale.store.layout import StudyStore
from batchscale.training.workload_check import check_model_source
from batchscale.validation import parse_spec
from tests.integration.test_cli_bad_input import _snapshot


def _spec(tmp_path, reference):
    return parse_spec({"name": "own", "store": str(tmp_path / "store"),
                       "goals": ["classification_error<0.1"],
                       "workload": {"dataset": "digits", "model": reference}})


def test_a_changed_model_file_is_refused_and_a_restored_one_passes(tmp_path):
    model = tmp_path / "model_a.py"
    model.write_text("def build(params):\n    return None\n")
    spec = _spec(tmp_path, f"{model}:build")
    store = StudyStore(spec.store)
    check_model_source(spec, store)  # the CLI: reads only
    assert store.read_model_source("own") is None
    check_model_source(spec, store, record=True)  # the first pack task records it
    record = store.read_model_source("own")
    assert record["file"] == str(model) and len(record["sha256"]) == 64
    check_model_source(spec, store, record=True)  # unchanged: passes, record kept

    original = model.read_text()
    model.write_text(original + "# a new layer would be here\n")
    import importlib

    from batchscale.workloads.models import user_model

    user_model.load_model_function.cache_clear()  # a new process would import it afresh
    importlib.invalidate_caches()
    before = _snapshot(tmp_path / "store")
    with pytest.raises(SpecError) as err:
        check_model_source(spec, store, record=True)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"workload.model: {model} changed since "
                                                      "study own trained with it (sha256 ")
    assert message.endswith("own/model_source.json)")  # names the record it compared with
    assert _snapshot(tmp_path / "store") == before
    model.write_text(original)
    check_model_source(spec, store)


def test_a_registry_model_and_a_missing_store_need_no_record(tmp_path):
    check_model_source(_spec(tmp_path, "fc_32"), None, record=True)
    model = tmp_path / "model_b.py"
    model.write_text("def build(params):\n    return None\n")
    check_model_source(_spec(tmp_path, f"{model}:build"), None)
    assert not (tmp_path / "store").exists()
