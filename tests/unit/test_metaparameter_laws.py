"""Metaparameter laws (search.metaparameter_laws): the right form wins on synthetic points
with a known law, its intervals cover the truth, and the proposed box obeys its rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from batchscale.core.edges import to_scale
from batchscale.core.spec import Parameter
from batchscale.search import law_forms
from batchscale.search.metaparameter_laws import (
    MIN_WIDTH_SHARE,
    best_law,
    fit_laws,
    points_from_results,
    proposed_box,
)
from batchscale.search.next_round import TrialResult

SIZES = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
SPACE = (Parameter("learning_rate", "log", 1e-3, 10.0),
         Parameter("momentum", "reverse_log", 0.5, 0.999),
         Parameter("label_smoothing", "discrete", values=(0.0, 0.1)))


def _points(law, noise=0.1, seed=0, sizes=SIZES, momentum=None):
    rng = np.random.default_rng(seed)
    points = []
    for b in sizes:
        params = {"learning_rate": law(b) * math.exp(rng.normal(0, noise))}
        if momentum is not None:
            params["momentum"] = momentum
        points.append((b, params))
    return points


def _chosen(points, name="learning_rate"):
    return best_law(fit_laws(points)[name])


def test_t_quantile_matches_tables():
    assert law_forms.t_quantile(0.95, 1) == pytest.approx(12.706, abs=1e-3)
    assert law_forms.t_quantile(0.95, 5) == pytest.approx(2.571, abs=1e-3)
    assert law_forms.t_quantile(0.90, 1e9) == pytest.approx(1.645, abs=1e-3)


def test_sqrt_data_choose_sqrt_and_the_exponent_interval_covers_a_half():
    points = _points(lambda b: 0.01 * math.sqrt(b))
    assert _chosen(points).form == "sqrt"
    power = next(f for f in fit_laws(points)["learning_rate"] if f.form == "power")
    low, high = power.coefficient_intervals(0.95)["alpha"]
    assert low < 0.5 < high and high - low < 0.3


def test_linear_data_choose_linear_and_predict_the_next_batch_size():
    points = _points(lambda b: 1e-4 * b, noise=0.05)
    law = _chosen(points)
    assert law.form == "linear"
    low, high = law.interval(8192)
    assert low < 1e-4 * 8192 < high
    assert law.predict(8192) == pytest.approx(1e-4 * 8192, rel=0.1)


def test_saturating_data_choose_saturating_with_its_b_s():
    points = _points(lambda b: 0.5 * b / (b + 200), noise=0.03)
    law = _chosen(points)
    assert law.form == "saturating"
    low, high = law.coefficient_intervals(0.95)["b_s"]
    assert low < 200 < high
    assert law.to_dict()["coefficients"]["b_s"] == pytest.approx(200, rel=0.3)


def test_near_best_spread_widens_the_interval():
    points = _points(lambda b: 0.01 * math.sqrt(b), noise=0.01)
    flat = [(b, p, [{"learning_rate": p["learning_rate"] * f} for f in (0.5, 2.0)])
            for b, p in points]
    sharp, wide = _chosen(points), _chosen(flat)
    assert wide.noise == "near-best spread" and sharp.noise == "residuals"
    assert np.diff(wide.interval(8192)) > 10 * np.diff(sharp.interval(8192))


def test_momentum_is_fitted_on_one_minus_momentum_and_the_learning_rate_as_effective():
    rng = np.random.default_rng(1)
    points = [(b, {"learning_rate": 0.01 * math.sqrt(b) * (1 - m), "momentum": m})
              for b in SIZES for m in [1 - 0.1 * math.exp(rng.normal(0, 0.5))]]
    fits = fit_laws(points)
    assert set(fits) == {"learning_rate", "momentum", "effective_learning_rate"}
    assert {f.form for f in fits["momentum"]} == {"constant", "power"}
    assert best_law(fits["momentum"]).quantity == "1 − momentum"
    assert best_law(fits["effective_learning_rate"]).form == "sqrt"
    low, high = best_law(fits["momentum"]).interval(64)
    assert 0 < low < 0.9 < high < 1


def test_box_is_centred_on_the_prediction_with_the_same_names_and_scales():
    points = _points(lambda b: 0.01 * math.sqrt(b), noise=0.3)
    box, reason = proposed_box(points, 8192, SPACE)
    assert [(p.name, p.scale) for p in box] == [(p.name, p.scale) for p in SPACE]
    lr = box[0]
    centre = math.log(_chosen(points).predict(8192))
    assert math.log(lr.min) + math.log(lr.max) == pytest.approx(2 * centre)
    width = math.log(lr.max / lr.min)
    assert MIN_WIDTH_SHARE * math.log(1e4) - 1e-9 <= width <= math.log(1e4) + 1e-9
    assert box[1:] == SPACE[1:]  # momentum is not in the points; discrete stays
    assert "learning_rate ∝ √B" in reason and "8-4096" in reason


def test_box_is_clipped_to_the_parameters_limits_and_never_wider_than_the_space():
    rng = np.random.default_rng(2)
    points = [(b, {"learning_rate": 0.1, "momentum": 1 - 1e-3 * b ** -0.5 * math.exp(rng.normal())})
              for b in SIZES]
    box, _ = proposed_box(points, 8192, SPACE)
    momentum = box[1]
    assert momentum.max == pytest.approx(1 - 1e-4)  # the open end next_round keeps
    assert momentum.min > 0.5

    def width(p):
        return to_scale(p.max, "REVERSE_LOG_SCALE") - to_scale(p.min, "REVERSE_LOG_SCALE")
    assert width(momentum) <= width(SPACE[1]) + 1e-9


def test_box_with_momentum_sits_on_the_predicted_ridge():
    points = [(b, {"learning_rate": 0.001 * math.sqrt(b), "momentum": 0.9 + 0.001 * (i % 2)})
              for i, b in enumerate(SIZES)]
    box, reason = proposed_box(points, 8192, SPACE)
    eff = _chosen(points, "effective_learning_rate").predict(8192)
    momentum = _chosen(points, "momentum").predict(8192)
    lr = box[0]
    assert math.sqrt(lr.min * lr.max) == pytest.approx(eff * (1 - momentum), rel=1e-6)
    assert "learning_rate from effective_learning_rate" in reason


def test_points_from_the_planners_results_take_its_best_and_the_near_best():
    def result(trial_id, step, lr, diverged=False):
        return TrialResult(trial_id, {"learning_rate": lr}, diverged, step, None)
    results = {16: [result(1, 100, 0.1), result(2, 105, 0.2), result(3, 90, 9.0, diverged=True),
                    result(4, 200, 0.3), result(5, None, 0.4)],
               8: [result(1, 300, 0.05), result(2, 300, 0.07)], 32: [result(1, None, 0.5)]}
    assert points_from_results(results) == [
        (8, {"learning_rate": 0.05}, [{"learning_rate": 0.07}]),
        (16, {"learning_rate": 0.1}, [{"learning_rate": 0.2}])]


def test_refuses_fewer_than_three_batch_sizes_and_bad_points():
    with pytest.raises(ValueError, match="at least 3"):
        proposed_box(_points(lambda b: 0.01, sizes=(8, 16)), 64, SPACE)
    with pytest.raises(ValueError, match="repeat"):
        fit_laws([(8, {"learning_rate": 0.1})] * 3)
    with pytest.raises(ValueError, match="learning_rate"):
        fit_laws([(8, {"learning_rate": 0.1}), (16, {"learning_rate": 0}),
                  (32, {"learning_rate": 0.2})], ("learning_rate",))
