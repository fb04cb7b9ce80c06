"""The two-batch-size noise-scale estimator against a closed-form answer.

Linear regression with Gaussian features: x ~ N(0, I_d), y = w*.x + eps, eps ~ N(0, s^2),
per-example loss (w.x - y)^2 / 2 at a fixed w, delta = w - w*. The per-example gradient is
g = (x.delta - eps) x, so the true gradient is G = E[x x^T] delta = delta, and (Isserlis)
E[g g^T] = 2 delta delta^T + |delta|^2 I + s^2 I, so
tr(Sigma) = (d + 1) |delta|^2 + d s^2 and B_simple = tr(Sigma)/|G|^2 = d + 1 + d s^2/|delta|^2.
"""

from __future__ import annotations

import numpy as np
import pytest

from batchscale.planning.noise_scale import MIN_MEASUREMENTS, estimate_noise_scale, two_batch_estimates


def _per_example_gradients(rng, n, delta, sigma):
    x = rng.standard_normal((n, len(delta)))
    eps = sigma * rng.standard_normal(n)
    return (x @ delta - eps)[:, None] * x


def _closed_form(delta, sigma):
    d, norm2 = len(delta), float(delta @ delta)
    return (d + 1) * norm2 + d * sigma**2, norm2


def _measurements(rng, delta, sigma, b_small, microbatches, count):
    """What the probe measures: the mean squared norm of `microbatches` gradients over
    b_small examples, and the squared norm of their mean."""
    out = []
    for step in range(count):
        g = _per_example_gradients(rng, b_small * microbatches, delta, sigma)
        small = g.reshape(microbatches, b_small, -1).mean(axis=1)
        out.append({"step": step, "b_small": b_small, "b_big": b_small * microbatches,
                    "small_sq": float((small**2).sum(axis=1).mean()),
                    "big_sq": float((small.mean(axis=0) ** 2).sum())})
    return out


def test_the_closed_form_itself_holds_on_a_large_sample():
    rng = np.random.default_rng(1)
    delta, sigma = rng.standard_normal(8) * 0.5, 1.5
    g = _per_example_gradients(rng, 400_000, delta, sigma)
    trace, norm2 = _closed_form(delta, sigma)
    assert np.allclose(g.mean(axis=0), delta, atol=0.02)
    assert np.trace(np.cov(g, rowvar=False)) == pytest.approx(trace, rel=0.02)


CASES = [(10, 1.0, 0.3, 4), (32, 0.5, 1.0, 8), (5, 2.0, 0.2, 16)]  # d, sigma, |delta| scale, b


@pytest.mark.parametrize("d, sigma, scale, b_small", CASES)
def test_the_estimate_is_within_10_percent_of_the_closed_form(d, sigma, scale, b_small):
    rng = np.random.default_rng(d)
    delta = scale * rng.standard_normal(d)
    trace, norm2 = _closed_form(delta, sigma)
    truth = trace / norm2
    noise = estimate_noise_scale(_measurements(rng, delta, sigma, b_small, 32, 800))
    assert noise.value == pytest.approx(truth, rel=0.10), (noise.value, truth)
    assert noise.b_small == b_small and noise.b_big == 32 * b_small and noise.measurements == 800
    assert noise.trajectory[-1][0] == 799 and noise.trajectory[-1][1] == pytest.approx(truth, rel=0.5)


def test_the_interval_covers_the_closed_form_about_as_often_as_it_says():
    d, sigma, scale, b_small = CASES[0]
    covered = 0
    for seed in range(40):
        rng = np.random.default_rng(100 + seed)
        delta = scale * np.random.default_rng(d).standard_normal(d)
        trace, norm2 = _closed_form(delta, sigma)
        noise = estimate_noise_scale(_measurements(rng, delta, sigma, b_small, 32, 100),
                                     resamples=300)
        assert noise.low <= noise.value <= noise.high
        covered += noise.low <= trace / norm2 <= noise.high
    assert 0.7 <= covered / 40 <= 1.0  # a 90% interval


def test_each_estimate_is_unbiased_for_its_quantity():
    rng = np.random.default_rng(7)
    delta, sigma = 0.4 * rng.standard_normal(12), 1.0
    trace, norm2 = _closed_form(delta, sigma)
    m = _measurements(rng, delta, sigma, 4, 16, 3000)
    g2, tr = two_batch_estimates(*([x[k] for x in m] for k in ("small_sq", "big_sq", "b_small", "b_big")))
    assert g2.mean() == pytest.approx(norm2, rel=0.05)
    assert tr.mean() == pytest.approx(trace, rel=0.05)


def test_too_few_measurements_and_a_pure_noise_gradient_are_refused_in_one_line():
    rng = np.random.default_rng(0)
    few = _measurements(rng, np.ones(4), 1.0, 4, 8, MIN_MEASUREMENTS - 1)
    with pytest.raises(ValueError, match=f"at least {MIN_MEASUREMENTS} are needed"):
        estimate_noise_scale(few)
    # at the optimum (delta = 0) the gradient is pure noise: |G|^2 = 0, so its estimate
    # hovers around zero and is negative about half the time
    refused = 0
    for seed in range(20):
        at_optimum = _measurements(np.random.default_rng(seed), np.zeros(6), 1.0, 4, 8, 20)
        try:
            estimate_noise_scale(at_optimum)
        except ValueError as err:
            assert "could not separate signal from noise" in str(err) and "\n" not in str(err)
            refused += 1
    assert 3 <= refused <= 17
