"""What a study will train and cost, estimated before it runs.

The model (each assumption stated in what ``batchscale plan`` prints):

- Steps to result S(B) = S_min (1 + B_n / B) (McCandlish et al. 2018), with B_n the
  probe's noise scale and S_min set so that S(b) is the earliest step at which a probe
  run at batch size b reached the goal. The probe's learning rates are not tuned, so this
  S_min is an upper estimate.
- The probe runs stand in for the search's trials: a probe run that reached the goal at
  step s costs a trial at batch size B about s x S(B) / S(b) steps; one that did not, or
  diverged, costs the budget. The protocol's ``estimate`` rule (``core.protocols``) turns
  the budget and these scaled crossings into one trial's steps: under ``full`` every trial
  runs to its budget (divergence ignored: an upper bound); under ``goal`` a trial costs
  min(budget, its scaled crossing), averaged over the probe runs; under ``race`` about
  min(budget, the earliest scaled crossing), since a trial stops once another has reached
  the goal before it could. Without any probe crossing S(B) is unknown and goal and race
  (every protocol that stops early) are estimated as full.
- Trials: round 1's, N per batch size; top-ups and re-searches may add up to the trial
  cap per batch size.
- Step times: measured per batch size where given; elsewhere interpolated log-log between
  measured neighbours, or beyond the largest measured one at its time per example.
- Device-hours = (steps x step time + evaluations x the time per evaluation) x
  devices / 3600, summed over batch sizes; cost = device-hours x price per device-hour.
- Wall time: the pipeline as ``run --local`` runs it. Each stage's ParallelFor is
  simulated: ``parallelism`` lanes, the packs in the order the planner starts them
  (``search.pack_order``: longest expected first, by the step times the plan writes), each
  lane taking the next pack as its own ends. A pack task per batch size and
  ``pack_size`` trials (``PACK_GUESS`` when the spec leaves it to the preset) takes its
  start-up (``pack_costs``: process and imports, data, compilation, measured as a pack
  pays them) + per trial its set-up, steps x step time and evaluations x the time per
  evaluation with its host work (measured on a real pack of one trial). Round 1's trials,
  plus later rounds' top-ups: the share of the probe runs that diverged, of the trials at
  the probe's batch size (the smallest, where the most diverge; elsewhere none). Light
  tasks (prepare-data, a plan-round per stage, aggregate) each take a light process's
  start-up; the report's own work is not counted. The step times and pack costs are
  measured in a local run's task environment (one XLA thread per task where the tasks
  share the cores), alone: packs sharing a machine are assumed not to slow each other.
- Without pack costs (``PackCosts()``: zero) the wall time is the lanes' simulation of
  steps and evaluations alone.
"""

from __future__ import annotations

import heapq
from dataclasses import asdict, dataclass, field

from batchscale.core import protocols
from batchscale.core.spec import StudySpec
from batchscale.planning.pack_costs import PackCosts
from batchscale.search.pack_order import (
    expected_pack_seconds,
    longest_first,
    step_time_at,  # the one rule, shared with the pack order
)
from batchscale.search.packs import split_trials

PACK_GUESS = 16  # trials per pack task when the spec leaves it to the preset (cpu's cap)


@dataclass(frozen=True)
class BatchEstimate:
    batch_size: int
    budget: int
    predicted_steps: float | None  # S(B); None: no probe run reached the goal
    over_budget: bool  # S(B) above the budget: the goal is out of reach there
    trials: int
    trained_steps: float
    seconds_per_step: float
    step_time: str  # "measured", "interpolated" or "extrapolated"
    device_hours: float


@dataclass(frozen=True)
class StudyEstimate:
    protocol: str
    s_min: float | None
    noise_scale: float
    per_batch: tuple[BatchEstimate, ...]
    trials: int
    trial_cap: int
    trained_steps: float
    full_steps: float
    device_hours: float
    wall_seconds: float
    cost: float
    price_per_device_hour: float
    price_source: str
    notes: tuple[str, ...] = field(default=())

    @property
    def trained_examples(self) -> float:
        """The study's estimated trained examples: trained steps x batch size, summed."""
        return float(sum(b.trained_steps * b.batch_size for b in self.per_batch))

    def to_dict(self) -> dict:
        out = asdict(self)
        out["per_batch"] = [asdict(b) for b in self.per_batch]
        out["trained_examples"] = self.trained_examples
        return out

    def lines(self) -> list[str]:
        """The estimate as ``batchscale plan`` prints it."""
        head = (f"estimate for the spec's study ({len(self.per_batch)} batch sizes x "
                f"{self.trials // max(1, len(self.per_batch))} trials, protocol {self.protocol}):")
        rows = [f"  {'batch':>6} {'S(B) predicted':>15} {'budget':>8} {'trained steps':>14} "
                f"{'ms/step':>9} {'device-h':>9}"]
        for b in self.per_batch:
            s = "?" if b.predicted_steps is None else f"{b.predicted_steps:,.0f}"
            flag = " over budget" if b.over_budget else ""
            rows.append(f"  {b.batch_size:>6} {s:>15} {b.budget:>8,} {b.trained_steps:>14,.0f} "
                        f"{1000 * b.seconds_per_step:>9.3g} {b.device_hours:>9.3g}"
                        f"{' (' + b.step_time + ')' if b.step_time != 'measured' else ''}{flag}")
        total = [f"  total: {self.trials:,} trials (round 1; later rounds may add up to "
                 f"{self.trial_cap:,} per batch size), {self.trained_steps:,.0f} trained steps "
                 f"({self.full_steps:,.0f} under protocol full), {self.device_hours:.3g} "
                 f"device-hours, wall time about {_duration(self.wall_seconds)}, cost about "
                 f"USD {self.cost:.3g}"]
        return [head, *rows, *total, *(f"  note: {n}" for n in self.notes)]


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.3g} min" if seconds < 7200 else f"{seconds / 3600:.3g} h"


def _stopping_early() -> str:
    """'goal and race are': the protocols whose trials may stop before their budget."""
    early = [p.name for p in protocols.all_protocols() if p.early_stopping]
    return " and ".join(early) + (" are" if len(early) > 1 else " is")


def estimate_study(spec: StudySpec, noise, probe_batch_size: int, crossings: list[int | None],
                   step_times: dict[int, float], devices: int = 1, price: float = 0.0,
                   price_source: str = "", evaluation_seconds: float = 0.0,
                   costs: PackCosts | None = None, diverged_share: float = 0.0) -> StudyEstimate:
    """The study's estimate (see the module docstring); ``noise`` has ``value``;
    ``evaluation_seconds``: one evaluation of one trial, where ``costs`` has none (the
    noise probe's); ``costs``: what a pack task pays besides steps; ``diverged_share``:
    the share of the probe runs that diverged (later rounds' top-ups)."""
    from batchscale.training.evaluation_grid import evaluation_steps

    b_n = float(noise.value)
    reached = [c for c in crossings if c is not None]
    notes = []
    s_min = None
    if reached:
        s_min = min(reached) / (1 + b_n / probe_batch_size)
    else:
        notes.append("no probe run reached the goal, so steps to result cannot be predicted: "
                     f"{_stopping_early()} estimated as full (an upper bound)")

    def predicted(b: int) -> float | None:
        return None if s_min is None else s_min * (1 + b_n / b)

    costs = costs or PackCosts()
    per_evaluation = costs.evaluation_seconds or evaluation_seconds
    per_batch, trial_seconds, n = [], {}, spec.trials_per_batch_size
    for b in spec.batch_sizes:
        budget = spec.max_steps[b]
        s = predicted(b)
        ratio = None if s is None else s / predicted(probe_batch_size)
        if s is None:
            per_trial = float(budget)
        else:
            per_trial = spec.protocol.estimate(budget, [None if c is None else c * ratio
                                                        for c in crossings])
        seconds, how = step_time_at(b, step_times)
        evaluations = sum(1 for e in evaluation_steps(budget, spec.evaluation.resolution)
                          if e <= per_trial)
        busy = per_trial * seconds + evaluations * per_evaluation  # one trial
        trial_seconds[b] = busy + costs.trial_seconds  # its wall time in a pack
        per_batch.append(BatchEstimate(b, budget, s, s is not None and s > budget, n, per_trial * n,
                                       seconds, how, busy * n * devices / 3600))
    over = [b.batch_size for b in per_batch if b.over_budget]
    if over:
        notes.append(f"the predicted steps to result exceed the budget at batch size(s) "
                     f"{', '.join(map(str, over))}: raise max_steps there or expect no result")
    trained = sum(b.trained_steps for b in per_batch)
    full = float(sum(spec.max_steps[b] * n for b in spec.batch_sizes))
    device_hours = sum(b.device_hours for b in per_batch)
    pack_size = spec.pack_size or min(n, PACK_GUESS)
    stages = [{b: n for b in spec.batch_sizes}]
    top_up = min(spec.trial_cap - n, round(n * diverged_share / max(1e-9, 1 - diverged_share)))
    if spec.max_rounds > 1 and top_up > 0:
        stages.append({probe_batch_size: top_up})
        notes.append(f"later rounds: about {top_up} top-up trial(s) at batch size "
                     f"{probe_batch_size} counted in the wall time (the probe runs' diverged share "
                     f"{diverged_share:.0%}); re-searches may add more")
    wall = (2 + spec.max_rounds) * costs.light_task_seconds  # prepare, plan-rounds, aggregate
    for counts in stages:
        wall += parallel_for_seconds(_stage_packs(spec, counts, pack_size, step_times),
                                     lambda p: costs.startup_seconds
                                     + len(p.trial_ids) * trial_seconds[p.batch_size],
                                     spec.parallelism)
    return StudyEstimate(spec.protocol.name, s_min, b_n, tuple(per_batch), n * len(spec.batch_sizes),
                         spec.trial_cap, trained, full, device_hours, wall,
                         device_hours * price, price, price_source, tuple(notes))


def _stage_packs(spec: StudySpec, counts: dict[int, int], pack_size: int,
                 step_times: dict[int, float]) -> list:
    """A stage's packs (``counts`` trials per batch size) in the order the planner starts
    them (``rounds.planner.longest_first``, here from the step times the plan writes)."""
    packs = [p for b, count in counts.items() for p in split_trials(b, list(range(1, count + 1)),
                                                                     pack_size)]
    return longest_first(packs, lambda p: expected_pack_seconds(p, spec.max_steps, step_times))


def parallel_for_seconds(packs: list, seconds, lanes: int) -> float:
    """How long a ParallelFor of ``packs`` (in this order) takes on ``lanes`` lanes, each
    taking the next pack when its own ends; ``seconds(pack)``: one pack's duration."""
    ends = [0.0] * max(1, lanes)
    for pack in packs:
        heapq.heapreplace(ends, ends[0] + seconds(pack))
    return max(ends)
