"""The workload options ``train_size`` and ``classes`` (``batchscale.workloads.subsets``):
nested training subsets with one validation set, the first K classes, and their
validation. Real digits prepared once in a store (offline, well under a second)."""

from __future__ import annotations

import numpy as np
import pytest

from batchscale.core.spec import SpecError
from batchscale.store.layout import StudyStore
from batchscale.validation import parse_spec
from batchscale.validation.spec_files import default_spec_dict
from batchscale.validation.study_spec import with_train_size
from batchscale.workloads import get_dataset
from batchscale.workloads.dataset_registry import dataset_for, open_pipeline
from batchscale.workloads.subsets import apply_subsets, train_examples, train_indices

DIGITS = get_dataset("digits")


@pytest.fixture(scope="module")
def store(digits_store):
    return StudyStore(digits_store)


def _open(store, **options):
    return open_pipeline(store, DIGITS, options)


def _rows(x: np.ndarray) -> set[bytes]:
    return {row.tobytes() for row in x}


def spec_dict(**options) -> dict:
    return {"name": "sub", "store": "/tmp/never-written",
            "workload": {"dataset": "mnist_5k", "model": "fc_128_128", "options": options}}


def test_training_subsets_are_nested_and_the_same_in_every_open(store):
    full = _open(store)
    small, again = _open(store, train_size=500), _open(store, train_size=500)
    large = _open(store, train_size=1000)
    assert (small.num_train_examples, large.num_train_examples) == (500, 1000)
    np.testing.assert_array_equal(small.splits["train"][0], again.splits["train"][0])
    # nested by index (the 500 are among the 1,000) and by content
    assert set(train_indices(1297, 500)) <= set(train_indices(1297, 1000))
    kept = full.splits["train"][0][train_indices(1297, 1000)]
    np.testing.assert_array_equal(large.splits["train"][0], kept)
    assert _rows(small.splits["train"][0]) <= _rows(large.splits["train"][0])
    for split in ("validation", "test"):  # every data size is judged on the same examples
        for a, b in zip(full.splits[split], small.splits[split]):
            np.testing.assert_array_equal(a, b)
    assert small.num_outputs == full.num_outputs == 10


def test_subsets_do_not_depend_on_the_size_of_the_other_subsets():
    """The permutation is a constant's: any two sizes nest, whatever else was drawn."""
    sizes = [1, 7, 100, 640, 1297]
    sets = [set(train_indices(1297, n)) for n in sizes]
    assert all(a < b for a, b in zip(sets, sets[1:]))
    assert len(train_indices(1297, 1297)) == 1297


def test_classes_keep_the_first_k_in_every_split(store):
    full, three = _open(store), _open(store, classes=3)
    assert three.num_outputs == 3
    for split in ("train", "validation", "test"):
        x, y = three.splits[split]
        assert set(np.unique(y)) == {0, 1, 2}
        keep = full.splits[split][1] < 3
        np.testing.assert_array_equal(x, full.splits[split][0][keep])
    assert three.num_train_examples == int((full.splits["train"][1] < 3).sum())


def test_both_options_filter_classes_first_then_take_the_nested_subset(store):
    both, classes = _open(store, classes=2, train_size=100), _open(store, classes=2)
    assert (both.num_train_examples, both.num_outputs) == (100, 2)
    n = classes.num_train_examples
    np.testing.assert_array_equal(both.splits["train"][1], classes.splits["train"][1][train_indices(n, 100)])
    assert set(np.unique(both.splits["train"][1])) <= {0, 1}
    np.testing.assert_array_equal(both.splits["validation"][1], classes.splits["validation"][1])


def test_a_train_size_over_the_filtered_split_is_one_clear_line(store):
    with pytest.raises(ValueError, match=r"^workload.options.train_size: 1000 exceeds the \d+ "
                       r"examples of the training split; allowed: 1\.\.\d+$"):
        _open(store, classes=2, train_size=1000)


def test_shard_streamed_data_sets_refuse_the_options():
    with pytest.raises(ValueError, match="^workload.options.train_size: imagenet is streamed from shards"):
        open_pipeline(None, get_dataset("imagenet"), {"train_size": 100})
    with pytest.raises(SpecError, match="workload.options.classes: unknown option for imagenet "
                       r"\(it is streamed from shards; train_size and classes need an in-memory"):
        parse_spec({"name": "x", "store": "/tmp/x", "workload": {
            "dataset": "imagenet", "model": "resnet_50", "options": {"classes": 10}}})


@pytest.mark.parametrize("options, message", [
    ({"train_size": 0}, "workload.options.train_size: 0 must be a positive integer"),
    ({"train_size": 2.5}, "workload.options.train_size"),
    ({"train_size": 4001}, "workload.options.train_size: 4001 exceeds the 4000 training examples "
                           "of mnist_5k; allowed: 1..4000"),
    ({"classes": 1}, "workload.options.classes: 1; allowed: 2..10 (the first K of the 10 classes "
                     "of mnist_5k)"),
    ({"classes": 11}, "workload.options.classes: 11; allowed: 2..10"),
    ({"crop": 3}, "workload.options.crop: unknown option for mnist_5k; allowed: classes, train_size"),
])
def test_refusals_name_the_option_and_what_is_allowed(options, message):
    with pytest.raises(SpecError) as err:
        parse_spec(spec_dict(**options))
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)


def test_batch_sizes_and_train_examples_are_checked_against_train_size():
    raw = {**spec_dict(train_size=500), "batch_sizes": [8, 512]}
    with pytest.raises(SpecError, match=r"^batch_sizes: 512 exceeds the 500 training examples of "
                       r"mnist_5k \(workload.options.train_size\); allowed: 1..500$"):
        parse_spec(raw)
    raw = {**spec_dict(train_size=500), "evaluation": {"train_examples": 501}}
    with pytest.raises(SpecError, match=r"^evaluation.train_examples: 501; allowed: 0..500"):
        parse_spec(raw)


def test_a_spec_with_train_size_gets_defaults_for_its_examples():
    whole, small = parse_spec(spec_dict()), parse_spec(spec_dict(train_size=500))
    assert small.workload.options == {"train_size": 500}
    assert max(small.batch_sizes) <= 500 < max(whole.batch_sizes)
    assert small.evaluation.train_examples == 500 and whole.evaluation.train_examples == 1000
    # the budgets are epochs x N / B with N = 500: fewer steps than on 4,000 (or the floor)
    assert all(small.max_steps[b] <= whole.max_steps[b] for b in small.batch_sizes)
    assert small.max_steps[8] < whole.max_steps[8]
    assert train_examples(dataset_for(small.workload), small.workload.options) == 500
    assert train_examples(DIGITS, {"classes": 3}) == 1297  # before the filter: an upper bound
    assert parse_spec(spec_dict(classes=2)).workload.options == {"classes": 2}


def test_with_train_size_derives_a_valid_study_from_a_whole_split_base():
    """A data-size study from the quickstart (batch sizes up to 4,000, 1,000 examples for
    the training metrics): batch sizes over N are left out with their budgets."""
    whole = parse_spec({**default_spec_dict("quickstart"), "store": "/tmp/never-written"})
    base = whole.to_dict()
    for n in (500, 1000, 2000, 4000):
        spec = parse_spec(with_train_size(base, n))
        assert spec.workload.options == {"train_size": n}
        assert max(spec.batch_sizes) <= n and set(spec.max_steps) == set(spec.batch_sizes)
        assert spec.evaluation.train_examples == min(1000, n)
        assert all(spec.max_steps[b] == whole.max_steps[b] for b in spec.batch_sizes)
    with pytest.raises(SpecError, match="^batch_sizes: 8 exceeds the 4 training examples"):
        parse_spec(with_train_size(base, 4))


def test_apply_subsets_without_options_returns_the_splits_as_they_are():
    splits = {"train": (np.zeros((4, 2)), np.arange(4)), "validation": (np.zeros((2, 2)), np.arange(2))}
    out, classes = apply_subsets(splits, 10, {"image_size": 3})
    assert out is splits and classes == 10


def test_a_users_own_files_take_both_options_checked_against_their_facts(tmp_path):
    """A user's .npz (3 classes, 45 training examples after the carve): the facts come
    from the files, so the ranges are checked once they are read."""
    np.savez(tmp_path / "d.npz", x_train=np.ones((50, 2)), y_train=np.arange(50) % 3)
    raw = {"name": "mine", "store": str(tmp_path / "store"),
           "workload": {"dataset": {"path": str(tmp_path / "d.npz"), "format": "npz"},
                        "model": "fc_128_128", "optimizer": "sgd"},
           "evaluation": {"train_examples": 0}, "batch_sizes": [8],
           "search_space": {"learning_rate": {"scale": "log", "min": 0.01, "max": 1}},
           "goals": ["classification_error<0.5"], "max_steps": 10}
    ok = parse_spec({**raw, "workload": {**raw["workload"], "options": {"train_size": 20, "classes": 2}}})
    assert ok.workload.options == {"classes": 2, "train_size": 20}
    for options, message in [({"classes": 4}, "workload.options.classes: 4; allowed: 2..3"),
                             ({"train_size": 46}, "workload.options.train_size: 46 exceeds the 45")]:
        with pytest.raises(SpecError, match=f"^{message}"):
            parse_spec({**raw, "workload": {**raw["workload"], "options": options}})
    assert not (tmp_path / "store").exists()
