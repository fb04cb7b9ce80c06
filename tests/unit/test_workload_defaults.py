"""Workload defaults fill a spec that names only its workload; explicit fields win."""

from __future__ import annotations

import pytest

from batchscale.core.spec import SpecError
from batchscale.validation import default_spec_dict, parse_spec, shipped_studies
from batchscale.workloads import DATASETS
from batchscale.workloads.defaults import WORKLOADS, workload_defaults


def _minimal(dataset, model, **extra):
    return {"name": "s", "store": "/tmp/s", "workload": {"dataset": dataset, "model": model}, **extra}


@pytest.mark.parametrize("defaults", WORKLOADS, ids=lambda w: w.key)
def test_every_workload_default_is_a_valid_spec(defaults):
    spec = parse_spec(_minimal(defaults.dataset, defaults.model))
    assert spec.goals[0].metric == defaults.goal["metric"]
    assert spec.goals[0].value == defaults.goal["value"]
    assert spec.batch_sizes == defaults.batch_sizes
    assert spec.trials_per_batch_size == defaults.trials
    assert spec.schedule == defaults.schedule
    assert {p.name for p in spec.search_space} == set(defaults.search_space)
    assert spec.workload.optimizer == defaults.optimizer
    assert spec.goals[0].metric in DATASETS[defaults.dataset].metrics


def test_budget_shrinks_with_batch_size_within_bounds():
    w = workload_defaults("imagenet", "resnet_50")
    spec = parse_spec(_minimal("imagenet", "resnet_50", batch_sizes=[64, 1024, 65536]))
    steps = [spec.max_steps[b] for b in (64, 1024, 65536)]
    assert steps[0] == w.max_steps  # 90 epochs at batch 64 exceeds the cap
    assert steps[0] > steps[1] > steps[2] >= w.min_steps
    train = DATASETS["imagenet"].split_sizes["train"]
    assert steps[1] == -(-90 * train // 1024)  # ceil(90 epochs)


def test_explicit_fields_win_and_a_custom_space_keeps_the_constant_schedule():
    space = {"learning_rate": {"scale": "log", "min": 0.01, "max": 1}}
    raw = _minimal("cifar_10", "resnet_8", search_space=space,
                   fixed={"momentum": 0.9}, goals=[{"metric": "classification_error", "value": 0.4}])
    spec = parse_spec(raw)
    assert spec.schedule == "constant" and spec.goals[0].value == 0.4
    assert [p.name for p in spec.search_space] == ["learning_rate"]


def test_variants_share_their_family_defaults():
    assert workload_defaults("lm1b", "transformer_shallow") is workload_defaults("lm1b", "transformer_base")
    assert workload_defaults("fashion_mnist", "simple_cnn_wide").goal["value"] == 0.1
    assert workload_defaults("digits", "resnet_50") is None


def test_no_defaults_means_the_fields_are_required():
    message = r"^goals: is required \(no workload defaults for digits/simple_cnn_base"
    with pytest.raises(SpecError, match=message):
        parse_spec(_minimal("digits", "simple_cnn_base", batch_sizes=[4],
                                     search_space={"learning_rate": {"scale": "log", "min": 0.01, "max": 1}},
                                     max_steps=10, fixed={"momentum": 0.9}, workload={
                                         "dataset": "digits", "model": "simple_cnn_base",
                                         "optimizer": "momentum"}))


@pytest.mark.parametrize("workload, message", [
    ({"dataset": "lm1b", "model": "resnet_50"}, r"^workload\.model: .*language model"),
    ({"dataset": "imagenet", "model": "lstm"}, r"^workload\.model: .*classification"),
    ({"dataset": "imagenet", "model": "resnet_50", "precision": "float8"},
     r"^workload\.precision: unknown precision 'float8'; allowed: float32, mixed_bfloat16, mixed_float16$"),
    ({"dataset": "imagenet", "model": "resnet_50", "options": {"crop": 64}},
     r"^workload\.options\.crop: unknown option for imagenet; allowed: image_size$"),
    ({"dataset": "imagenet", "model": "resnet_50", "options": {"image_size": 0}},
     r"^workload\.options\.image_size: 0 must be a positive integer$"),
    ({"dataset": "mnist_5k", "model": "fc_8", "optimizer": "adagrad"},
     r"^workload\.optimizer: unknown optimizer 'adagrad'; allowed: sgd, momentum, nesterov_momentum, "
     r"adam, adamw, lamb, lion$"),
])
def test_bad_workloads_get_one_line(workload, message):
    raw = {**_minimal("x", "y"), "workload": workload}
    with pytest.raises(SpecError, match=message) as err:
        parse_spec(raw)
    assert "\n" not in str(err.value)


def test_precision_and_options_round_trip_through_a_struct_like_dict():
    raw = _minimal("imagenet", "resnet_50", batch_sizes=[64])
    raw["workload"].update(precision="mixed_bfloat16", options={"image_size": 64.0})  # KFP: ints -> floats
    spec = parse_spec(raw)
    assert spec.workload.options == {"image_size": 64}
    again = parse_spec(spec.to_dict())
    assert again == spec and again.fingerprint() == spec.fingerprint()


def test_shipped_studies_are_valid():
    assert {"quickstart", "toy_resnet8"} <= set(shipped_studies())
    for name in shipped_studies():
        parse_spec(default_spec_dict(name))
