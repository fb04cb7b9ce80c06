"""The figures: SVG that parses, sizes that fit the report's column, every text legible at
100% zoom (tests/svg_figures.py), nothing fetched, no failure on empty or degenerate input,
and the normalisation helper's numbers worked out by hand."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from batchscale.analysis.figures import plot_base
from batchscale.analysis.figures.plots import (
    best_trial_curves_plot,
    budget_label,
    budget_plot,
    normalize_curves,
    steps_to_result_plot,
    train_vs_val_plot,
)
from batchscale.analysis.pages import html
from tests.svg_figures import (
    MIN_TEXT_PX,
    external_references,
    outside,
    size_px,
    texts,
    too_small,
)

NAN = math.nan


def legible(svg: bytes) -> tuple[float, float]:
    """A figure as the report shows it: at its own size in the column, no text under the
    floor or cut off, nothing to fetch; its size in px."""
    assert svg.lstrip().startswith(b"<?xml") and b"<!DOCTYPE" not in svg
    width, height = size_px(svg)
    assert width <= plot_base.PAGE_WIDTH_PX
    assert too_small(svg) == [] and outside(svg) == [] and external_references(svg) == []
    return width, height


def sane(svg: bytes, wide: bool = False) -> tuple[float, float]:
    """``legible``, and one panel's size (two fit side by side in the column) or, ``wide``,
    nearly the column's width."""
    width, height = legible(svg)
    assert (1000 if wide else 480) <= width <= (plot_base.PAGE_WIDTH_PX if wide else 550)
    assert 300 <= height <= 700
    return width, height


def curve(batch_sizes, steps) -> pd.DataFrame:
    return pd.DataFrame({"batch_size": batch_sizes, "steps_to_result": steps,
                         "examples_to_result": [b * s for b, s in zip(batch_sizes, steps)]})


class FakeFit:
    """Duck-typed regime fit: S = 100 (1 + 16 / B), band +-20%."""

    fitted = True
    level = 0.95

    def curve(self, batch_sizes):
        return 100 * (1 + 16 / np.asarray(batch_sizes, dtype=float))

    def band(self, batch_sizes):
        c = self.curve(batch_sizes)
        return 0.8 * c, 1.2 * c


class BrokenFit:
    fitted = True

    def curve(self, batch_sizes):
        raise RuntimeError("no")

    band = curve


CURVES = {"x": curve([2, 4, 8], [400, 200, 150]), "y": curve([2, 8], [100, 40]),
          "z": curve([4, 16], [NAN, 30])}


def test_normalize_curves_by_hand():
    out = normalize_curves(CURVES, 4)
    assert out.normalized_column == "normalized_steps_to_result"
    assert list(out.curves) == ["x"] and out.reference == {"x": 200.0}
    assert out.curves["x"]["normalized_steps_to_result"].tolist() == [2.0, 1.0, 0.75]
    assert out.notes == [
        "y: left out of the normalised comparison: batch size 4 was not measured",
        "z: left out of the normalised comparison: the goal was not reached at batch size 4"]
    at8 = normalize_curves(CURVES, 8)
    assert at8.curves["y"]["normalized_steps_to_result"].tolist() == [2.5, 1.0]
    assert at8.curves["x"]["normalized_steps_to_result"].tolist() == pytest.approx([8 / 3, 4 / 3, 1.0])
    examples = normalize_curves(CURVES, 8, column="examples_to_result")
    assert examples.curves["y"]["normalized_examples_to_result"].tolist() == [200 / 320, 1.0]


def test_normalize_curves_without_batch_size_keeps_everything_and_sorts():
    shuffled = {"x": curve([8, 2, 4], [150, 400, 200])}
    out = normalize_curves(shuffled, None)
    assert out.notes == [] and out.reference == {"x": 1.0}
    assert out.curves["x"]["batch_size"].tolist() == [2, 4, 8]
    assert out.curves["x"]["normalized_steps_to_result"].tolist() == [400, 200, 150]
    assert normalize_curves({}, 4).curves == {}
    with pytest.raises(ValueError, match="normalize_at: 0 must be a positive batch size"):
        normalize_curves(CURVES, 0)


def test_steps_to_result_plot_curves_fits_and_normalisation():
    plain = steps_to_result_plot(CURVES, "three curves")
    sane(plain)
    with_fit = steps_to_result_plot(CURVES, "three curves", fits={"x": FakeFit(), "y": None})
    sane(with_fit)
    assert with_fit != plain
    normalised = steps_to_result_plot(CURVES, "normalised", fits={"x": FakeFit()}, normalize_at=4)
    sane(normalised)
    examples = steps_to_result_plot(CURVES, "examples", fits={"x": FakeFit()},
                                    column="examples_to_result", ylabel="examples")
    sane(examples)


def test_steps_to_result_plot_old_call_style_splits_by_goal():
    summary = pd.concat([curve([2, 8], [250, 100]).assign(goal="e<0.1"),
                         curve([2, 8], [120, 50]).assign(goal="e<0.2")])
    sane(steps_to_result_plot(summary, "old style"))
    sane(steps_to_result_plot(curve([2, 8], [250, 100]), "no goal column"))


@pytest.mark.parametrize("curves", [
    {}, None, {"a": curve([], [])}, {"a": curve([2, 8], [NAN, NAN])}, {"a": curve([4], [10])},
    {"a": curve([2, 4], [0, -3])}, {"a": pd.DataFrame({"other": [1]})},
    {"a": curve([2, 8], [NAN, 5]), "b": curve([2, 8], [NAN, NAN])},
])
def test_steps_to_result_plot_degenerate_inputs(curves):
    sane(steps_to_result_plot(curves, "degenerate", fits={"a": BrokenFit()}))
    sane(steps_to_result_plot(curves, "degenerate", normalize_at=8))


def test_steps_to_result_plot_nothing_normalisable_and_unfitted_fit():
    class Unfitted:
        fitted = False

    sane(steps_to_result_plot(CURVES, "none at 1024", normalize_at=1024, fits={"x": Unfitted()}))


def test_budget_labels():
    assert budget_label("steps", 4096) == "4,096 steps"
    assert budget_label("examples", 65536) == "65,536 examples"
    assert budget_label("examples", 137500, train_examples=55000) == "2.5 epochs"
    assert budget_label("steps", 100, train_examples=55000) == "100 steps"


def best_table(kinds=("steps", "examples")) -> pd.DataFrame:
    rows = [{"kind": kind, "budget": budget, "batch_size": b,
             "best_value": NAN if (budget == 100 and b == 64) else 0.5 / math.log2(4 * b * budget),
             "trial_id": 1, "step": 10}
            for kind in kinds for budget in (100, 1000) for b in (2, 8, 64)]
    return pd.DataFrame(rows)


def test_budget_plot_one_panel_per_kind():
    one = sane(budget_plot(best_table(("steps",)), "fm", "validation error"))
    two = sane(budget_plot(best_table(), "fm", "validation error", train_examples=55000), wide=True)
    assert two[0] > one[0]


@pytest.mark.parametrize("best", [
    None, pd.DataFrame(), pd.DataFrame(columns=["kind", "budget", "batch_size", "best_value"]),
    best_table(("examples",)).assign(best_value=NAN),
])
def test_budget_plot_degenerate(best):
    sane(budget_plot(best, "empty", "validation error"))


def test_train_vs_val_plot():
    val = curve([2, 8, 32], [250, 100, 60]).assign(goal="e<0.1")
    train = curve([2, 8, 32], [250, 90, NAN]).assign(goal="e<0.1")
    sane(train_vs_val_plot(val, train, "Figure 12"))
    sane(train_vs_val_plot(val, None, "no training"))
    sane(train_vs_val_plot(None, pd.DataFrame(), "nothing"))
    sane(train_vs_val_plot(val.assign(steps_to_result=NAN), train.iloc[0:0], "not reached"))


def test_best_trial_curves_plot_unchanged():
    rows = pd.DataFrame({"step": [0, 100, 250], "val/classification_error": [0.9, 0.2, 0.08]})
    sane(best_trial_curves_plot({2: rows, 8: rows}, "classification_error", 0.1, "best"))


# ---- legibility -----------------------------------------------------------------------
def test_the_legibility_check_fails_on_small_text_and_on_a_figure_scaled_down():
    """The checker itself: a 6 pt label (the old momentum panels) is 8 px on screen, and
    8.5 pt text in a figure wider than the column is scaled under the floor."""

    @plot_base.drawing
    def draw(width, size):
        plt, (fig, ax) = plot_base.figure(min(width, plot_base.MAX_WIDTH_IN))
        fig.set_size_inches(width, 4)  # past the guard in figure(): what it guards against
        ax.set_title("small", fontsize=size)
        return plot_base.svg(plt, fig)

    assert too_small(draw(5.5, 6)) == [("small", 8.0)]
    assert too_small(draw(5.5, 8.5)) == []
    assert [t for t, _ in too_small(draw(13.5, 8.5))] == ["small"]  # shown at 1118/1296
    with pytest.raises(ValueError, match="scaled below its font sizes"):
        plot_base.figure(13.5)


def test_every_text_of_the_steps_figures_is_at_least_the_floor_and_plainly_numbered():
    svg = steps_to_result_plot(CURVES, "with notes", fits={"x": FakeFit()}, normalize_at=4)
    found = dict(texts(svg))
    assert min(found.values()) >= MIN_TEXT_PX
    assert {"2", "4", "8"} <= set(found)  # batch sizes as numbers, not 2^1 in mathtext
    assert any("was not measured" in t for t in found)  # the footnote, wrapped, inside
    assert b"font-size" in svg and b"<path d=\"M 0 -" not in svg[:0]  # text kept as text


def test_figures_are_the_same_bytes_for_the_same_data_and_leave_rcparams_alone():
    import matplotlib

    before = dict(matplotlib.rcParams)
    assert steps_to_result_plot(CURVES, "again") == steps_to_result_plot(CURVES, "again")
    assert dict(matplotlib.rcParams) == before  # a notebook's settings are its own


def test_plain_tick_labels():
    assert [plot_base.plain(v) for v in (4096, 1048576, 0.125, 0.05, 3000, 1e-5, 2.5e-5,
                                         2.5e9)] == [
        "4096", "1048576", "0.125", "0.05", "3000", "1e-5", "2.5e-5", "2.5e9"]


def _time_table():
    from types import SimpleNamespace

    table = pd.DataFrame({"batch_size": [8, 64, 512, 8, 64], "devices": [1, 1, 1, 4, 4],
                          "time_seconds": [40.0, 9.0, 5.0, 20.0, 3.0],
                          "time_low": [30.0, 7.0, 4.0, 15.0, 2.0],
                          "time_high": [50.0, 11.0, 7.0, NAN, 4.0],
                          "cost": [1e-5, 2e-6, 1e-6, 2e-5, 3e-6]})
    table = table.assign(cost_low=table["cost"] * 0.8, cost_high=table["cost"] * 1.2)
    best = SimpleNamespace(batch_size=64, devices=4, value=3.0)
    limit = SimpleNamespace(beyond=False, batch_size=256.0, basis="projection")
    return table, best, limit


def test_time_and_cost_figures_are_legible():
    from batchscale.analysis.figures.plots_time import cost_to_result_plot, time_to_result_plot

    table, best, limit = _time_table()
    sane(time_to_result_plot(table, best, limit, "time"))
    sane(cost_to_result_plot(table, best, None, "cost", "USD"))
    sane(time_to_result_plot(table.iloc[:0], None, None, "nothing"))


def _trials(batch_sizes, stopped=False):
    rows = []
    for b in batch_sizes:
        for t in range(1, 31):  # 30 trials a batch size: a crowded panel
            lr, m = 10 ** (-4 + 5 * ((t * 0.618) % 1)), 1 - 10 ** (-3 * ((t * 0.414) % 1))
            status = "INFEASIBLE" if lr > 3 else "COMPLETE"
            rows.append({"batch_size": b, "trial_id": t, "status": status, "learning_rate": lr,
                         "momentum": m, "reached": status == "COMPLETE" and t % 3 == 0,
                         "stopped_early": stopped and t % 5 == 0})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("batch_sizes", [[64], [8, 64, 512], [8, 64, 512, 4096],
                                         [2 ** k for k in range(1, 15)]])
def test_metaparameter_figures_are_legible_with_any_number_of_panels(batch_sizes):
    from batchscale.analysis.figures.plots_metaparameters import (
        lr_momentum_scatter,
        optimal_metaparameters_plot,
    )
    from batchscale.analysis.statistics.metaparameters import optimal_metaparameters

    trials = _trials(batch_sizes, stopped=len(batch_sizes) == 3)
    summary = pd.DataFrame({"batch_size": batch_sizes, "steps_to_result": 100.0,
                            "best_trial": 3, "learning_rate": 0.01, "momentum": 0.9,
                            "effective_learning_rate": 0.1})
    space = {"learning_rate": {"type": "DOUBLE", "min_value": 1e-4, "max_value": 10.0},
             "momentum": {"type": "DOUBLE", "min_value": 0.0, "max_value": 0.999}}
    svg = lr_momentum_scatter(trials, summary, space, "lr x momentum")
    width, height = legible(svg)
    columns, rows = min(len(batch_sizes), 3), math.ceil(min(len(batch_sizes), 12) / 3)
    assert width >= 300 * columns and height >= 270 * rows  # panels keep their size
    assert [t for t, _ in texts(svg)].count("learning rate η") == 1  # shared, not per panel
    legible(lr_momentum_scatter(trials.drop(columns="momentum"), summary, None, "SGD"))
    sane(optimal_metaparameters_plot(optimal_metaparameters(summary), "best"), wide=True)


# ---- embedding in the report ----------------------------------------------------------
def test_a_figure_is_embedded_whole_as_a_data_uri_no_wider_than_itself():
    import base64
    import re

    svg = steps_to_result_plot(CURVES, "embedded")
    page = html.figure(svg, "a caption <b>", alt="steps_to_result.svg")
    src = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', page)
    assert base64.b64decode(src[1]) == svg
    assert f'style="max-width:{size_px(svg)[0]:.0f}px"' in page  # the caption wraps under it
    assert "a caption &lt;b&gt;" in page and 'alt="steps_to_result.svg"' in page
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 20
    assert 'src="data:image/png;base64,' in html.figure(png, "old")
    with pytest.raises(ValueError, match="PNG or SVG"):
        html.figure(b"GIF89a", "neither")


def test_no_warning_while_drawing_degenerate_figures():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for curves in ({}, {"a": curve([2, 8], [NAN, NAN])}, {"a": curve([4], [10])}):
            steps_to_result_plot(curves, "degenerate", fits={"a": FakeFit()}, normalize_at=4)
        budget_plot(None, "empty", "validation error")
        train_vs_val_plot(None, None, "nothing")


def test_the_report_embeds_every_figure_legible_self_contained_and_as_written(tmp_path):
    """report.html: every figure an <img> whose data: URI holds the very SVG written beside
    it (users open those files directly), each legible in the report's column and
    fetching nothing; the page itself names no URL and links no file."""
    import base64
    import re

    from batchscale.analysis.report import report_study
    from tests import paper_database as db

    url = db.write_paper_database(str(tmp_path / "db"))
    _, written = report_study(url, goals=["classification_error<0.2"], resamples=0,
                              out=str(tmp_path / "report"))
    page = open(written["html"]).read()
    files = {p.name: p.read_bytes() for p in (tmp_path / "report").glob("*.svg")}
    embedded = re.findall(r'<img alt="([^"]+)" src="data:image/svg\+xml;base64,([^"]+)"', page)
    assert len(files) >= 6 and page.count("<img") == len(embedded) == len(files)
    for name, data in embedded:
        svg = base64.b64decode(data)
        assert files[name] == svg
        legible(svg)
    assert not re.search(r'(src|href)="(?!data:|#)', page)  # no file, no URL to load
    assert "http://" not in page and "https://" not in page
    assert not list((tmp_path / "report").glob("*.png"))


def test_the_report_column_is_the_width_the_figures_are_sized_for():
    """plot_base.PAGE_WIDTH_PX is report.html's column (body max-width less its padding);
    if the page's style changes, the figures' sizes must follow."""
    import re

    body = re.search(r"body\{([^}]*)\}", html.STYLE)[1]
    width = float(re.search(r"max-width:(\d+)px", body)[1])
    padding = re.search(r"padding:0 ([0-9.]+)em", body)
    assert width - 2 * 16 * float(padding[1]) == plot_base.PAGE_WIDTH_PX
    assert plot_base.MAX_WIDTH_IN * 96 <= plot_base.PAGE_WIDTH_PX
    assert 2 * (plot_base.WIDTH_IN * 96 + 16) <= plot_base.PAGE_WIDTH_PX  # two side by side
