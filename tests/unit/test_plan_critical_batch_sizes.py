"""The plan's two predictions of the critical batch size (no training): each under its
definition's name in plan.json and the Kubeflow metrics, printed side by side with its
definition and the compute it spent, and which noise probe run the branched probe starts
from."""

from __future__ import annotations

import json
import math

from batchscale.core.critical_batch_size import DEFINITIONS
from batchscale.planning.branched_estimate import BranchedProbe, BranchPoint
from batchscale.planning.estimate import estimate_study
from batchscale.planning.noise_scale import NoiseScale
from batchscale.planning.pack_costs import PackCosts
from batchscale.planning.plan import Plan
from batchscale.planning.probe import NoiseProbe, ProbeRun
from batchscale.validation import parse_spec
from tests.conftest import tiny_spec_dict

LOSS = "train/cross_entropy_error"


def _run(lr, crossing=None, loss=1.0, diverged=False):
    return ProbeRun({"learning_rate": lr}, crossing, diverged, [{"step": 40, LOSS: loss}])


def _plan(branched, skipped=""):
    spec = parse_spec(tiny_spec_dict("/tmp/unused", batch_sizes=[16, 64], max_steps=400))
    noise = NoiseScale(50.0, 40.0, 70.0, 0.9, 16, 1024, 21, ())
    probe = NoiseProbe(16, 1024, [_run(0.05, 30), _run(0.1, 20)], [{}] * 21, 40, 3.0,
                       loss_column=LOSS)
    estimate = estimate_study(spec, noise, 16, [30, 20], {16: 0.001, 64: 0.002})
    return Plan(spec, {"device_kind": "cpu", "cpu_cores": 2, "preset": "local"}, probe, noise,
                [16, 32, 64], [], estimate, PackCosts(), 0.06, "list price", 1.0, branched, skipped)


def _branched():
    point = BranchPoint(12, 0.5, [0.5, 0.52, 0.48], {2: [0.4] * 3, 4: [0.6] * 3},
                        {2: [True] * 3, 4: [False] * 3}, planned=(2, 4, 8))
    return BranchedProbe(16, "sqrt", 0.01, 3, 16, 4, [point], 2.0, 2_000, {"learning_rate": 0.1})


def test_both_predictions_are_named_printed_and_published():
    plan = _plan(_branched())
    assert plan.probe.examples == 2 * 40 * 16 + 21 * 1024  # runs' steps and gradient measurements
    trained = plan.estimate.trained_examples
    assert trained == sum(b.trained_steps * b.batch_size for b in plan.estimate.per_batch) > 0
    raw = json.loads(json.dumps(plan.to_dict()))
    cbs = raw["critical_batch_sizes"]
    assert cbs["b_simple"]["value"] == 50.0 and cbs["b_simple"]["examples"] == plan.probe.examples
    assert (cbs["b_branched"]["value"], cbs["b_branched"]["low"], cbs["b_branched"]["high"]) == (32, 32, 64)
    assert raw["branched"]["points"][0]["k_star"] == [2, 2, 2]
    text = "\n".join(plan.lines())
    for name in ("b_simple", "b_branched"):
        assert DEFINITIONS[name].definition in text
    assert f"B_branch  = 32 [32, 64] (75% interval), 2,000 examples ({2000 / trained:.2%})" in text
    assert "step 12: 32 [32, 64]  k* 2 2 2" in text and "(not tried: k=8)" in text
    metrics = plan.metrics()
    assert metrics["cbs_branched"] == 32 and metrics["cbs_branched_high"] == 64
    assert metrics["cbs_noise_scale_low"] == 40 and metrics["cbs_branched_examples"] == 2000
    assert metrics["b_simple"] == 50  # the plan's earlier names stay


def test_an_open_interval_publishes_only_its_finite_ends_and_a_skipped_probe_says_why():
    open_above = _branched()
    open_above.points[0].accepted = {2: [True] * 3, 4: [True] * 3}
    metrics = _plan(open_above).metrics()
    assert metrics["cbs_branched"] == 64 and "cbs_branched_high" not in metrics
    assert all(math.isfinite(v) for v in metrics.values())
    skipped = _plan(None, "every noise probe run diverged")
    assert "b_branched" not in skipped.to_dict()["critical_batch_sizes"]
    assert skipped.to_dict()["branched"] == {"skipped": "every noise probe run diverged"}
    assert "  B_branch not measured: every noise probe run diverged" in skipped.lines()


def test_the_branched_probe_starts_from_the_first_run_to_the_goal_else_the_lowest_loss():
    probe = NoiseProbe(8, 512, [_run(0.01, 90), _run(0.1, 40), _run(1.0, diverged=True)], [], 90,
                       1.0, loss_column=LOSS)
    assert probe.best_run().parameters == {"learning_rate": 0.1}
    probe.runs = [_run(0.01, loss=0.8), _run(0.1, loss=0.5), _run(1.0, loss=0.1, diverged=True),
                  _run(2.0, loss=math.nan)]
    assert probe.best_run().parameters == {"learning_rate": 0.1}
    probe.runs = [_run(1.0, diverged=True)]
    assert probe.best_run() is None


def test_budgets_follow_the_chosen_prediction_on_the_proposed_grid():
    from batchscale.planning.plan import BUDGET_FACTOR

    plan = _plan(_branched())
    s_min = plan.estimate.s_min
    budgets = plan.proposed_budgets()
    assert list(budgets) == plan.grid
    for b, budget in budgets.items():  # rounded up to 2 significant digits, never down
        exact = BUDGET_FACTOR * s_min * (1 + 50.0 / b)
        assert exact <= budget < exact * 1.1
    plan.chosen = "b_branched"  # B_branch 32 < B_simple 50: smaller budgets at small batches
    assert plan.proposed_budgets()[16] < budgets[16]
    assert plan.to_dict()["chosen_prediction"] == "b_branched"
    assert "proposed step budgets (3x the predicted steps to result S(B) = S_min (1 + B_branch/B)" \
        in "\n".join(plan.lines())
