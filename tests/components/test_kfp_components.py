"""Each KFP wrapper executed as a real task by kfp.local's SubprocessRunner."""

import pytest
from kfp import local

from components.data_prep.component import prepare_data
from components.search.component import make_trials
from components.spec import StudySpec
from components.store import StudyStore
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
    assert store.read_spec("tiny") == StudySpec.from_dict(raw)
    assert store.fs.exists("tiny/digits/fc_32/nesterov_momentum/128/study.json")

    again = prepare_data(study_spec=raw, store_root="")  # second time: re-used, not rewritten
    assert again.output == prep.output


def test_store_root_parameter_overrides_the_spec(kfp_local, tmp_path):
    other = str(tmp_path / "other")
    prepare_data(study_spec=tiny_spec_dict(str(tmp_path / "unused")), store_root=other)
    assert StudyStore(other).has_dataset("digits")
    assert not (tmp_path / "unused").exists()
