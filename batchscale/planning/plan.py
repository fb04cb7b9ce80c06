"""``batchscale plan``: before any sweep, what the study will find and what it will cost.

``plan_study`` prepares the data set, runs the noise probe at the spec's smallest batch
size (``probe.noise_probe``), estimates the gradient noise scale B_simple
(``noise_scale``), proposes a grid of batch sizes spanning the knee it predicts
(``grid``), times a few hundred steps at every batch size of the spec on this machine
(``training.step_timing``), prices them (``core.prices``) and estimates the study's
trials, trained steps, device-hours, wall time and cost under its protocol
(``estimate``). Last, the branched probe (``branched_probe``) measures the local critical
batch size of Merrill et al. 2025 from the noise probe's best run's metaparameters, its
branches within ``predictions.BRANCH_SHARE`` of the estimated study's trained examples, so the plan
gives two predictions, each by its named definition (``core.critical_batch_size``), with
the compute each spent. It writes
``<study>/plan/plan.json`` and the step times to ``<study>/profile/step_times/`` (where
the study's report finds both: the predicted B_simple beside the fitted B*, the probe's
step times where the trials' own are shared), and touches nothing else of the study.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from batchscale.core.critical_batch_size import DEFINITIONS, CbsEstimate
from batchscale.core.names import momentum_parameter
from batchscale.core.prices import device_price
from batchscale.core.spec import StudySpec
from batchscale.planning.branched_estimate import (
    DEFAULT_RULE,
    TOLERANCE,
    BranchedProbe,
    check_rule,
    check_tolerance,
)
from batchscale.planning.calibration import read_calibration
from batchscale.planning.estimate import StudyEstimate, estimate_study
from batchscale.planning.grid import propose_grid
from batchscale.planning.noise_scale import NoiseScale, estimate_noise_scale
from batchscale.planning.pack_costs import PackCosts, measure_pack_costs
from batchscale.planning.predictions import (
    branch_cap,
    branched_prediction,
    chosen_prediction,
    prediction_estimates,
    probe_data,
)
from batchscale.planning.probe import NoiseProbe, check_backend, noise_probe
from batchscale.training.step_timing import now_iso

PLAN_FORMAT = 1
BUDGET_FACTOR = 3.0  # proposed budget / predicted S(B): room for trials slower than the best


@dataclass
class Plan:
    spec: StudySpec
    hardware: dict
    probe: NoiseProbe
    noise: NoiseScale
    grid: list[int]
    step_times: list[dict]
    estimate: StudyEstimate
    costs: PackCosts
    price: float
    price_source: str
    seconds: float
    branched: BranchedProbe | None = None
    branched_skipped: str = ""  # why there is no branched probe (when there is none)
    chosen: str = "b_simple"  # the prediction the grid and the estimate go by ...
    chosen_line: str = ""  # ... and why (``predictions.chosen_prediction``)

    def critical_batch_sizes(self) -> dict[str, CbsEstimate]:
        """The plan's predictions of the critical batch size, by definition name."""
        return prediction_estimates(self.probe, self.noise, self.branched)

    def to_dict(self) -> dict:
        return {
            "format": PLAN_FORMAT, "created": now_iso(), "study": self.spec.name,
            "workload": {"dataset": self.spec.workload.dataset, "model": self.spec.workload.model,
                         "optimizer": self.spec.workload.optimizer},
            "hardware": self.hardware, "noise_scale": self.noise.to_dict(),
            "probe": {"batch_size": self.probe.batch_size, "big_batch_size": self.probe.big_batch_size,
                      "steps": self.probe.steps, "seconds": round(self.probe.seconds, 2),
                      "goal": self.spec.goals[0].label,
                      "runs": [r.to_dict() for r in self.probe.runs]},
            "grid": self.grid, "step_times": self.step_times, "pack_costs": self.costs.to_dict(),
            "price_per_device_hour": self.price, "price_source": self.price_source,
            "estimate": self.estimate.to_dict(), "seconds": round(self.seconds, 1),
            "critical_batch_sizes": {k: e.to_dict() for k, e in self.critical_batch_sizes().items()},
            "branched": (self.branched.to_dict() if self.branched is not None
                         else {"skipped": self.branched_skipped}),
            "chosen_prediction": self.chosen, "chosen_line": self.chosen_line,
            "proposed_budgets": {str(b): n for b, n in self.proposed_budgets().items()},
        }

    def proposed_budgets(self) -> dict[int, int]:
        """A step budget per proposed batch size (``BUDGET_FACTOR`` x the predicted S(B),
        on the chosen prediction's curve, rounded up to 2 significant digits); {} where no
        probe run reached the goal (no S_min)."""
        s_min, knee = self.estimate.s_min, self.critical_batch_sizes()[self.chosen].value
        if not s_min or not math.isfinite(knee):
            return {}
        return {b: _round_up(BUDGET_FACTOR * s_min * (1 + knee / b)) for b in self.grid}

    def lines(self) -> list[str]:
        """What ``batchscale plan`` prints."""
        n, spec = self.noise, self.spec
        hw = self.hardware
        out = [f"plan for study {spec.name}: {spec.workload.label}"
               f" on {hw['device_kind']} ({hw['cpu_cores']:g} cores, "
               f"preset {hw['preset']})",
               f"gradient noise scale B_simple = {n.value:.3g} [{n.low:.3g}, {n.high:.3g}] "
               f"({n.level:.0%} interval), from gradients over {n.b_small} and {n.b_big} "
               f"examples, {n.measurements} measurements over {self.probe.steps:,} steps",
               "  how it evolved over the probe (B_simple grows as training goes on):"
               + "".join(f" step {s:,}: {b:.3g};" for s, b in _sampled(n.trajectory)),
               f"probe runs at batch size {self.probe.batch_size} (constant learning rate, "
               f"goal {spec.goals[0].label}):"]
        second = (momentum_parameter(spec.workload.optimizer) or ("momentum",))[0]  # or beta_1
        for run in self.probe.runs:
            p = run.parameters
            what = ("diverged" if run.diverged else f"goal at step {run.crossing:,}"
                    if run.crossing is not None else f"no goal in {run.to_dict()['steps']:,} steps")
            out.append(f"  learning_rate {p['learning_rate']:.3g}"
                       + (f", {second} {p[second]:.3g}" if second in p else "") + f": {what}")
        out.extend(self.critical_batch_size_lines())
        symbol = DEFINITIONS[self.chosen].symbol
        if self.chosen_line:
            out.append(self.chosen_line)
        out.append(f"proposed batch sizes (powers of 2 around {symbol}'s interval): "
                   + " ".join(map(str, self.grid)))
        budgets = self.proposed_budgets()
        if budgets:
            out.append(f"proposed step budgets ({BUDGET_FACTOR:g}x the predicted steps to result "
                       f"S(B) = S_min (1 + {symbol}/B), S_min {self.estimate.s_min:.3g} from the "
                       "probe's untuned runs): "
                       + ", ".join(f"{b}: {n:,}" for b, n in budgets.items()))
        out.append(f"the spec's batch sizes: {' '.join(map(str, spec.batch_sizes))}")
        out.extend(self.estimate.lines())
        c = self.costs
        out.append(f"  wall time: {spec.parallelism} pack task(s) at once, longest first; a pack task "
                   f"starts in {c.startup_seconds:.2g} s, then per trial {c.trial_seconds:.2g} s "
                   f"+ steps x step time + evaluations x {1000 * c.evaluation_seconds:.3g} ms; "
                   f"a light task {c.light_task_seconds:.2g} s (measured here, as a pack pays them)")
        out.append(f"price: {self.price:.4g} USD per device-hour ({self.price_source})")
        out.append(f"plan written to {spec.store.rstrip('/')}/{spec.name}/plan/plan.json "
                   f"({self.seconds:.0f}s)")
        return out

    def critical_batch_size_lines(self) -> list[str]:
        """Both predictions side by side, each with its definition and its compute (as a
        share of the estimated study's trained examples), and the branched trajectory."""
        trained = self.estimate.trained_examples
        out = ["critical batch size before the sweep, by two definitions (examples: what each "
               f"probe trained on; share: of the estimated study's {trained:,.0f} trained examples):"]
        for name, e in self.critical_batch_sizes().items():
            d = DEFINITIONS[name]
            share = f"{e.examples / trained:.2%}" if trained else "?"
            out.append(f"  {d.symbol:<9} = {_number(e.value)} [{_number(e.low)}, "
                       f"{_number(e.high)}] ({e.level:.0%} interval), {e.examples:,} examples "
                       f"({share}); {e.note}")
            out.append(f"  {'':<9}   {d.label}: {d.definition}")
        if self.branched is None:
            out.append(f"  B_branch not measured: {self.branched_skipped}")
            return out
        b = self.branched
        out.append(f"  branched trajectory (base batch size {b.batch_size}, {b.steps:,} base steps, "
                   f"branches of D = {b.length} steps at b; k* per replicate; {b.seconds:.0f}s"
                   + (f"; at most {b.max_examples:,} examples" if b.max_examples else "") + "):")
        for p in b.points:
            value, low, high = p.interval(b.batch_size)
            untried = [k for k in p.planned if k not in p.accepted]
            tried = " ".join(f"k={k}:{sum(a)}/{len(a)}" for k, a in p.accepted.items())
            out.append(f"    step {p.step:,}: {_number(value)} [{_number(low)}, {_number(high)}]"
                       f"  k* {' '.join(map(str, p.stars())) or '-'}  reference loss "
                       f"{p.reference:.4g} (spread {p.spread:.1%})"
                       f"  kept up: {tried or 'none tried'}"
                       + (f" (not tried: k={','.join(map(str, untried))})" if untried else ""))
        return out

    def metrics(self) -> dict[str, float]:
        """Kubeflow UI Metrics; each critical batch size under its definition's metric
        name (``_low``, ``_high``: its interval's finite ends)."""
        e = self.estimate
        out = {"b_simple": self.noise.value, "b_simple_low": self.noise.low,
               "b_simple_high": self.noise.high, "estimated_trials": float(e.trials),
               "estimated_trained_steps": e.trained_steps,
               "estimated_device_hours": e.device_hours,
               "estimated_wall_seconds": e.wall_seconds, "estimated_cost": e.cost}
        for name, cbs in self.critical_batch_sizes().items():
            metric = DEFINITIONS[name].metric
            for suffix, value in (("", cbs.value), ("_low", cbs.low), ("_high", cbs.high)):
                if math.isfinite(value):
                    out[metric + suffix] = float(value)
            if cbs.examples is not None:
                out[f"{metric}_examples"] = float(cbs.examples)
        return out


def _round_up(x: float) -> int:
    """Up to 2 significant digits: 1234 -> 1300, 87.2 -> 88."""
    scale = 10 ** max(0, math.floor(math.log10(max(x, 1.0))) - 1)
    return int(math.ceil(x / scale) * scale)


def _number(x: float) -> str:
    return f"{x:.4g}" if math.isfinite(x) else ("inf" if x > 0 else "?")


def _sampled(trajectory, count: int = 6):
    points = [(int(s), float(b)) for s, b in trajectory if b is not None and b == b]
    if len(points) <= count:
        return points
    step = (len(points) - 1) / (count - 1)
    return [points[round(i * step)] for i in range(count)]


def plan_study(spec: StudySpec, store, log=print, probe_seconds: float = 60.0,
               branch_rule: str = DEFAULT_RULE, branch_tolerance: float = TOLERANCE,
               branch_seconds: float = 60.0) -> Plan:
    """Probe, estimate, write plan.json and the step times; see the module docstring.
    ``branch_*``: the branched probe's learning-rate rule, tolerance and time cap."""
    from batchscale.search.pack_order import step_time_at
    from batchscale.store.profiles import write_plan, write_step_times
    from batchscale.training.keras_setup import hardware
    from batchscale.training.step_timing import time_steps

    started = time.time()
    check_backend(spec)  # refused before anything is written
    check_rule(branch_rule, "branch rule")
    check_tolerance(branch_tolerance, "branch tolerance")
    pipeline = probe_data(spec, store, log)
    small = min(spec.batch_sizes)
    probe = noise_probe(spec, pipeline, small, spec.max_steps[small], probe_seconds, log)
    noise = estimate_noise_scale(probe.measurements)
    step_times = time_steps(spec, pipeline, spec.batch_sizes, log)
    write_step_times(store.fs, spec.name, step_times)
    times = {r["batch_size"]: r["seconds_per_step"] for r in step_times}
    costs = measure_pack_costs(spec, store, pipeline, step_time_at(small, times)[0], log)
    hw = hardware(1)
    price, source = device_price(hw["preset"], hw["cpu_cores"], spec.price_per_device_hour)

    def estimate_with(knee) -> StudyEstimate:
        return estimate_study(
            spec, knee, probe.batch_size, [r.crossing for r in probe.runs], times, devices=1,
            price=price, price_source=source, evaluation_seconds=probe.evaluation_seconds,
            costs=costs, diverged_share=sum(r.diverged for r in probe.runs) / max(1, len(probe.runs)))

    by_noise = estimate_with(noise)  # the branches' cap, and the estimate when B_simple is chosen
    branched, skipped = branched_prediction(
        spec, pipeline, probe, branch_rule, branch_tolerance, branch_seconds,
        branch_cap(by_noise.trained_examples), log)
    calibration, why_none = read_calibration(store.fs)
    chosen, chosen_line = chosen_prediction(prediction_estimates(probe, noise, branched),
                                            calibration, why_none)
    grid = propose_grid(chosen, largest=pipeline.num_train_examples)
    estimate = by_noise if chosen.name == "b_simple" else estimate_with(chosen)
    plan = Plan(spec, hw, probe, noise, grid, step_times, estimate, costs, price, source,
                time.time() - started, branched, skipped, chosen.name, chosen_line)
    write_plan(store.fs, spec.name, plan.to_dict())
    return plan
