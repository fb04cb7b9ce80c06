"""Best metaparameters per batch size, search-space edge checks, trial counts and their figures.

Every expected number below is worked out by hand in the comments.
"""

import math
from types import SimpleNamespace

import pandas as pd
import pytest

from batchscale.analysis.figures.plots_lr_momentum import _pick
from batchscale.analysis.figures.plots_metaparameters import lr_momentum_scatter, optimal_metaparameters_plot
from batchscale.analysis.statistics.metaparameters import (
    edge_warnings,
    optimal_metaparameters,
    trial_counts,
)
from batchscale.core.edges import EDGE_MARGIN, edge_margin
from tests.svg_figures import size_px

LOG_LR = {"type": "DOUBLE", "min_value": 1e-4, "max_value": 10.0, "scale": "LOG_SCALE"}
REVERSE_MOMENTUM = {"type": "DOUBLE", "min_value": 0.9, "max_value": 0.9999,
                    "scale": "REVERSE_LOG_SCALE"}


def _summary(rows):
    return pd.DataFrame(rows, columns=["batch_size", "steps_to_result", "best_trial",
                                       "learning_rate", "momentum", "effective_learning_rate"])


def test_optimal_recomputes_effective_lr_and_anchors_heuristics_at_smallest_reached():
    summary = _summary([
        (64, 500, 3, 0.2, 0.9, 999.0),        # stale effective lr: must be recomputed
        (16, 2000, 1, 0.1, math.nan, 5.0),    # NaN momentum: plain SGD, gamma = 0
        (8, math.nan, None, math.nan, math.nan, math.nan),  # never reached: dropped
        (1024, 40, 5, 0.4, 0.99, math.nan),
    ])
    out = optimal_metaparameters(summary).set_index("batch_size")
    assert list(out.index) == [16, 64, 1024]  # batch 8 had no best trial
    assert out.loc[16, "momentum"] == 0.0
    # eta / (1 - gamma): 0.1 / 1, 0.2 / 0.1, 0.4 / 0.01
    assert out["effective_learning_rate"].tolist() == pytest.approx([0.1, 2.0, 40.0])
    # B0 = 16, lr0 = eff0 = 0.1; B/B0 = 1, 4, 64
    assert out["linear_learning_rate"].tolist() == pytest.approx([0.1, 0.4, 6.4])
    assert out["sqrt_learning_rate"].tolist() == pytest.approx([0.1, 0.2, 0.8])
    assert out["linear_effective_learning_rate"].tolist() == pytest.approx([0.1, 0.4, 6.4])
    assert out["sqrt_effective_learning_rate"].tolist() == pytest.approx([0.1, 0.2, 0.8])
    assert out.loc[1024, "best_trial"] == 5 and out.loc[64, "steps_to_result"] == 500


def test_optimal_without_momentum_column_empty_and_duplicates():
    summary = pd.DataFrame({"batch_size": [32, 8], "steps_to_result": [10, 40],
                            "best_trial": [2, 1], "learning_rate": [0.8, 0.2]})
    out = optimal_metaparameters(summary)
    assert out["momentum"].tolist() == [0.0, 0.0]
    assert out["effective_learning_rate"].tolist() == pytest.approx([0.2, 0.8])
    assert out["linear_learning_rate"].tolist() == pytest.approx([0.2, 0.8])  # 0.2 * 32/8
    assert out["sqrt_learning_rate"].tolist() == pytest.approx([0.2, 0.4])    # 0.2 * 2
    none_reached = _summary([(8, math.nan, None, math.nan, math.nan, math.nan)])
    assert optimal_metaparameters(none_reached).empty
    assert "sqrt_effective_learning_rate" in optimal_metaparameters(pd.DataFrame()).columns
    with pytest.raises(ValueError, match="single goal"):
        optimal_metaparameters(pd.concat([summary, summary]))


def _edge_study():
    trials = pd.DataFrame([
        # batch 1024, best = 2: lr 9.6 sits at 0.9965 of the log range -> "max";
        # momentum 0.99 at (ln 100 - ln 10) / (ln 1e4 - ln 10) = 1/3 -> nothing;
        # label smoothing 0.1 is the largest of 3 points -> "max"; decay_fraction: not searched.
        (1024, 1, "COMPLETE", 1e-3, 0.9, 0.0, 0.5),
        (1024, 2, "COMPLETE", 9.6, 0.99, 0.1, 0.5),
        # batch 64, best = 1: lr 1e-3 at 0.2 of the log range (linear would say 0.0001: "min");
        # momentum 0.999 at 2/3 on the reverse-log range (linear would say 0.991: "max");
        # label smoothing 0.1 is the largest of only 2 points -> nothing.
        (64, 1, "COMPLETE", 1e-3, 0.999, 0.1, 0.5),
        # batch 32, best = 1: momentum 0.99988: -ln(1.2e-4) = 9.03 -> (9.03 - 2.30) / 6.91 = 0.974.
        (32, 1, "COMPLETE", 0.03, 0.99988, 0.01, 0.5),
        # batch 16 (string key, as JSON gives): lr 1.2e-4 at 0.0158 -> "min";
        # decay_fraction 0.88 on linear [0.1, 0.9] at 0.975 -> "max".
        (16, 4, "COMPLETE", 1.2e-4, 0.95, 0.01, 0.88),
        # batch 8 has no best trial; batch 4096's best is not in trials (summary values used).
        (8, 1, "COMPLETE", 9.9, 0.95, 0.0, 0.5),
    ], columns=["batch_size", "trial_id", "status", "learning_rate", "momentum",
                "label_smoothing", "decay_fraction"])
    summary = _summary([
        (1024, 10, 2, 9.6, 0.99, 960.0), (64, 100, 1, 1e-3, 0.999, 1.0),
        (32, 200, 1, 0.03, 0.99988, 250.0), (16, 500, 4, 1.2e-4, 0.95, 2.4e-3),
        (8, math.nan, None, math.nan, math.nan, math.nan), (4096, 5, 7, 10.0, 0.95, 200.0),
        (2048, 6, 1, 10.0, 0.95, 200.0),  # no search space known for 2048: skipped
    ])
    smoothing3 = {"type": "DISCRETE", "feasible_points": [0.0, 0.1, 0.01], "scale": ""}
    smoothing2 = {"type": "DISCRETE", "feasible_points": [0.0, 0.1], "scale": ""}
    space = {
        1024: {"learning_rate": LOG_LR, "momentum": REVERSE_MOMENTUM, "label_smoothing": smoothing3,
               "end_learning_rate_factor": LOG_LR},  # searched but not in trials: skipped
        64: {"learning_rate": LOG_LR, "momentum": REVERSE_MOMENTUM, "label_smoothing": smoothing2},
        32: {"learning_rate": LOG_LR, "momentum": REVERSE_MOMENTUM, "label_smoothing": smoothing3},
        "16": {"learning_rate": LOG_LR, "decay_fraction": {
            "type": "DOUBLE", "min_value": 0.1, "max_value": 0.9, "scale": "LINEAR_SCALE"}},
        8: {"learning_rate": LOG_LR}, 4096: {"learning_rate": LOG_LR}, 2048: {},
    }
    return trials, summary, space


def test_edge_warnings_use_each_scale_and_skip_what_is_not_searched():
    trials, summary, space = _edge_study()
    found = {(w["batch_size"], w["parameter"]): w
             for w in edge_warnings(trials, summary, space, EDGE_MARGIN)}
    assert {key: w["edge"] for key, w in found.items()} == {
        (16, "learning_rate"): "min", (16, "decay_fraction"): "max",
        (32, "momentum"): "max",
        (1024, "learning_rate"): "max", (1024, "label_smoothing"): "max",
        (4096, "learning_rate"): "max",  # from the summary row: trial 7 is not in trials
    }
    top = found[(1024, "learning_rate")]
    assert top["value"] == 9.6 and top["range"] == [1e-4, 10.0]
    assert top["message"] == ("batch 1024: best trial's learning_rate 9.6 is at the top of the "
                              "searched range [0.0001, 10]; the paper re-searched with a wider "
                              "range in this case")
    assert "\n" not in top["message"]
    assert found[(32, "momentum")]["range"] == [0.9, 0.9999]
    assert "0.99988" in found[(32, "momentum")]["message"]  # not rounded to "1"
    assert found[(1024, "label_smoothing")]["range"] == [0.0, 0.1]
    assert "largest" in found[(1024, "label_smoothing")]["message"]


def test_the_default_margin_widens_for_searches_of_few_trials():
    """1/trials between 5% and 20%: a search of few trials has no point nearer an end."""
    assert [edge_margin(n) for n in (0, 2, 5, 8, 20, 100)] == [0.05, 0.2, 0.2, 0.125, 0.05, 0.05]
    trials, summary, space = _edge_study()
    default = {(w["batch_size"], w["parameter"]) for w in edge_warnings(trials, summary, space)}
    fixed = {(w["batch_size"], w["parameter"])
             for w in edge_warnings(trials, summary, space, EDGE_MARGIN)}
    counts = trials.groupby("batch_size").size()
    assert counts.max() < 5  # a few trials each: the default margin is 20%
    assert default == fixed | {(64, "learning_rate")}  # a learning rate 20% from the bottom


def test_edge_warnings_margin_and_degenerate_inputs():
    trials, summary, space = _edge_study()
    tight = {(w["batch_size"], w["parameter"]) for w in edge_warnings(trials, summary, space, 0.01)}
    assert (16, "learning_rate") not in tight      # 0.0158 > 0.01
    assert (1024, "learning_rate") in tight        # 0.9965 >= 0.99
    assert (32, "momentum") not in tight           # 0.974 < 0.99
    wide = {(w["batch_size"], w["parameter"]): w["edge"]
            for w in edge_warnings(trials, summary, space, 0.35)}
    assert wide[(1024, "momentum")] == "min"       # 1/3 <= 0.35
    assert edge_warnings(trials, summary, {}) == []
    assert edge_warnings(trials, summary, None) == []
    assert edge_warnings(trials, summary.iloc[:0], space) == []


def test_trial_counts():
    trials = pd.DataFrame({
        "batch_size": [8, 8, 8, 8, 8, 16, 16],
        "trial_id": [1, 2, 3, 4, 5, 1, 2],
        "status": ["COMPLETE", "COMPLETE", "COMPLETE", "INCOMPLETE", "INFEASIBLE",
                   "INFEASIBLE", "INFEASIBLE"],
        # trial 4 says reached but is INCOMPLETE: not counted; NaN is not reached
        "reached": [True, False, True, True, None, None, None],
    })
    counts = trial_counts(trials).set_index("batch_size")
    assert counts.loc[8, ["trials", "complete", "incomplete", "infeasible", "reached"]].tolist() == [
        5, 3, 1, 1, 2]
    assert counts.loc[8, "reached_fraction"] == pytest.approx(2 / 3)
    assert counts.loc[8, "diverged_fraction"] == pytest.approx(0.2)
    assert counts.loc[16, "complete"] == 0 and counts.loc[16, "reached"] == 0
    assert math.isnan(counts.loc[16, "reached_fraction"])
    assert counts.loc[16, "diverged_fraction"] == 1.0
    unknown = trial_counts(trials.drop(columns="reached"))
    assert unknown["reached"].isna().all() and unknown["reached_fraction"].isna().all()
    assert trial_counts(trials.iloc[:0]).empty


def _image(svg: bytes) -> SimpleNamespace:
    """The SVG figure's size on screen in px (tests/svg_figures.py parses it)."""
    width, height = size_px(svg)
    return SimpleNamespace(width=width, height=height, size=(width, height))


def _scatter_trials(batch_sizes, momentum=True):
    rows = []
    for b in batch_sizes:
        for t, (lr, m, status, reached) in enumerate([
            (0.01, 0.9, "COMPLETE", True), (0.1, 0.99, "COMPLETE", False),
            (3.0, 0.999, "INFEASIBLE", None), (1e-3, math.nan, "INCOMPLETE", False),
        ], start=1):
            rows.append({"batch_size": b, "trial_id": t, "status": status, "learning_rate": lr,
                         "momentum": m, "reached": reached})
    trials = pd.DataFrame(rows)
    return trials if momentum else trials.drop(columns="momentum")


def test_optimal_metaparameters_plot_svg_and_degenerate_inputs():
    summary = _summary([(16, 2000, 1, 0.1, 0.9, 1.0), (64, 500, 3, 0.2, 0.99, 20.0)])
    image = _image(optimal_metaparameters_plot(optimal_metaparameters(summary), "toy"))
    assert image.width > 2 * image.height  # three panels side by side
    one = _summary([(16, 2000, 1, 0.1, math.nan, 1.0)])
    for optimal in (optimal_metaparameters(one), optimal_metaparameters(pd.DataFrame()), None,
                    optimal_metaparameters(summary).drop(columns=["linear_learning_rate"])):
        assert _image(optimal_metaparameters_plot(optimal, "degenerate")).size == image.size


def test_lr_momentum_scatter_svg_panels_and_degenerate_inputs():
    trials = _scatter_trials([16, 64])
    summary = _summary([(16, 100, 1, 0.01, 0.9, 0.1), (64, math.nan, None, math.nan, math.nan,
                                                       math.nan)])
    space = {16: {"learning_rate": LOG_LR, "momentum": REVERSE_MOMENTUM}}
    two = _image(lr_momentum_scatter(trials, summary, space, "toy"))
    assert two.width > two.height
    # 20 batch sizes thinned to 4 panels: the same 2 x 3 grid as 4 batch sizes.
    many = _image(lr_momentum_scatter(_scatter_trials([2 ** k for k in range(20)]), None, None,
                                      "many", max_panels=4))
    four = _image(lr_momentum_scatter(_scatter_trials([1, 2, 4, 8]), None, None, "four"))
    assert many.size == four.size  # 12 panels, 4 rows of 3: tests/unit/test_plots.py
    no_reach = trials.assign(reached=False)
    for args in [
        (no_reach, summary.assign(best_trial=None), space),           # nobody reached
        (trials[trials["batch_size"] == 16], summary, {}),              # one batch size
        (trials.assign(momentum=math.nan), summary, space),             # NaN momentum
        (_scatter_trials([16, 64], momentum=False), summary, space),    # plain SGD strip
        (trials.assign(momentum=0.0, learning_rate=-1.0), None, None),  # nothing log-plottable
        (trials.iloc[:0], summary, space),                              # no trials at all
        (pd.DataFrame(), None, None),
    ]:
        _image(lr_momentum_scatter(*args, "degenerate"))


def test_pick_spreads_evenly_and_keeps_the_ends():
    assert _pick(list(range(10)), 4) == [0, 3, 6, 9]
    assert _pick([8, 16], 12) == [8, 16]
    assert _pick(list(range(10)), 0) == [0]
