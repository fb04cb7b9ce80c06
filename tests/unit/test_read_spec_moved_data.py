"""A finished study of the user's own files reads without them (moved, deleted, or on a
bucket this machine cannot read): the spec's data facts come from the store's record of
the prepared files, not a 'damaged study_spec.json' and a report in another place."""

import json

from batchscale.analysis.reading.study_files import read_spec
from batchscale.store.filesystem import open_root
from batchscale.validation.study_spec import parse_spec
from batchscale.workloads import data_files


def _study(tmp_path):
    data = tmp_path / "data.csv"
    data.write_text("a,b,label\n" + "".join(f"{i},{i % 7},{i % 3}\n" for i in range(300)))
    store = tmp_path / "store"
    spec = parse_spec({"name": "mine", "store": str(store), "seed": 3,
                       "workload": {"dataset": {"path": str(data), "format": "csv"},
                                    "task": "classification", "model": "m.py:build"},
                       "batch_sizes": [8], "trials_per_batch_size": 1,
                       "search_space": {"learning_rate": {"min": 0.001, "max": 0.1, "scale": "log"},
                                        "momentum": {"min": 0.5, "max": 0.99, "scale": "reverse_log"}},
                       "goals": ["classification_error<0.5"]})
    (store / "mine").mkdir(parents=True)
    (store / "mine" / "study_spec.json").write_text(json.dumps(spec.to_dict()))
    record = store / "datasets" / spec.workload.dataset
    record.mkdir(parents=True)
    record.joinpath("info.json").write_text(json.dumps(
        {"name": spec.workload.dataset, "split_sizes": {"train": 270, "validation": 30, "test": 30},
         "input_shape": [2], "num_classes": 3, "pixel_max": 1.0}))
    data_files._describe_files.cache_clear()  # as a new process: the file not yet read
    return spec, data, store


def test_a_study_whose_data_file_is_gone_reads_from_the_prepared_record(tmp_path):
    spec, data, store = _study(tmp_path)
    data.unlink()
    damaged = []
    read = read_spec(open_root(str(store / "mine")), str(store / "mine"), damaged)
    assert damaged == []
    assert read is not None and read.fingerprint() == spec.fingerprint()


def test_without_a_prepared_record_the_spec_is_still_reported_damaged(tmp_path):
    spec, data, store = _study(tmp_path)
    data.unlink()
    (store / "datasets" / spec.workload.dataset / "info.json").unlink()
    damaged = []
    assert read_spec(open_root(str(store / "mine")), str(store / "mine"), damaged) is None
    assert "no such file" in damaged[0].problem
