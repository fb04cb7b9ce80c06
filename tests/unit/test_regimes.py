"""Scaling-regime fit: exact recovery, accuracy and CI coverage on synthetic studies, determinacy."""

import functools
import json
import math
import re
import warnings

import numpy as np
import pandas as pd
import pytest

from batchscale.analysis.statistics.intervals import number
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


# --- The notes never contradict the steps-to-result table --------------------------------

def _efficiency(sizes, steps, i, j):
    return math.log(steps[i] / steps[j]) / math.log(sizes[j] / sizes[i])


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def contradictions(note: str, sizes, steps, s_min: float) -> list[str]:
    """What ``note`` says about the table (batch sizes ``sizes``, ascending, with their
    steps to result ``steps``) that the table does not show. Written from the words of the
    notes, not from the code that writes them."""
    bad = []
    same = lambda a, b: abs(a - b) <= 0.005 * max(abs(b), 1)  # noqa: E731 (3 significant digits)

    def claim(words, holds):
        if words in note and not holds:
            bad.append(words)

    top, bottom = _efficiency(sizes, steps, -2, -1), _efficiency(sizes, steps, 0, 1)
    claim("larger batches would still save steps", steps[-1] < steps[-2])
    claim("has not flattened by the largest batch size", steps[-1] < steps[-2])
    claim("scaling is still near-perfect at the largest batch size", top >= 0.8)
    claim("steps at the largest batch size", steps[-1] > 2 * s_min)  # "... more than twice S_min"
    claim("steps at the smallest batch size", steps[0] <= 2 * s_min)  # "... within 2x of S_min"
    claim("perfect scaling already ended before the smallest", bottom < 0.8)
    claim("already flat at the smallest", min(steps[1:]) >= steps[0] / 1.1)
    # numbers quoted from the table: "(B1: S1 steps, B2: S2)" and "batch size B took S steps"
    table = dict(zip(sizes, steps))
    for b1, s1, b2, s2 in re.findall(r"\((\d+): ([\d.,]+) steps, (\d+): ([\d.,]+)\)", note):
        for b, s in ((b1, s1), (b2, s2)):
            if not same(_num(s), table.get(int(b), math.nan)):
                bad.append(f"batch size {b}: {s} steps")
        eff = _efficiency(sizes, steps, sizes.index(int(b1)), sizes.index(int(b2)))
        claim("did not fall at the largest", _num(s2) >= _num(s1))
        claim("does not show near-perfect scaling", eff < 0.8)
        claim("shows near-perfect scaling", eff >= 0.8)
    for b, s, pct in re.findall(r"batch size (\d+) took ([\d.,]+) steps, (\d+)% fewer", note):
        if (not same(_num(s), table.get(int(b), math.nan)) or min(steps[1:]) >= steps[0] / 1.1
                or abs(100 * (1 - _num(s) / steps[0]) - int(pct)) > 1):
            bad.append(f"batch size {b} took {s} steps, {pct}% fewer")
    for s, fitted in re.findall(r"the steps there \(([\d.,]+)\) are already within 2x of the fitted "
                                r"S_min \(([\d.,]+)\)", note):
        claim("are already within 2x of the fitted", _num(s) <= 2 * _num(fitted))
    for s, fitted in re.findall(r"the steps there \(([\d.,]+)\) are more than twice the fitted "
                                r"S_min \(([\d.,]+)\)", note):
        claim("are more than twice the fitted", _num(s) > 2 * _num(fitted))
    return bad


def _bent(crossings, batch_size, factor):
    """``crossings`` with every trial of ``batch_size`` crossing ``factor`` times later."""
    out = crossings.copy()
    rows = out["batch_size"] == batch_size
    out.loc[rows, ["step", "previous_step"]] *= factor
    return out


QUICKSTART_STEPS = {8: 1901, 16: 876, 32: 517, 64: 174, 128: 145, 256: 60, 512: 48, 1024: 38,
                    2048: 30, 4000: 50}  # README's table of 2026-11-26: 4,000 took more than 2,048


def _quickstart_like(seed=0):
    """The quickstart's steps to result, each batch size's best trial and four slower ones."""
    rng, rows = np.random.default_rng(seed), []
    for batch_size, best in QUICKSTART_STEPS.items():
        for trial in range(5):
            step = float(round(best * math.exp(0.3 * abs(rng.standard_normal())))) if trial else best
            rows.append({"batch_size": batch_size, "trial_id": trial, "step": float(step),
                         "previous_step": step * 0.95})
    return pd.DataFrame(rows)


SMALL = [8, 16, 32, 64, 128, 256, 512]
CURVES = {  # name -> crossings: curves whose fit leaves boundaries outside the range
    "quickstart, 4000 slower than 2048": lambda rng: _quickstart_like(),
    "still halving at the top": lambda rng: synthetic_crossings(10, 1e6, SMALL, 20, rng),
    "still halving, the top flatter": lambda rng: _bent(synthetic_crossings(10, 1e6, SMALL, 20, rng),
                                                        512, 1.3),
    "still halving, the top slower": lambda rng: _bent(synthetic_crossings(10, 1e6, SMALL, 20, rng),
                                                       512, 3.0),
    "still scaling, the top flat": lambda rng: _bent(synthetic_crossings(20, 2000, SMALL, 20, rng),
                                                     512, 1.6),
    "flat from the start": lambda rng: synthetic_crossings(1000, 0.5, SMALL, 20, rng),
    "flat, the bottom slower": lambda rng: _bent(synthetic_crossings(1000, 0.5, SMALL, 20, rng), 8, 3.0),
    "bend below the range, halving at the bottom": lambda rng: _bent(
        synthetic_crossings(500, 2, SMALL, 20, rng, spread=0.2), 8, 2.2),
    "bend above the range, noisy": lambda rng: synthetic_crossings(50, 3000, SMALL, 6, rng, spread=1.0),
}


@functools.cache
def _curve_fits(name: str) -> tuple[RegimeFit, ...]:
    return tuple(fit_regimes(CURVES[name](np.random.default_rng(seed)), resamples=100, seed=seed)
                 for seed in range(3))


@pytest.mark.parametrize("name", list(CURVES))
def test_no_note_contradicts_the_steps_to_result_table(name):
    """Property over curves with boundaries outside the measured range, some bent at an
    edge against the fit (the quickstart's 4,000 took 50 steps where 2,048 took 30, and
    its note said larger batches would still save steps): every note is checked against
    the points fitted, which are the table's steps to result."""
    for seed, fit in enumerate(_curve_fits(name)):
        sizes, steps = list(fit.batch_sizes), list(fit.steps)
        assert fit.fitted and any(fit.notes), name
        for note in fit.notes:
            assert contradictions(note, sizes, steps, fit.s_min.value) == [], (name, seed, note, steps)


def test_the_curves_bring_out_both_wordings_of_each_claim():
    """Not a vacuous property: the curves give each claim where the table bears it out
    and the other wording where it does not."""
    notes = " | ".join(n for name in CURVES for fit in _curve_fits(name) for n in fit.notes)
    for words in ("larger batches would still save steps", "the steps did not fall at the largest",
                  "scaling is still near-perfect at the largest", "does not show near-perfect scaling",
                  "perfect scaling already ended before the smallest", "the table shows near-perfect",
                  "already flat at the smallest", "% fewer than 8's"):
        assert words in notes, words


def test_the_checker_finds_the_quickstart_contradiction():
    """The note main printed above README's table is a contradiction the checker sees."""
    sizes, steps = list(QUICKSTART_STEPS), list(QUICKSTART_STEPS.values())
    old = ("maximum useful batch size (S = 1.1 S_min): the curve has not flattened by the largest "
           "batch size (4000); larger batches would still save steps; maximum useful batch size ≥ 2476")
    assert contradictions(old, sizes, steps, 23.3) == ["larger batches would still save steps",
                                                       "has not flattened by the largest batch size"]
    forged = "the steps did not fall at the largest batch sizes (2048: 31 steps, 4000: 50)"
    assert contradictions(forged, sizes, steps, 23.3) == ["batch size 2048: 31 steps"]


def test_the_reports_notes_agree_with_its_table(tmp_path):
    """The quickstart-like study through the report's analysis: its note on the maximum
    useful batch size says what the table shows at 2,048 and 4,000."""
    from batchscale.analysis.reading.study_reader import load_study
    from batchscale.analysis.report import analyse
    from tests import paper_database as db

    url = db.write_synthetic_database(str(tmp_path), _quickstart_like())
    analysis = analyse(load_study(url, goals=["classification_error<0.01"]), resamples=100)
    table = analysis.steps[(analysis.steps["split"] == "val") & analysis.steps["steps_to_result"].notna()]
    sizes, steps = table["batch_size"].astype(int).tolist(), table["steps_to_result"].tolist()
    assert dict(zip(sizes, steps)) == QUICKSTART_STEPS
    fit = next(iter(analysis.fits.values()))
    useful = [n for n in analysis.notes if "maximum useful batch size (S = 1.1 S_min)" in n]
    assert useful == [f"classification_error<0.01: maximum useful batch size (S = 1.1 S_min): the fit "
                      "puts it beyond the largest batch size measured (4000), though the steps did not "
                      "fall at the largest batch sizes (2048: 30 steps, 4000: 50), so the table does not "
                      "show that larger batches would save steps; maximum useful batch size ≥ "
                      f"{number(fit.max_useful_batch_size.low)}"]
    for note in analysis.notes:
        assert contradictions(note, sizes, steps, fit.s_min.value) == [], note
