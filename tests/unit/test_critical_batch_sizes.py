"""Every definition of the critical batch size, side by side (no training): the fit's B*
and 20%-overhead batch size, plan.json's probes in both forms (``critical_batch_sizes``
entries, and an older plan's ``noise_scale``), no plan, no fit, a one-sided B*; the
section in HTML, Markdown and the console with each definition's line; the Kubeflow
metrics' names; summary.json's record read back (also an older summary.json's)."""

from __future__ import annotations

import html
import math

import pytest

from batchscale.analysis.figures.plots_cbs import CBS_FIGURE, cbs_figures
from batchscale.analysis.pages.critical_batch_size_page import cbs_section, prediction_lines
from batchscale.analysis.pages.report_summary import cbs_metrics
from batchscale.analysis.pages.sections import render_console, render_html, render_markdown
from batchscale.analysis.statistics.critical_batch_sizes import critical_batch_sizes, from_summary
from batchscale.analysis.statistics.intervals import ABOVE, MEASURED, UNDETERMINED
from batchscale.analysis.statistics.regimes import Estimate, RegimeFit
from batchscale.core.critical_batch_size import DEFINITIONS, OVERHEAD, CbsEstimate
from tests.unit.test_plots import sane

GOAL = "classification_error<0.08"
SIZES = (8, 16, 32, 64, 128, 256, 512, 1024)
SWEEP = 1_000_000  # examples the sweep trained


def fit(value=400.0, low=200.0, high=800.0, status=MEASURED, fitted=True) -> RegimeFit:
    """A regime fit as ``fit_regimes`` returns it, with B* as given (S_min 20)."""
    if not fitted:
        return RegimeFit(False, "only 2 batch size(s) have a measured steps to result", None,
                         None, None, None, (8, 16), (900.0, 450.0), 0, 0.95, ())
    c = math.log(value)
    steps = tuple(20.0 * (1 + value / b) for b in SIZES)
    b_star = Estimate(value, low, high, status)
    return RegimeFit(True, "", Estimate(20.0, 15.0, 25.0, MEASURED), b_star,
                     Estimate(value / 4, low / 4, high / 4, status),
                     Estimate(10 * value, 10 * low, 10 * high, status), SIZES, steps, 200, 0.95,
                     (), point=(math.log(20.0), c))


def new_plan(b_simple=(500.0, 380.0, 680.0), branched=(150.0, 64.0, 256.0)) -> dict:
    """plan.json as ``batchscale plan`` now writes it: each probe's ``CbsEstimate``."""
    return {"critical_batch_sizes": {
        "b_simple": CbsEstimate("b_simple", *b_simple, 0.9, 50_000, "at step 300").to_dict(),
        "b_branched": CbsEstimate("b_branched", *branched, 0.9, 80_000,
                                  "lr rule: sqrt; tolerance 1%").to_dict()}}


OLD_PLAN = {"noise_scale": {"value": 100.0, "low": 60.0, "high": 150.0, "level": 0.9,
                            "b_small": 8, "b_big": 512, "measurements": 10},
            "probe": {"batch_size": 8, "runs": [{"steps": 1000}, {"steps": 1000}, {"steps": 6}]}}


def test_fit_and_a_new_plan_give_all_four_with_ratios_and_compute():
    cbs = critical_batch_sizes(fit(), new_plan(), GOAL, SWEEP)
    assert [e.name for e in cbs.estimates] == list(DEFINITIONS) and cbs.missing == {}
    b_star, over = cbs.get("b_star_fit"), cbs.get("b_overhead_20")
    assert (b_star.value, b_star.low, b_star.high, b_star.level) == (400.0, 200.0, 800.0, 0.95)
    assert (over.value, over.low, over.high) == pytest.approx((80.0, 40.0, 160.0))
    assert OVERHEAD == 0.2
    simple, branched = cbs.prediction("b_simple"), cbs.prediction("b_branched")
    assert simple.ratio == pytest.approx(500 / 400) and simple.inside is True  # 380 <= 400 <= 680
    assert branched.ratio == pytest.approx(150 / 400) and branched.inside is False  # 64 .. 256
    assert cbs.spent(b_star) == (SWEEP, 1.0) and cbs.spent(cbs.get("b_simple")) == (50_000, 0.05)
    doc = cbs.to_dict()
    assert doc["goal"] == GOAL and doc["sweep_examples"] == SWEEP
    assert doc["b_branched"]["predicted_over_fitted"] == pytest.approx(0.375)
    assert doc["b_simple"]["share_of_sweep"] == pytest.approx(0.05)
    assert "predicted_over_fitted" not in doc["b_star_fit"]


def test_b_star_outside_a_probe_interval():
    cbs = critical_batch_sizes(fit(value=300.0, low=200.0, high=500.0), new_plan(), GOAL, SWEEP)
    assert cbs.prediction("b_simple").inside is False  # 300 < 380
    assert "B* outside B_simple's interval" in prediction_lines(cbs)[0]


def test_an_older_plan_gives_b_simple_and_its_probe_cost():
    cbs = critical_batch_sizes(fit(), OLD_PLAN, GOAL, SWEEP)
    est = cbs.get("b_simple")
    assert (est.value, est.low, est.high, est.level) == (100.0, 60.0, 150.0, 0.9)
    assert est.examples == 2006 * 8 + 10 * 512  # the runs trained, the gradients measured
    assert cbs.prediction("b_simple").ratio == pytest.approx(0.25)
    assert cbs.prediction("b_simple").inside is False
    assert "older `batchscale plan`" in cbs.missing["b_branched"]
    odd = {**OLD_PLAN, "probe": {"batch_size": "eight", "runs": [{"steps": 1000}]}}
    assert critical_batch_sizes(fit(), odd, GOAL, SWEEP).get("b_simple").examples is None


def test_no_plan_says_how_to_measure_the_probes():
    cbs = critical_batch_sizes(fit(), None, GOAL, SWEEP)
    assert [e.name for e in cbs.estimates] == ["b_star_fit", "b_overhead_20"]
    assert set(cbs.missing) == {"b_simple", "b_branched"} and cbs.predictions == ()
    assert all("`batchscale plan SPEC`" in why for why in cbs.missing.values())
    console = "\n".join(render_console(cbs_section(cbs)))
    assert "B_simple = not measured" in console and "note: B_branch: not measured" in console


def test_no_fit_leaves_the_probes_without_a_ratio():
    cbs = critical_batch_sizes(fit(fitted=False), new_plan(), GOAL, SWEEP)
    assert [e.name for e in cbs.estimates] == ["b_simple", "b_branched"]
    assert cbs.missing["b_star_fit"].startswith("no regime fit (only 2 batch size(s)")
    assert all(p.ratio is None and p.inside is None for p in cbs.predictions)
    assert prediction_lines(cbs)[0].endswith("no fitted B* to compare it with")
    assert cbs_figures(fit(fitted=False), cbs, "t") == {}


@pytest.mark.parametrize("status, text", [(ABOVE, "≥ 200"), (UNDETERMINED, "—")])
def test_a_b_star_the_data_do_not_bound_on_both_sides(status, text):
    cbs = critical_batch_sizes(fit(status=status), new_plan(), GOAL, SWEEP)
    b_star = cbs.get("b_star_fit")
    md = "\n".join(render_markdown(cbs_section(cbs)))
    assert f"| B* | {text}" in md and b_star.note  # the note says why (regime_text)
    console = render_console(cbs_section(cbs))
    assert f"  B* {text} (95%)" in console[1] if status == ABOVE else "  B* = —;" in console[1]
    assert cbs.prediction("b_simple").ratio is None
    assert "no ratio: the fit bounds B* on one side only or not at all" in md
    metrics = cbs_metrics(cbs)
    assert "cbs_b_star_fit_high" not in metrics  # an open end is no metric
    assert ("cbs_b_star_fit_low" in metrics) == (status == ABOVE)


def test_the_section_shows_every_definition_in_each_medium():
    cbs = critical_batch_sizes(fit(), new_plan(), GOAL, SWEEP)
    section = cbs_section(cbs)
    page = "\n".join(render_html(section))
    md = "\n".join(render_markdown(section))
    console = "\n".join(render_console(section))
    assert "Critical batch size: four definitions" in page and "## Critical batch size" in md
    for d in DEFINITIONS.values():
        assert html.escape(d.definition) in page
        assert d.definition.replace("|", "\\|") in md  # a Markdown cell escapes '|'
        assert f"  {d.symbol} = " in console and d.definition in console
    for text in (page, md, console):
        assert "B_simple/B* = 1.25" in text and "B_branch/B* = 0.375" in text
        assert "400 [200, 800] (95%)" in text and "80 [40, 160] (95%)" in text
    assert "the probe's: 50,000 examples (5.0% of the sweep's)" in md
    assert md.count("| the sweep's: 1M examples |") == 2  # B* and B_20%: the sweep itself


def test_kfp_metrics_carry_each_definition_by_its_metric_name():
    metrics = cbs_metrics(critical_batch_sizes(fit(), new_plan(), GOAL, SWEEP))
    names = {d.metric + part for d in DEFINITIONS.values() for part in ("", "_low", "_high")}
    assert set(metrics) == names
    assert metrics["cbs_b_star_fit"] == 400.0 and metrics["cbs_overhead_20pct_high"] == 160.0
    assert metrics["cbs_noise_scale_low"] == 380.0 and metrics["cbs_branched"] == 150.0


def test_summary_json_reads_back_to_the_same_console_lines():
    cbs = critical_batch_sizes(fit(), new_plan(), GOAL, SWEEP)
    back = from_summary({"critical_batch_sizes": cbs.to_dict()})
    assert render_console(cbs_section(back)) == render_console(cbs_section(cbs))
    # a summary.json written before critical_batch_sizes: B* and B_20% from its regimes,
    # B_simple from predicted_noise_scale (B*/B_simple there, at the plan's 90%)
    old = {"goals": [GOAL], "training_cost": {"trained_examples": SWEEP},
           "regimes": {GOAL: fit().to_dict()},
           "predicted_noise_scale": {"value": 100.0, "low": 60.0, "high": 150.0, "b_small": 8,
                                     "b_big": 512, "ratio": 4.0, "inside": False}}
    lines = "\n".join(render_console(cbs_section(from_summary(old))))
    assert "B_simple/B* = 0.25" in lines and "B* outside B_simple's interval" in lines
    assert "B_20% = 80 [40, 160] (95%)" in lines and "B_simple = 100 [60, 150] (90%)" in lines
    assert "note: B_branch: not in this summary.json" in lines
    del old["predicted_noise_scale"]
    assert [e.name for e in from_summary(old).estimates] == ["b_star_fit", "b_overhead_20"]
    assert from_summary({}) is None and from_summary(None) is None


def test_the_figure_marks_each_definition():
    cbs = critical_batch_sizes(fit(), new_plan(), GOAL, SWEEP)
    image, caption = cbs_figures(fit(), cbs, "quickstart")[CBS_FIGURE]
    assert GOAL in caption
    for d in DEFINITIONS.values():
        assert d.symbol.encode() in image
    sane(image)  # one panel's size, every text above the floor and inside the figure
    one_sided = critical_batch_sizes(fit(status=ABOVE), None, GOAL, SWEEP)
    sane(cbs_figures(fit(status=ABOVE), one_sided, "q")[CBS_FIGURE][0])


def test_a_new_plan_without_b_branch_says_why_not_that_the_plan_is_old():
    """A plan.json of today's ``plan`` whose branched probe was skipped (its reason under
    ``branched.skipped``) or measured nothing (B_branch without a value) is not an older
    plan: the report must say why B_branch is missing, not ask for the plan again."""
    skipped = new_plan()
    del skipped["critical_batch_sizes"]["b_branched"]
    skipped["branched"] = {"skipped": "every noise probe run diverged"}
    why = critical_batch_sizes(fit(), skipped, GOAL, SWEEP).missing["b_branched"]
    assert "older" not in why and "every noise probe run diverged" in why
    empty = new_plan(branched=(math.nan, 0.0, math.inf))
    why = critical_batch_sizes(fit(), empty, GOAL, SWEEP).missing["b_branched"]
    assert "older" not in why and "no value" in why
