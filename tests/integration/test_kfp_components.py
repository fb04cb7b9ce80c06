"""Each KFP wrapper executed as a real task by kfp.local's SubprocessRunner."""

import pytest
from kfp import local

from batchscale.components.make_trials import make_trials
from batchscale.components.prepare_data import prepare_data
from batchscale.store.layout import StudyStore
from batchscale.validation import parse_spec
from tests.conftest import tiny_spec_dict


@pytest.fixture
def kfp_local(tmp_path):
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path / "kfp"))


def test_prepare_data_then_make_trials(kfp_local, tmp_path):
    root = str(tmp_path / "store")
    raw = tiny_spec_dict(root)
    prep = prepare_data(study_spec=raw, store_root="")
    assert prep.output.endswith("datasets/digits")
    store = StudyStore(root)
    assert store.has_dataset("digits")
    x, y = store.read_split("digits", "validation")
    assert x.shape == (250, 8, 8, 1) and set(y) == set(range(10))

    trials = make_trials(study_spec=raw, store_root="", dataset_location=prep.output).output
    assert [(t["batch_size"], t["trial_id"]) for t in trials] == [(16, 1), (16, 2), (128, 1), (128, 2)]
    assert parse_spec(store.read_spec_dict("tiny")) == parse_spec(raw)
    assert store.fs.exists("tiny/digits/fc_32/nesterov_momentum/128/study.json")

    again = prepare_data(study_spec=raw, store_root="")  # second time: re-used, not rewritten
    assert again.output == prep.output


def test_store_root_parameter_overrides_the_spec(kfp_local, tmp_path):
    other = str(tmp_path / "other")
    prepare_data(study_spec=tiny_spec_dict(str(tmp_path / "unused")), store_root=other)
    assert StudyStore(other).has_dataset("digits")
    assert not (tmp_path / "unused").exists()
