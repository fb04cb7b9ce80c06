"""The branched probe's arithmetic (``planning.branched_estimate``), no training: where it
branches, which factors, the learning-rate rules, k*, the interval at a branch point,
the examples it spends, and the typed result."""

from __future__ import annotations

import json
import math

import pytest

from batchscale.core.critical_batch_size import DEFINITIONS, CbsEstimate
from batchscale.core.errors import SpecError
from batchscale.planning.branched_estimate import (
    BranchedProbe,
    BranchPoint,
    branch_factors,
    branch_length,
    branch_points,
    check_rule,
    check_tolerance,
    coverage,
    expected_examples,
    k_star,
    keeps_up,
    point_interval,
    scaled_learning_rate,
)


def test_learning_rate_rules():
    assert scaled_learning_rate(0.1, 4, "sqrt") == pytest.approx(0.2)
    assert scaled_learning_rate(0.1, 4, "linear") == pytest.approx(0.4)
    assert scaled_learning_rate(0.1, 4, "none") == 0.1
    with pytest.raises(SpecError, match="allowed: sqrt, linear, none"):
        scaled_learning_rate(0.1, 4, "cubic")


def test_flags_refuse_bad_values_in_one_line():
    assert check_rule("linear") == "linear"
    with pytest.raises(SpecError) as err:
        check_rule("Sqrt")
    assert str(err.value).startswith("--branch-rule: 'Sqrt' is not allowed") and "\n" not in str(err.value)
    assert check_tolerance(0) == 0.0 and check_tolerance(-0.5) == -0.5
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(SpecError, match="--branch-tolerance: .* greater than -1"):
            check_tolerance(bad)


def test_branch_length_points_and_factors():
    # D: a power of two <= a quarter of the base run, so D/k is whole for every k
    assert branch_length(1000) == 128 and branch_length(64) == 16 and branch_length(5) == 2
    # the last point's comparison is the base run's end; each earlier point half the next
    assert branch_points(1000, 128) == [218, 436, 872]
    assert branch_points(20, 4) == [4, 8, 16]
    assert branch_points(4, 2) == [1, 2]  # never below step 1
    with pytest.raises(SpecError, match="longer than its branch length"):
        branch_points(2, 2)
    # k x b within the training set and D/k >= 1
    assert branch_factors(8, 4000, 128) == [2, 4, 8, 16, 32, 64, 128]
    assert branch_factors(8, 4000, 1024) == [2, 4, 8, 16, 32, 64, 128, 256]  # 512 x 8 > 4000
    assert branch_factors(16, 1297, 4) == [2, 4]
    assert branch_factors(1000, 1297, 64) == []


def test_keeping_up_and_k_star():
    assert keeps_up(1.01, 1.0, 0.01) and not keeps_up(1.0101, 1.0, 0.01)
    assert keeps_up(0.5, 1.0, -0.4) and not keeps_up(0.7, 1.0, -0.4)
    assert not keeps_up(math.nan, 1.0, 10.0) and not keeps_up(math.inf, 1.0, 10.0)  # diverged
    assert k_star({2: True, 4: True, 8: False, 16: True}) == 4  # every k' <= k, not a later one
    assert k_star({2: False, 4: True}) == 1
    assert k_star({8: True, 2: True, 4: True}) == 8  # whatever the order given
    assert k_star({}) == 1


def test_interval_at_a_branch_point():
    # median of k*; low b min k*; high: the next factor after the largest k*
    assert point_interval(8, [4, 8, 16], 64) == (64.0, 32.0, 256.0)
    # a replicate kept up at every factor tried: open above
    assert point_interval(8, [4, 8, 64], 64) == (64.0, 32.0, math.inf)
    # k = 2 not kept up: the estimate is b and it may lie anywhere below
    assert point_interval(8, [1, 1, 1], 64) == (8.0, 0.0, 16.0)
    assert point_interval(8, [1, 4, 2], 64) == (16.0, 0.0, 64.0)
    value, low, high = point_interval(8, [], 0)
    assert math.isnan(value) and (low, high) == (0.0, math.inf)
    assert coverage(3) == 0.75 and coverage(1) == 0.0


def test_branch_point_reads_k_star_per_replicate():
    point = BranchPoint(100, 0.5, planned=(2, 4, 8, 16))
    point.losses = {2: [0.49, 0.5, 0.52], 4: [0.5, math.nan, 0.6], 8: [0.7, 0.7, 0.7]}
    point.accepted = {k: [keeps_up(x, 0.5, 0.01) for x in v] for k, v in point.losses.items()}
    assert point.stars() == [4, 2, 1]
    assert point.interval(16) == (32.0, 0.0, 128.0)
    raw = point.to_dict(16)
    assert raw["factors"][1] == {"k": 4, "batch_size": 64, "losses": [0.5, None, 0.6],
                                 "accepted": [True, False, False]}
    assert raw["k_star"] == [4, 2, 1] and raw["planned_factors"] == [2, 4, 8, 16]


def test_the_reference_is_the_mean_of_the_base_run_and_its_continuations():
    point = BranchPoint(10, 1.0, [0.8, 1.2, 1.0])
    assert point.reference == pytest.approx(1.0)
    assert point.spread == pytest.approx(0.1633, abs=1e-4)  # sample sd / mean
    assert math.isnan(BranchPoint(10, 1.0, [0.8, math.nan]).reference)  # a diverged one
    alone = BranchPoint(10, 0.7)
    assert alone.reference == 0.7 and math.isnan(alone.spread)


def _probe(points, replicates=3):
    return BranchedProbe(8, "sqrt", 0.01, replicates, 1000, 128, points, 12.5,
                         expected_examples(8, 1000, 128, [list(p.accepted) for p in points], replicates),
                         {"learning_rate": 0.1})


def test_examples_follow_the_accounting_formula():
    # base: 1000 x 8; each factor tried: 3 replicates x (128 / k) steps x k x 8 examples
    assert expected_examples(8, 1000, 128, [[2, 4, 8], [2]], 3) == 8000 + 4 * 3 * 128 * 8
    assert expected_examples(8, 1000, 128, [], 3) == 8000


def test_the_estimate_is_the_last_measured_points_and_is_named():
    early = BranchPoint(218, 0.9, [0.9] * 3, {2: [0.9] * 3}, {2: [True] * 3})  # open above
    late = BranchPoint(872, 0.3, [0.3] * 3, {2: [0.3] * 3, 4: [0.3] * 3, 8: [0.4] * 3},
                       {2: [True, True, False], 4: [True, False, False], 8: [False] * 3})
    unmeasured = BranchPoint(900, math.nan)  # e.g. a diverged base run there: not the estimate
    probe = _probe([early, late, unmeasured])
    estimate = probe.estimate
    assert isinstance(estimate, CbsEstimate) and estimate.name == "b_branched"
    assert (estimate.value, estimate.low, estimate.high) == (16.0, 0.0, 64.0)  # k* 4, 2, 1
    assert estimate.level == 0.75 and estimate.examples == probe.examples
    assert "sqrt" in estimate.note and "tolerance 0.01" in estimate.note and "872" in estimate.note
    raw = json.loads(json.dumps(probe.to_dict()))  # plain JSON (no inf, no NaN)
    assert raw["estimate"]["definition"] == DEFINITIONS["b_branched"].definition
    assert [p["step"] for p in raw["points"]] == [218, 872, 900]
    assert raw["points"][2]["base_loss"] is None and raw["points"][0]["high"] is None
    assert CbsEstimate.from_dict(raw["estimate"]) == estimate
    nothing = _probe([]).estimate
    assert math.isnan(nothing.value) and nothing.high == math.inf
