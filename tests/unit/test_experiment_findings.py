"""An experiment's findings on synthetic curves whose truth is known (tests/synthetic.py):
resolved sentences carry both numbers, overlapping intervals say "not resolved", B*(D)
recovers its exponent, a goal ladder's ratio of steps is stated. The regime fits use 200
resamples to stay fast."""

import json
import math

import numpy as np
import pandas as pd

from batchscale.analysis.statistics.b_star_exponent import fit_exponent
from batchscale.analysis.statistics.findings import (
    Curve,
    compare_bounds,
    pairwise_findings,
    reach,
    small_batch,
)
from batchscale.analysis.statistics.goal_ladder import goal_findings
from batchscale.analysis.statistics.intervals import regime_bound
from batchscale.analysis.statistics.regimes import fit_regimes
from tests.synthetic import synthetic_crossings

SIZES = [2 ** k for k in range(1, 12)]


def curve(name, s_min, b_star, seed, trials=12, spread=0.1, failure=0.1, sizes=SIZES) -> Curve:
    crossings = synthetic_crossings(s_min, b_star, sizes, trials, np.random.default_rng(seed),
                                    spread=spread, failure=failure)
    steps = crossings.groupby("batch_size")["step"].agg(["min", "count"]).reset_index()
    reached = crossings.groupby("batch_size")["step"].apply(lambda s: int(s.notna().sum()))
    steps = pd.DataFrame({"batch_size": steps["batch_size"], "steps_to_result": steps["min"],
                          "reached": reached.to_numpy(), "trials": steps["count"]})
    return Curve(name, steps, fit_regimes(crossings, resamples=200))


def test_clearly_different_b_star_is_resolved_with_both_numbers():
    sgd, momentum = curve("sgd", 1600, 40, 1), curve("momentum", 125, 512, 2)
    found = compare_bounds("optimizer", "regime", momentum, sgd, "perfect_scaling_end")
    texts = [regime_bound(c.fit.perfect_scaling_end).text() for c in (momentum, sgd)]
    assert found.resolved, found.sentence
    assert f"momentum's perfect scaling ends at {texts[0]} against sgd's {texts[1]}" in found.sentence
    assert "momentum's perfect scaling extends to larger batch sizes" in found.sentence
    assert found.numbers["momentum"]["low"] > found.numbers["sgd"]["high"]
    # Figure 4's small-batch comparison: equal S_min·B*, so near-equal steps at B <= 4
    near = small_batch("optimizer", momentum, sgd)
    assert near.resolved and near.numbers["batch_sizes"] == [2, 4, 8], near.sentence
    assert 0 < near.numbers["max_difference"] < 0.3
    assert f"differ by at most {near.numbers['max_difference']:.0%}" in near.sentence


def test_overlapping_intervals_are_not_resolved():
    a = curve("sgd", 1000, 64, 3, trials=3, spread=0.8, failure=0.3)
    b = curve("momentum", 1000, 90, 4, trials=3, spread=0.8, failure=0.3)
    findings = pairwise_findings("optimizer", "optimizer", [a, b])
    regime = next(f for f in findings if f.topic == "regime")
    assert not regime.resolved
    assert regime.sentence.endswith("not resolved by this data (the intervals overlap)")
    assert {f.topic for f in findings} >= {"regime", "small_batch", "s_min"}


def test_reach_and_fixed_axis_say_where_one_reaches_and_the_other_does_not():
    a = curve("ls_0", 1000, 64, 5, sizes=SIZES[:6])
    b = curve("ls_0.1", 1000, 64, 6, sizes=SIZES[:6])
    b.steps.loc[b.steps["batch_size"] == 64, "steps_to_result"] = math.nan
    findings = pairwise_findings("fixed", "fixed label_smoothing", [a, b])
    reach = next(f for f in findings if f.topic == "reach")
    assert reach.resolved and reach.numbers["only"] == {"ls_0": [64], "ls_0.1": []}
    assert "at batch size(s) 64 ls_0 reaches the goal and ls_0.1 does not" in reach.sentence
    assert any(f.topic == "by_batch_size" for f in findings)


def _data_size_fits(alpha, sizes=(1000, 2000, 4000, 8000, 16000)):
    return [curve(f"train_{d}", 1000, 64 * (d / 1000) ** alpha, 10 + i).fit for i, d in enumerate(sizes)]


def test_b_star_growing_as_square_root_of_d_gives_alpha_near_half():
    sizes = (1000, 2000, 4000, 8000, 16000)
    fit = fit_exponent(sizes, _data_size_fits(0.5), [f"train_{d}" for d in sizes])
    assert fit.alpha.kind == "interval" and fit.alpha.low < 0.5 < fit.alpha.high
    assert fit.alpha.high - fit.alpha.low < 0.3
    assert fit.finding.resolved and "grows with D" in fit.finding.sentence
    assert fit.alpha.text() in fit.finding.sentence


def test_equal_b_star_across_d_is_no_consistent_effect_and_two_sizes_give_no_exponent():
    sizes = (1000, 2000, 4000, 8000, 16000)
    fit = fit_exponent(sizes, _data_size_fits(0.0), [f"train_{d}" for d in sizes])
    assert fit.alpha.low < 0 < fit.alpha.high
    assert fit.finding.resolved and "no consistent effect" in fit.finding.sentence
    two = fit_exponent(sizes[:2], _data_size_fits(0.0, sizes[:2]), ["a", "b"])
    assert not two.finding.resolved and "at least 3 are needed" in two.finding.sentence


def test_goal_ladder_states_the_ratio_and_an_unresolved_b_star_shift():
    easy, hard = curve("error<0.1", 1000, 64, 7), curve("error<0.05", 2000, 64, 7)
    shift, ratio = goal_findings([easy, hard])
    assert shift.topic == "goal_shift" and not shift.resolved
    assert "as a purely vertical shift of the curve would have it" in shift.sentence
    assert ratio.resolved and "roughly constant" in ratio.sentence
    assert all(1.8 < r < 2.2 for r in ratio.numbers["ratios"].values())


def test_b_star_past_the_fit_grid_bounds_alpha_from_one_side_only():
    sizes = (1000, 2000, 4000, 8000)
    fits = [curve(f"train_{d}", 1000, b, 20 + i).fit
            for i, (d, b) in enumerate(zip(sizes, (16, 32, 64, 1e8)))]  # the largest: pure 1/B
    fit = fit_exponent(sizes, fits, [f"train_{d}" for d in sizes])
    assert fit.alpha.kind == "at least" and fit.alpha.low > 0, fit.finding.sentence
    assert f"α {fit.alpha.text()}" in fit.finding.sentence  # α ≥ …, not α = ≥ …
    assert fit.alpha.text().startswith("≥")
    assert "grows with D (bounded from below only" in fit.finding.sentence
    # that B* itself is past the grid (inf): comparison.json (allow_nan=False) still takes it
    assert fits[-1].b_star.value == math.inf and fit.finding.numbers["b_star"][-1] is None
    json.dumps([fit.finding.to_dict(), fit.to_dict()], allow_nan=False)


def _with_row(c: Curve, batch_size: int, **row) -> Curve:
    """``c`` with one more row of its steps table (a batch size measured, not reached)."""
    extra = pd.DataFrame([{"batch_size": batch_size, "steps_to_result": math.nan, "reached": 0,
                           "trials": 12, **row}])
    return Curve(c.name, pd.concat([c.steps, extra], ignore_index=True), c.fit)


def test_by_batch_size_claims_nothing_where_neither_curve_reached_the_goal():
    # S_min 1000 against 3000: the fits' bands separate everywhere, also where they only
    # extrapolate (batch size 4096, measured by both, reached by neither)
    a = _with_row(curve("ls_0", 1000, 64, 31, sizes=SIZES[:6]), 4096)
    b = _with_row(curve("ls_0.1", 3000, 64, 32, sizes=SIZES[:6]), 4096)
    found = next(f for f in pairwise_findings("fixed", "fixed ls", [a, b]) if f.topic == "by_batch_size")
    assert found.resolved and found.numbers["fewer_steps"]["ls_0"], found.sentence
    assert 4096 not in found.numbers["fewer_steps"]["ls_0"] and "4096" not in found.sentence


def test_reach_does_not_call_unfinished_or_early_stopped_trials_not_reached():
    a = _with_row(curve("sgd", 1000, 64, 33, sizes=SIZES[:6]), 128, steps_to_result=40.0, reached=3)
    for row, said in (({"incomplete": 2, "censored": ""}, False),
                      ({"incomplete": 0, "censored": "stopped early"}, False),
                      ({"incomplete": 0, "censored": ""}, True)):
        b = _with_row(curve("momentum", 1000, 64, 34, sizes=SIZES[:6]), 128, **row)
        found = reach("optimizer", a, b)
        assert (128 in found.numbers["only"]["sgd"]) is said, row
        assert (found.numbers["open"] == [128]) is not said and found.resolved is said
        assert ("does not" in found.sentence) is said and ("not resolved" in found.sentence) is not said


def test_goal_shift_with_an_unbounded_b_star_is_not_called_a_vertical_shift():
    easy = curve("error<0.1", 1000, 64, 35)
    flat = Curve("error<0.05", easy.steps, None)  # not fitted: its B* says nothing
    shift = goal_findings([easy, flat])[0]
    assert not shift.resolved and "not resolved by this data" in shift.sentence
    assert "vertical shift" not in shift.sentence


def test_goal_ratio_leaves_out_a_goal_met_at_step_0():
    easy, hard = curve("error<0.9", 1000, 64, 36), curve("error<0.05", 2000, 64, 36)
    easy.steps.loc[easy.steps["batch_size"] == 2, "steps_to_result"] = 0.0  # untrained model beats it
    ratio = goal_findings([easy, hard])[1]
    assert "2" not in ratio.numbers["ratios"] and all(1.8 < r < 2.2 for r in ratio.numbers["ratios"].values())
    json.dumps(ratio.to_dict(), allow_nan=False)


def test_b_star_figure_points_follow_the_one_notation():
    from batchscale.analysis.experiment import b_star_points

    past = curve("train_8000", 1000, 1e8, 23)  # pure 1/B: B* bounded from below only
    inside = curve("train_1000", 1000, 64, 20)
    (d1, v1, lo1, hi1), (d2, v2, lo2, hi2) = b_star_points([1000, 8000], [inside, past])
    shown = regime_bound(inside.fit.b_star)
    assert (d1, v1, lo1, hi1) == (1000.0, shown.value, shown.low, shown.high)
    low = regime_bound(past.fit.b_star).low
    assert (d2, v2, lo2, hi2) == (8000.0, low, low, math.inf)  # drawn at its bound, open upwards
    assert b_star_points([1], [Curve("none", inside.steps, None)]) == []


def _fit_with_log_b_star(c: np.ndarray, sizes=(8, 16, 32, 64, 128, 256)):
    """A fitted RegimeFit whose resamples' log B* are ``c`` (log S_min 7 throughout)."""
    from batchscale.analysis.statistics.regimes import Estimate, RegimeFit

    b = float(np.exp(np.median(c)))
    e = Estimate(b, b / 2, b * 2, "measured")
    return RegimeFit(True, "", Estimate(1000.0, 900.0, 1100.0, "measured"), e, e, e, tuple(sizes),
                     tuple(1000.0 for _ in sizes), len(c), 0.95, (),
                     point=(7.0, float(np.median(c))), samples=np.column_stack([np.full(len(c), 7.0), c]))


def test_a_slope_with_b_star_off_the_grid_bounds_alpha_from_below_at_its_own_value():
    from batchscale.analysis.statistics.scaling_curve import GRID_MARGIN

    top = math.log(256) + GRID_MARGIN  # the fit grid's top over batch sizes 8..256
    rng = np.random.default_rng(0)
    sizes = (1000, 2000, 4000, 8000)
    c = np.array([math.log(d / 1000) + 3.0 + rng.normal(0, 0.05, 200) for d in sizes])  # α ≈ 1
    c[:3, :20] = top - 0.1  # 10% of resamples: three sizes high on the grid, the largest off it
    c[3, :20] = top
    fit = fit_exponent(sizes, [_fit_with_log_b_star(row) for row in c], [f"train_{d}" for d in sizes])
    # those resamples' slopes are only known to be >= about 0.03: the lower end says so
    assert fit.alpha.kind == "at least" and 0 < fit.alpha.low < 0.1, fit.finding.sentence


def test_reach_at_the_same_batch_sizes_is_what_was_measured():
    """Both curves reached the goal at every batch size both measured, every trial over:
    stated as measured (resolved), not prefixed "not resolved"."""
    a, b = curve("sgd", 1000, 64, 37, sizes=SIZES[:6]), curve("momentum", 1000, 64, 38, sizes=SIZES[:6])
    found = reach("optimizer", a, b, always=True)
    assert found.resolved and found.numbers["open"] == []
    assert found.sentence == "sgd and momentum reach the goal at the same batch sizes of the 6 both measured"
