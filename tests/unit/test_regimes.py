"""Scaling-regime fit: exact recovery, accuracy and CI coverage on synthetic studies, determinacy."""

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from batchscale.analysis.statistics.regimes import (
    ABOVE,
    BELOW,
    MEASURED,
    UNDETERMINED,
    RegimeFit,
    fit_regimes,
)
from batchscale.analysis.statistics.scaling_curve import fit_curve
from tests.synthetic import synthetic_crossings

BATCH_SIZES = 2 ** np.arange(1, 15)  # 2 .. 16384, as in the paper's sweeps


def _noiseless(s_min, b_star, batch_sizes=BATCH_SIZES):
    """One trial per batch size reaching exactly at S(B), first evaluation (no previous step)."""
    steps = s_min * (1 + b_star / batch_sizes)
    return pd.DataFrame({"batch_size": batch_sizes, "trial_id": 0, "step": steps,
                         "previous_step": math.nan})


@pytest.mark.parametrize("s_min, b_star", [
    (1000, 256), (5000, 2), (300, 16384), (1e4, 0.02), (100, 4 * 16384), (100, 100 * 16384)])
def test_fit_curve_recovers_noiseless_parameters(s_min, b_star):
    fitted = fit_curve(BATCH_SIZES, s_min * (1 + b_star / BATCH_SIZES))
    assert fitted == pytest.approx((s_min, b_star), rel=1e-5)


def test_noiseless_fit_in_range_is_measured_and_out_of_range_is_a_lower_bound():
    inside = fit_regimes(_noiseless(1000, 256), resamples=50)
    assert inside.fitted and inside.notes == ()
    for est, truth in [(inside.s_min, 1000), (inside.b_star, 256), (inside.perfect_scaling_end, 64),
                       (inside.max_useful_batch_size, 2560)]:
        assert est.status == MEASURED
        assert (est.low, est.value, est.high) == pytest.approx((truth,) * 3, rel=1e-5)
    assert inside.curve([256]) == pytest.approx([2000], rel=1e-6)

    beyond = fit_regimes(_noiseless(300, 4 * 16384), resamples=50)
    assert beyond.b_star.value == pytest.approx(4 * 16384, rel=1e-5)
    assert beyond.b_star.status == ABOVE and beyond.max_useful_batch_size.status == ABOVE
    assert beyond.s_min.status == ABOVE
    assert any("B_star ≥ 65536" in note for note in beyond.notes)


@pytest.mark.parametrize("s_min, b_star, spread", [
    (1000, 256, 0.5), (20000, 2048, 0.75), (5000, 64, 1.0), (300, 16, 1.0)])
def test_point_estimates_recover_truth_within_ten_percent(s_min, b_star, spread):
    rng = np.random.default_rng(7)
    errors = []
    for _ in range(20):
        fit = fit_regimes(synthetic_crossings(s_min, b_star, BATCH_SIZES, 100, rng, spread=spread),
                          resamples=0)
        errors.append((fit.s_min.value / s_min - 1, fit.b_star.value / b_star - 1))
    assert np.abs(errors).max() < 0.10


def test_confidence_intervals_cover_truth_in_at_least_ninety_percent_of_draws():
    truths = [(1000, 256, 0.5), (20000, 2048, 1.0), (5000, 64, 0.75), (300, 16, 0.5)]
    rng = np.random.default_rng(2019)
    covered, widths = np.zeros(2), []
    draws = 100
    for i in range(draws):
        s_min, b_star, spread = truths[i % len(truths)]
        fit = fit_regimes(synthetic_crossings(s_min, b_star, BATCH_SIZES, 100, rng, spread=spread),
                          resamples=300, seed=i)
        covered += [fit.s_min.low <= s_min <= fit.s_min.high, fit.b_star.low <= b_star <= fit.b_star.high]
        widths.append((fit.s_min.high / fit.s_min.low, fit.b_star.high / fit.b_star.low))
    assert (covered / draws >= 0.90).all()
    # coverage by uselessly wide intervals would not count: these are a few percent wide
    assert (np.median(widths, axis=0) < 1.3).all()


@pytest.mark.parametrize("b_star", [20 * 16384, 1000 * 16384])
def test_curve_still_scaling_at_largest_batch_size_gives_lower_bounds(b_star):
    fit = fit_regimes(synthetic_crossings(10, b_star, BATCH_SIZES, 100, np.random.default_rng(5)),
                      resamples=300)
    assert fit.max_useful_batch_size.status == ABOVE and fit.b_star.status == ABOVE
    assert fit.max_useful_batch_size.low > 16384
    assert any("not flattened by the largest batch size (16384)" in note for note in fit.notes)
    json.dumps(fit.to_dict(), allow_nan=False)


@pytest.mark.parametrize("b_star", [0.01, 0.2])
def test_flat_curve_gives_perfect_scaling_ended_below_range(b_star):
    fit = fit_regimes(synthetic_crossings(1000, b_star, BATCH_SIZES, 100, np.random.default_rng(5)),
                      resamples=300)
    assert fit.perfect_scaling_end.status == BELOW and fit.perfect_scaling_end.high < 2
    assert fit.s_min.status == MEASURED
    assert fit.s_min.low <= 1000 <= fit.s_min.high
    assert any("perfect scaling already ended before the smallest batch size (2)" in note
               for note in fit.notes)


def test_well_measured_curve_has_no_caveats_and_a_band_around_the_truth():
    fit = fit_regimes(synthetic_crossings(1000, 256, BATCH_SIZES, 100, np.random.default_rng(3)),
                      resamples=300)
    assert [fit.b_star.status, fit.perfect_scaling_end.status, fit.max_useful_batch_size.status] == \
        [MEASURED] * 3
    assert fit.notes == () and fit.resamples == 300
    low, high = fit.band(BATCH_SIZES)
    assert (low < high).all()
    truth = 1000 * (1 + 256 / BATCH_SIZES)
    assert ((low <= truth) & (truth <= high)).mean() >= 0.9


def test_ci_spanning_both_ends_is_undetermined():
    # three batch sizes close together and noisy: the bend could be anywhere
    fit = fit_regimes(synthetic_crossings(1000, 64, [32, 64, 128], 20, np.random.default_rng(1), spread=1.5),
                      resamples=300)
    assert fit.b_star.status == UNDETERMINED
    assert any("undetermined" in note and "(32)" in note and "(128)" in note for note in fit.notes)


def test_fewer_than_three_reached_batch_sizes_is_not_fitted():
    data = _noiseless(1000, 256, np.array([8, 16, 32, 64]))
    data.loc[data["batch_size"] >= 32, "step"] = math.nan
    fit = fit_regimes(data)
    assert not fit.fitted and fit.s_min is None
    assert "only 2 batch size(s)" in fit.reason and "8, 16" in fit.reason
    assert np.isnan(fit.curve([8])).all()
    json.dumps(fit.to_dict(), allow_nan=False)
    with pytest.raises(ValueError):
        fit_curve([8, 16, 32], [100, 50, math.nan])


def test_nan_steps_are_ignored():
    steps = 1000 * (1 + 256 / BATCH_SIZES)
    with_gaps = np.where(np.arange(len(steps)) % 3 == 1, math.nan, steps)
    assert fit_curve(BATCH_SIZES, with_gaps) == pytest.approx((1000, 256), rel=1e-5)

    data = synthetic_crossings(1000, 256, BATCH_SIZES, 30, np.random.default_rng(0))
    never = pd.DataFrame({"batch_size": [4, 4, 99999], "trial_id": [100, 101, 0], "step": math.nan,
                          "previous_step": math.nan})
    plain, padded = (fit_regimes(d, resamples=0) for d in (data, pd.concat([data, never])))
    assert padded.batch_sizes == plain.batch_sizes and 99999 not in padded.batch_sizes
    assert (padded.s_min.value, padded.b_star.value) == (plain.s_min.value, plain.b_star.value)


def test_to_dict_is_json_ready_with_infinities_as_none():
    fit = fit_regimes(synthetic_crossings(10, 1000 * 16384, BATCH_SIZES, 100, np.random.default_rng(5)),
                      resamples=100)
    doc = json.loads(json.dumps(fit.to_dict(), allow_nan=False))
    assert doc["b_star"]["status"] == ABOVE and doc["b_star"]["high"] is None
    assert doc["batch_sizes"] == [int(b) for b in BATCH_SIZES] and doc["resamples"] == 100
    assert set(doc) >= {"fitted", "reason", "s_min", "perfect_scaling_end", "max_useful_batch_size",
                        "steps", "level", "notes"}


def test_bootstrap_is_seeded():
    data = synthetic_crossings(1000, 256, BATCH_SIZES, 50, np.random.default_rng(0))
    first, again, other = (fit_regimes(data, resamples=200, seed=s) for s in (1, 1, 2))
    assert isinstance(first, RegimeFit) and first == again
    assert first.observed == other.observed and first.b_star.low != other.b_star.low


def test_synthetic_crossings_follow_their_definition():
    rng = np.random.default_rng(0)
    data = synthetic_crossings(1000, 256, [16, 1024], 2000, rng, spread=0.5, failure=0.3, resolution=0.1)
    assert list(data.columns) == ["batch_size", "trial_id", "step", "previous_step"]
    assert len(data) == 4000
    reached = data.dropna(subset=["step"])
    assert 0.27 < 1 - len(reached) / len(data) < 0.33
    truth = 1000 * (1 + 256 / reached["batch_size"])
    assert (reached["step"] >= truth).all()
    assert reached["previous_step"].to_numpy() == pytest.approx(reached["step"].to_numpy() / 1.1)
    best = reached.groupby("batch_size")["step"].min() / (1000 * (1 + 256 / np.array([16, 1024])))
    assert ((best > 1) & (best < 1.1)).all()


def test_a_goal_met_before_training_is_a_reason_not_a_crash():
    """A goal the untrained model beats (e.g. classification_error<0.95 on 10 classes):
    steps to result 0 at some batch size; no fit, and the reason says what to do."""
    crossings = pd.DataFrame({"batch_size": [16, 16, 32, 64], "trial_id": [1, 2, 1, 1],
                              "step": [0.0, 5.0, 3.0, 2.0], "previous_step": [math.nan, 4, 2, 1]})
    fit = fit_regimes(crossings, resamples=10)
    assert not fit.fitted
    assert fit.reason.startswith("the goal is met at step 0, before any training, at batch size(s) 16;")


def _still_halving(tmp_path=None):
    """A study whose steps still halve with every doubling at its largest batch size (B_star
    far past it): most resamples run off the fit grid, so the fit's values are S_min 0 and
    B_star inf. This is the case whose curve printed "RuntimeWarning: invalid value
    encountered in add" (regimes.py, -inf + inf) under ``batchscale report``."""
    batch_sizes = np.repeat(2 ** np.arange(2, 8), 3)  # 3 trials each, the same crossing
    return pd.DataFrame({"batch_size": batch_sizes, "trial_id": np.tile([1, 2, 3], 6),
                         "step": 4096.0 / batch_sizes, "previous_step": 3900.0 / batch_sizes})


def test_a_pure_power_law_has_no_curve_and_no_numpy_warning():
    fit = fit_regimes(_still_halving(), resamples=200)
    assert fit.point == (-math.inf, math.inf) and fit.s_min.value == 0.0
    batch_sizes = np.geomspace(4, 128, 11)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(fit.curve(batch_sizes)).all()  # 0 x inf: not a number, not a warning
        low, high = fit.band(batch_sizes)  # the resampled curves are finite power laws
    assert np.isfinite(low).all() and (low <= high).all()
    assert high[0] / high[-1] == pytest.approx(32, rel=0.1)  # S ~ 1/B over 32x in B


def test_the_report_of_a_pure_power_law_study_warns_nothing(tmp_path):
    """The whole report (fit, figures, pages), every warning recorded: what a user would
    see on the console. Recorded, not raised: the figure code catches a fit that cannot
    evaluate, which would hide a warning turned into an error."""
    from batchscale.analysis.report import report_study
    from tests import paper_database as db

    url = db.write_synthetic_database(str(tmp_path), _still_halving())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result, written = report_study(url, resamples=100, out=str(tmp_path / "report"))
    assert [f"{w.filename}:{w.lineno}: {w.message}" for w in caught] == []
    fit = next(iter(result.fits.values()))
    assert fit.fitted and fit.point[1] == math.inf
    assert "steps_to_result.svg" in result.figures
