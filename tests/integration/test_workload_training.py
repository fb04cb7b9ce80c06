"""Every workload with defaults trains a few steps end to end, through its real input pipeline.

Each data set is prepared by its real preparer (tfds data sets from tensorflow-datasets'
mock data, which cannot download here; offline ones from their packages; Fashion-MNIST
from Debian's IDX files, without which its workloads skip, or fail in CI) into a
temporary store; then one trial of a spec that names only the workload (plus tiny sizes:
a small crop for ImageNet-like data, short sentences for text) runs through
``run_trial``: the model family, task loss, optimizer, schedule, evaluation and metric
accumulators all real. The paper-scale sizes are tested where the models are built.
"""

from __future__ import annotations

import math

import pytest

from batchscale.core.spec import StudySpec
from batchscale.search.trials import make_trials
from batchscale.store.layout import StudyStore
from batchscale.training.trainer import run_trial
from batchscale.validation import parse_spec
from batchscale.workloads import get_dataset
from batchscale.workloads.defaults import WORKLOADS
from batchscale.workloads.prepare import prepare_dataset
from tests.mock_sources import C4_TINY, CORPUS, LM1B_TINY, mock_corpus, mock_open_images, prepare_text
from tests.unit.test_fashion_mnist import debian_files

tfds = pytest.importorskip("tensorflow_datasets")
QUIET = lambda *_: None  # noqa: E731
STEPS = 2  # see tiny_spec
TINY_OPTIONS = {"imagenet": {"image_size": 32}, "open_images": {"image_size": 32},
                "lm1b": {"train_length": 16}, "c4": {"train_length": 16}}


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """One store per data set, prepared on first use."""
    made: dict[str, StudyStore] = {}

    def get(name: str) -> StudyStore:
        if name not in made:
            root = tmp_path_factory.mktemp(name)
            if name in ("lm1b", "c4"):
                with mock_corpus(CORPUS):
                    made[name] = prepare_text(str(root), name, LM1B_TINY if name == "lm1b" else C4_TINY,
                                              tmp_path_factory.mktemp("tfds"))
                return made[name]
            store = StudyStore(str(root))
            if name == "fashion_mnist":
                debian_files()  # else it would download (tests/system_tools.py)
            if name == "open_images":
                with mock_open_images(24):
                    prepare_dataset(store, name, log=QUIET)
            elif get_dataset(name).source == "tfds":
                with tfds.testing.mock_data(num_examples=24):
                    prepare_dataset(store, name, log=QUIET)
            else:
                prepare_dataset(store, name, log=QUIET)
            made[name] = store
        return made[name]

    return get


def tiny_spec(defaults, root: str) -> StudySpec:
    """The workload's defaults, with a batch of 8, 2 steps and a learning rate that
    cannot diverge in 2 steps (a divergence would be data, but this tests training).

    Two steps, not more: they are two fit calls (the compiling one and a later one, which
    draws the next batch from the same input stream), evaluated before, between and
    after (steps 0, 1, 2). Each further step cost one more evaluation of the whole
    validation split, seconds for the large models, and passes through no new code."""
    spec = parse_spec({
        "name": f"tiny-{defaults.dataset}-{defaults.model}", "store": root,
        "workload": {"dataset": defaults.dataset, "model": defaults.model,
                     "options": TINY_OPTIONS.get(defaults.dataset, {})},
        "batch_sizes": [8], "trials_per_batch_size": 1, "max_steps": STEPS,
        "evaluation": {"resolution": 0.05, "train_examples": 8},
    })
    raw = spec.to_dict()
    raw["search_space"]["learning_rate"] = {"scale": "log", "min": 1e-3, "max": 2e-3}
    return parse_spec(raw)


@pytest.mark.slow
@pytest.mark.parametrize("defaults", WORKLOADS, ids=lambda w: w.key)
def test_workload_trains_through_its_pipeline(defaults, stores):
    store = stores(defaults.dataset)
    spec = tiny_spec(defaults, store.root)
    store.register_study(spec)
    trial = make_trials(spec)[0]
    meta = run_trial(spec, trial, store, log=QUIET)

    assert meta["status"] == "COMPLETE" and meta["steps"] == STEPS
    rows = store.read_measurements(spec, trial)
    assert [r["step"] for r in rows] == list(range(STEPS + 1))
    metrics = get_dataset(defaults.dataset).metrics
    for row in rows:
        for split in ("train", "val"):
            for metric in metrics:
                assert math.isfinite(row[f"{split}/{metric}"]), (split, metric, row)
    assert rows[-1]["train/cross_entropy_error"] != rows[0]["train/cross_entropy_error"]  # it trained
    if defaults.schedule == "linear":  # decay over a fraction of the step budget
        assert 1 <= meta["trainer_parameters"]["decay_steps"] <= STEPS


@pytest.mark.slow
def test_mixed_precision_keeps_the_metrics_meaning(stores):
    """mixed_bfloat16 computes in 16 bits; logits and metrics stay float32 and finite."""
    store = stores("mnist_5k")
    defaults = next(w for w in WORKLOADS if w.key == "mnist_5k/resnet_8")
    raw = tiny_spec(defaults, store.root).to_dict()
    raw["name"], raw["workload"]["precision"] = "tiny-bf16", "mixed_bfloat16"
    spec = parse_spec(raw)
    store.register_study(spec)
    trial = make_trials(spec)[0]
    meta = run_trial(spec, trial, store, log=QUIET)
    assert meta["status"] == "COMPLETE" and meta["precision"] == "mixed_bfloat16"
    rows = store.read_measurements(spec, trial)
    assert all(math.isfinite(r["val/cross_entropy_error"]) for r in rows)
    assert rows[-1]["train/cross_entropy_error"] != rows[0]["train/cross_entropy_error"]
    import keras

    assert keras.config.dtype_policy().name == "float32"  # restored after the trial
