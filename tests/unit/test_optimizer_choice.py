"""Choosing an optimizer: what each one takes (validation), the defaults a trial fills in,
the default search space a registry workload gets for it, ``--optimizer`` over a study
written for another, and the effective learning rate the analysis computes for it."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from batchscale.cli.main import main
from batchscale.core.names import (
    ADAM_FAMILY,
    OPTIMIZER_DEFAULTS,
    OPTIMIZER_PARAMETERS,
    OPTIMIZERS,
    effective_learning_rate,
)
from batchscale.core.spec import SpecError
from batchscale.training.trainer import resolve_parameters
from batchscale.validation import default_spec_dict, parse_spec
from batchscale.workloads.defaults import WORKLOADS
from batchscale.workloads.optimizer_spaces import FULL_SPACE_TRIALS


def _spec(optimizer, space=None, fixed=None, workload="mnist_5k/fc_128_128"):
    dataset, model = workload.split("/")
    raw = {"name": "x", "store": "/tmp/x",
           "workload": {"dataset": dataset, "model": model, "optimizer": optimizer}}
    if space is not None:
        raw.update(search_space=space, batch_sizes=[8], goals=["classification_error<0.1"],
                   max_steps=100)
    if fixed is not None:
        raw["fixed"] = fixed
    return raw


LR = {"learning_rate": {"scale": "log", "min": 1e-4, "max": 1e-2}}
MOMENTUM = {"momentum": {"scale": "reverse_log", "min": 0.8, "max": 0.97}}


@pytest.mark.parametrize("optimizer,extra,message", [
    ("adam", MOMENTUM, "search_space.momentum: optimizer adam has no momentum; it takes beta_1, "
     "beta_2, epsilon (all optional; defaults 0.9, 0.999, 1e-08); drop it or use optimizer "
     "momentum or nesterov_momentum"),
    ("adam", {"weight_decay": {"scale": "log", "min": 1e-4, "max": 0.1}},
     "search_space.weight_decay: optimizer adam has no weight_decay; it takes beta_1, beta_2, "
     "epsilon (all optional; defaults 0.9, 0.999, 1e-08); drop it or use optimizer adamw or lamb "
     "or lion"),
    ("lion", {"epsilon": {"scale": "log", "min": 1e-9, "max": 1e-6}},
     "search_space.epsilon: optimizer lion has no epsilon; it takes beta_1, beta_2, weight_decay"),
    ("sgd", MOMENTUM, "search_space.momentum: optimizer sgd has no momentum; it takes only "
     "learning_rate; drop it or use optimizer momentum or nesterov_momentum"),
    ("nesterov_momentum", {"beta_1": {"scale": "reverse_log", "min": 0.8, "max": 0.99}},
     "search_space.beta_1: optimizer nesterov_momentum has no beta_1; it takes momentum; drop it "
     "or use optimizer adam or adamw or lamb or lion"),
    ("momentum", {}, "search_space: momentum is needed by momentum/constant"),
    ("adamw", {"beta_2": {"scale": "reverse_log", "min": 0.9, "max": 1.0}},
     "search_space.beta_2.max: 1.0 must be < 1"),
])
def test_each_optimizer_takes_its_own_parameters(optimizer, extra, message):
    with pytest.raises(SpecError) as err:
        parse_spec(_spec(optimizer, {**LR, **extra}))
    assert str(err.value).startswith(message) and "\n" not in str(err.value), str(err.value)


def test_fixed_values_are_checked_like_searched_ones():
    for fixed, message in (({"weight_decay": 0.1}, "fixed.weight_decay: optimizer adam has no"),
                           ({"epsilon": 0.0}, "fixed.epsilon: 0.0 is out of range; epsilon must be"),
                           ({"beta_1": 1.0}, "fixed.beta_1: 1.0 is out of range")):
        with pytest.raises(SpecError, match=f"^{message}"):
            parse_spec(_spec("adam", LR, fixed))


@pytest.mark.parametrize("optimizer", ADAM_FAMILY)
def test_the_adam_family_needs_only_a_learning_rate(optimizer):
    spec = parse_spec(_spec(optimizer, LR))
    assert [p.name for p in spec.search_space] == ["learning_rate"]


def test_a_trial_records_every_default_it_used():
    params = resolve_parameters({"learning_rate": 1e-3, "beta_1": 0.8, "decay_fraction": 0.5}, 100,
                                "adamw")
    assert params == {"learning_rate": 1e-3, "beta_1": 0.8, "beta_2": 0.999, "epsilon": 1e-8,
                      "weight_decay": 0.01, "decay_steps": 50}
    assert resolve_parameters({"learning_rate": 0.1, "momentum": 0.9}, 100, "nesterov_momentum") == {
        "learning_rate": 0.1, "momentum": 0.9}


def test_defaults_are_within_the_bounds_and_read_by_their_optimizer():
    for optimizer, defaults in OPTIMIZER_DEFAULTS.items():
        assert set(defaults) == set(OPTIMIZER_PARAMETERS[optimizer])
        parse_spec(_spec(optimizer, LR, dict(defaults)))  # every default is a valid fixed value


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_every_registry_workload_has_a_default_space_for_every_optimizer(optimizer):
    for w in WORKLOADS:
        spec = parse_spec(_spec(optimizer, workload=w.key))
        names = {p.name for p in spec.search_space}
        reads = set(OPTIMIZER_PARAMETERS[optimizer])
        assert "learning_rate" in names and not names & ({"momentum", "beta_1", "beta_2", "epsilon",
                                                           "weight_decay"} - reads), (w.key, names)
        if optimizer in ADAM_FAMILY:
            wanted = reads if w.trials >= FULL_SPACE_TRIALS else {"beta_1"}
            assert names & reads == wanted, (w.key, names)
            defaults = OPTIMIZER_DEFAULTS[optimizer]
            for p in spec.search_space:  # each searched range holds the optimizer's default
                if p.name in defaults:
                    assert p.min <= defaults[p.name] <= p.max, (optimizer, p)
        # the rest of the workload's space (label smoothing, decay) is kept
        own = set(w.search_space) - {"learning_rate", "momentum"}
        assert own <= names


def test_a_quickstart_sized_adamw_space_searches_learning_rate_and_one_minus_beta_1():
    spec = parse_spec(_spec("adamw"))
    assert {(p.name, p.scale, p.min, p.max) for p in spec.search_space} == {
        ("learning_rate", "log", 1e-4, 1e-2), ("beta_1", "reverse_log", 0.8, 0.99)}


def _validate(capsys, *flags):
    """(exit code, the notes and errors on stderr, stdout); validate's other lines
    (the pack plan) left out."""
    code = main(["validate", *flags])
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.startswith(("note:", "batchscale:"))]
    return code, "\n".join(lines), captured.out


def test_optimizer_sgd_drops_the_default_momentum_and_says_so(capsys):
    code, err, out = _validate(capsys, "--workload", "mnist_5k/fc_128_128", "--optimizer", "sgd")
    assert code == 0
    assert err == "note: optimizer sgd has no momentum: dropped from the search space"
    spec = json.loads(out.split("\n\n")[0])
    assert set(spec["search_space"]) == {"learning_rate"} and spec["workload"]["optimizer"] == "sgd"


def test_optimizer_flag_over_the_quickstart_switches_its_space(capsys):
    code, err, out = _validate(capsys, "--optimizer", "adamw")
    assert code == 0 and "\n" not in err
    assert err.startswith("note: optimizer adamw has no momentum: dropped from the search space; "
                          "searching learning_rate [0.0001, 0.01] log and beta_1 [0.8, 0.99]")
    assert set(json.loads(out.split("\n\n")[0])["search_space"]) == {"learning_rate", "beta_1"}
    code, err, _ = _validate(capsys, "--optimizer", "sgd")
    assert code == 0 and err.startswith("note: optimizer sgd has no momentum")
    code, err, _ = _validate(capsys, "--optimizer", "momentum")  # reads what nesterov reads
    assert code == 0 and err == ""


def test_a_spec_that_names_sgd_and_momentum_is_still_refused(tmp_path, capsys):
    import yaml

    raw = copy.deepcopy(default_spec_dict())
    raw["workload"]["optimizer"] = "sgd"
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw))
    for flags in ([], ["--optimizer", "sgd"]):
        code, err, _ = _validate(capsys, str(path), *flags)
        assert code == 2 and err.startswith("batchscale: error: search_space.momentum: optimizer "
                                            "sgd has no momentum"), err


def test_effective_learning_rate_per_optimizer():
    lr, gamma = np.array([0.1, 0.2]), np.array([0.9, np.nan])
    np.testing.assert_allclose(effective_learning_rate(lr, gamma, "nesterov_momentum"), [1.0, 0.2])
    np.testing.assert_allclose(effective_learning_rate(lr, gamma), [1.0, 0.2])  # paper data
    np.testing.assert_allclose(effective_learning_rate(lr, gamma, "nesterov"), [1.0, 0.2])
    for optimizer in ("sgd", *ADAM_FAMILY):
        np.testing.assert_allclose(effective_learning_rate(lr, gamma, optimizer), lr)
    assert effective_learning_rate(0.01, None, "adamw") == 0.01
