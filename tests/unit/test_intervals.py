"""The one notation for intervals and open bounds (batchscale/analysis/statistics/intervals.py): a
two-sided interval, a bound on one side only (an infinite end, an end JSON wrote as null,
or a regime boundary beyond the measured batch sizes), and what the Kubeflow metrics
publish of each: the parts the text shows, never a made-up number for an open end."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from batchscale.analysis.statistics.amounts import duration
from batchscale.analysis.statistics.intervals import (
    ABOVE,
    BELOW,
    MEASURED,
    UNDETERMINED,
    bound,
    format_interval,
    number,
    regime_bound,
    regime_text,
)
from batchscale.analysis.statistics.regimes import Estimate, fit_regimes
from tests.synthetic import synthetic_crossings

INF = math.inf


@pytest.mark.parametrize("value,low,high,text", [
    (456.9, 247.6, 865.2, "457 [248, 865]"),
    (23.31, 14.15, 36.9, "23.3 [14.2, 36.9]"),
    (456.9, 247.6, INF, "≥ 248"),       # the resamples ran off the fit grid
    (456.9, 247.6, None, "≥ 248"),      # the same end as JSON writes it
    (18.31, -INF, 45.79, "≤ 45.8"),
    (18.31, None, 45.79, "≤ 45.8"),
    (457.0, math.nan, math.nan, "457"),  # no resamples: no interval
    (457.0, None, None, "457"),
    (math.nan, 1.0, 2.0, "—"),
    (5.0, -INF, INF, "—"),
])
def test_format_interval(value, low, high, text):
    assert format_interval(value, low, high) == text


def test_a_unit_formats_every_number_of_the_interval():
    assert format_interval(0.143, 0.0259, 0.304, duration) == "0.143 s [0.0259 s, 0.304 s]"
    assert format_interval(200.0, 90.0, INF, duration) == "≥ 90 s"
    assert number(4569.4) == "4569" and number(0.0123456) == "0.0123" and number(None) == "—"


def test_kfp_numbers_are_the_parts_the_text_shows():
    assert bound(457, 248, 865).numbers() == {"value": 457.0, "low": 248.0, "high": 865.0}
    assert bound(457, 248, INF).numbers() == {"low": 248.0}  # no value, no fake upper end
    assert bound(18.3, -INF, 45.8).numbers() == {"high": 45.8}
    assert bound(457, math.nan, math.nan).numbers() == {"value": 457.0}
    assert bound(5, -INF, INF).numbers() == {}


SIZES = [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4000]


def test_regime_boundaries_beyond_the_measured_range_are_one_sided_and_say_so():
    above = Estimate(4569.0, 2476.0, 8652.0, ABOVE)  # the quickstart's max useful batch size
    assert regime_bound(above).text() == "≥ 2476" and regime_bound(above).numbers() == {"low": 2476.0}
    assert regime_text(above, SIZES) == ("the fit puts it beyond the largest batch size measured "
                                         "(4000); the data bound it only from below: ≥ 2476")
    short = regime_text(above, SIZES, short=True)
    assert short == "≥ 2476 (fit beyond the largest batch size measured, 4000)"
    partial = Estimate(900.0, 500.0, 5000.0, ABOVE)  # the value is measured, its interval is not
    assert regime_text(partial, SIZES, short=True) == "≥ 500 (fit 900; its interval reaches past 4000)"
    assert regime_text(partial, SIZES) == (
        "the fit puts it at 900, but its 95% interval reaches past the largest batch size "
        "measured (4000); the data bound it only from below: ≥ 500")
    below = Estimate(3.0, 1.0, 12.0, BELOW)
    assert regime_text(below, SIZES) == ("the fit puts it below the smallest batch size measured "
                                         "(8); the data bound it only from above: ≤ 12")
    undetermined = Estimate(300.0, 2.0, 9000.0, UNDETERMINED)
    assert regime_text(undetermined, SIZES, short=True) == "undetermined (fit 300)"
    assert regime_bound(undetermined).numbers() == {}
    measured = Estimate(456.9, 247.6, 865.2, MEASURED)
    assert regime_text(measured, SIZES) == "457 [248, 865]"


def test_s_min_is_a_step_count_never_labelled_with_a_batch_size_range():
    """S_min 18.31 [0, 45.79] used to read "18.31 [0, 45.79] (above the measured range)": its
    lower end 0 is open (resamples that look like pure perfect scaling), and its status
    means only that it is extrapolated."""
    s_min = Estimate(18.31, 0.0, 45.79, ABOVE)
    text = regime_text(s_min, SIZES, steps=True, short=True)
    assert text == "≤ 45.8 (extrapolated)" and "measured range" not in text
    assert regime_bound(s_min, steps=True).numbers() == {"high": 45.79}


def test_a_fit_reads_the_same_from_its_numbers_and_from_its_json():
    """The console prints regimes from summary.json, where infinities are null: the text
    must be the one the report shows."""
    fit = fit_regimes(synthetic_crossings(10, 1000 * 16384, [2 ** k for k in range(1, 15)], 100,
                                          np.random.default_rng(5)), resamples=100)
    doc = json.loads(json.dumps(fit.to_dict(), allow_nan=False))
    for key in ("s_min", "b_star", "perfect_scaling_end", "max_useful_batch_size"):
        est, steps = getattr(fit, key), key == "s_min"
        text = regime_text(est, fit.batch_sizes, steps, fit.level)
        assert regime_text(doc[key], doc["batch_sizes"], steps, doc["level"]) == text == doc[key]["text"]
        assert "inf" not in text and "?" not in text
    assert doc["b_star"]["status"] == ABOVE and doc["b_star"]["text"].endswith(
        f"the data bound it only from below: ≥ {number(fit.b_star.low)}")
