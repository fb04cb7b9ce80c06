"""Quasi-random search: deterministic, stable ids, uniform, mapped onto each scale."""

import math

import numpy as np
import pytest

from batchscale.core.spec import Parameter
from batchscale.search.halton import halton_points, primes
from batchscale.search.trials import make_trials, sample_parameters
from batchscale.validation import default_spec_dict, parse_spec


def test_primes():
    assert primes(6) == [2, 3, 5, 7, 11, 13]


def test_points_are_deterministic_and_a_prefix_is_stable():
    a = halton_points(50, 3, seed=7)
    assert np.array_equal(a, halton_points(50, 3, seed=7))
    assert np.array_equal(a[:10], halton_points(10, 3, seed=7))
    assert not np.array_equal(a, halton_points(50, 3, seed=8))


def test_points_fill_the_unit_cube_evenly():
    points = halton_points(512, 2, seed=0)
    assert points.min() >= 0 and points.max() < 1
    for d in range(2):  # low discrepancy: every tenth of each axis gets 10% +- 1.5%
        counts = np.histogram(points[:, d], bins=10, range=(0, 1))[0]
        assert np.all(np.abs(counts - 51.2) <= 8), counts


@pytest.mark.parametrize("u", [0.0, 0.25, 0.5, 0.999999])
def test_scales_map_into_their_ranges(u):
    log = Parameter("learning_rate", "log", 1e-3, 1.0)
    assert 1e-3 <= log.from_unit(u) <= 1.0
    rev = Parameter("momentum", "reverse_log", 0.9, 0.9999)
    assert 0.9 <= rev.from_unit(u) <= 0.9999
    disc = Parameter("label_smoothing", "discrete", values=(0.0, 0.01, 0.1))
    assert disc.from_unit(u) in (0.0, 0.01, 0.1)
    integer = Parameter("decay_steps", "linear", 100, 200, integer=True)
    assert isinstance(integer.from_unit(u), int) and 100 <= integer.from_unit(u) <= 200


def test_log_and_reverse_log_midpoints():
    assert Parameter("learning_rate", "log", 1e-4, 1.0).from_unit(0.5) == pytest.approx(1e-2)
    # reverse log: 1 - gamma is log-uniform, so the midpoint of [0.9, 0.9999] is 1 - 1e-2.5
    assert Parameter("momentum", "reverse_log", 0.9, 0.9999).from_unit(0.5) == pytest.approx(
        1 - 10 ** -2.5)
    assert Parameter("label_smoothing", "linear", 0.0, 0.2).from_unit(0.5) == pytest.approx(0.1)


def test_trials_cover_every_batch_size_with_stable_ids_and_fixed_values():
    spec = parse_spec(default_spec_dict())
    trials = make_trials(spec)
    assert len(trials) == len(spec.batch_sizes) * spec.trials_per_batch_size
    ids = {(t.batch_size, t.trial_id) for t in trials}
    assert len(ids) == len(trials)
    assert all(t.parameters["label_smoothing"] == 0.0 for t in trials)
    lrs = [t.parameters["learning_rate"] for t in trials if t.batch_size == spec.batch_sizes[0]]
    assert len(set(lrs)) == spec.trials_per_batch_size  # distinct points
    grown = parse_spec({**default_spec_dict(), "trials_per_batch_size": 20})
    assert sample_parameters(grown, 20)[:6] == sample_parameters(spec, 6)


def test_search_spreads_over_log_range():
    spec = parse_spec({**default_spec_dict(), "trials_per_batch_size": 64})
    lrs = np.log([p["learning_rate"] for p in sample_parameters(spec, 64)])
    lo, hi = math.log(0.003), math.log(0.3)
    assert lrs.min() < lo + 0.1 * (hi - lo) and lrs.max() > hi - 0.1 * (hi - lo)


def test_trials_do_not_depend_on_the_order_of_search_space_keys():
    """KFP passes the spec as a protobuf Struct, which does not keep key order."""
    raw = default_spec_dict()
    reordered = {**raw, "search_space": dict(reversed(list(raw["search_space"].items())))}
    assert list(reordered["search_space"]) != list(raw["search_space"])
    assert make_trials(parse_spec(reordered)) == make_trials(parse_spec(raw))
