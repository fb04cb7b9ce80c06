"""The branched probe trained for real on the digits (a few seconds): the tolerance decides
the verdicts, the estimate and interval follow them, the examples follow the accounting
formula, and a diverged run is data, not a crash."""

from __future__ import annotations

import math

import pytest

from batchscale.planning.branched_estimate import branch_points, expected_examples
from batchscale.planning.branched_probe import branched_probe
from batchscale.store.layout import StudyStore
from batchscale.validation import parse_spec
from batchscale.workloads.dataset_registry import dataset_for, open_pipeline
from tests.conftest import tiny_spec_dict

STEPS = 16  # D = 4: points 3, 6, 12; factors 2, 4 at batch size 16 (each a compilation)


@pytest.fixture(scope="module")
def digits(digits_store):
    from batchscale.training.keras_setup import select_backend

    spec = parse_spec(tiny_spec_dict(digits_store))
    select_backend(spec.backend)
    return spec, open_pipeline(StudyStore(digits_store), dataset_for(spec.workload),
                               spec.workload.options)


def _probe(digits, tolerance, learning_rate=0.06, max_examples=None):
    spec, pipeline = digits
    params = {"learning_rate": learning_rate, "momentum": 0.9, "label_smoothing": 0.0}
    return branched_probe(spec, pipeline, params, 16, tolerance=tolerance, steps=STEPS,
                          log=lambda *_: None, max_examples=max_examples)


def _examples(probe):
    return expected_examples(16, probe.steps, probe.length,
                             [[1, *p.accepted] if p.continued else [] for p in probe.points],
                             probe.replicates)


def test_the_tolerance_decides_and_the_examples_add_up(digits):
    lenient = _probe(digits, tolerance=1e6)  # every branch keeps up
    assert [p.step for p in lenient.points] == branch_points(STEPS, 4) == [3, 6, 12]
    assert lenient.steps == STEPS and lenient.length == 4
    for point in lenient.points:
        assert sorted(point.accepted) == [2, 4] and point.stars() == [4, 4, 4]
        assert len(point.continued) == 3 and math.isfinite(point.reference)
    estimate = lenient.estimate
    assert (estimate.value, estimate.low, estimate.high) == (64, 64, math.inf)
    assert lenient.examples == _examples(lenient) == 16 * 16 + 3 * 3 * 3 * 4 * 16  # 3 points x k = 1, 2, 4

    strict = _probe(digits, tolerance=-0.9)  # a tenth of the reference loss: nothing keeps up
    for point in strict.points:  # every replicate failed k = 2: no larger factor was trained
        assert sorted(point.accepted) == [2] and point.stars() == [1, 1, 1]
    estimate = strict.estimate
    assert (estimate.value, estimate.low, estimate.high) == (16, 0, 32)
    assert strict.examples == _examples(strict) < lenient.examples
    assert estimate.to_dict()["examples"] == strict.examples

    # an examples cap: the last point first, as far as k = 2; the earlier points not at all
    capped = _probe(digits, tolerance=1e6, max_examples=16 * 16 + 2 * 3 * 4 * 16)
    assert capped.examples == 16 * 16 + 2 * 3 * 4 * 16 and capped.max_examples == capped.examples
    assert [sorted(p.accepted) for p in capped.points] == [[], [], [2]]
    assert [len(p.continued) for p in capped.points] == [0, 0, 3]
    assert capped.estimate.value == 32 and capped.estimate.high == math.inf  # k = 4 not tried


def test_a_diverged_base_run_is_data(digits):
    probe = _probe(digits, tolerance=0.01, learning_rate=1e30)
    assert [p.step for p in probe.points] == [3, 6, 12]
    assert all(not p.accepted and not math.isfinite(p.reference) for p in probe.points)
    assert math.isnan(probe.estimate.value) and probe.estimate.to_dict()["value"] is None
    assert probe.examples == STEPS * 16  # the base run only
