"""The figures: PNG bytes that decode, sane sizes, no failure on empty or degenerate input,
and the normalisation helper's numbers worked out by hand."""

import io
import math

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from batchscale.analysis.plots import (
    best_trial_curves_plot,
    budget_label,
    budget_plot,
    normalize_curves,
    steps_to_result_plot,
    train_vs_val_plot,
)

NAN = math.nan


def size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    image = Image.open(io.BytesIO(png))
    image.load()
    return image.size


def sane(png: bytes, wide: bool = False) -> tuple[int, int]:
    width, height = size(png)
    assert (1000 if wide else 500) <= width <= (1400 if wide else 900) and 350 <= height <= 700
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
