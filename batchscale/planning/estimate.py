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
- Device-hours = (steps x step time + evaluations x the probe's time per evaluation) x
  devices / 3600, summed over batch sizes; cost = device-hours x price per device-hour.
- Wall time = (those seconds + pack tasks x start-up) / parallelism: a pack task per
  batch size and ``pack_size`` trials (``PACK_GUESS`` when the spec leaves it to the
  preset), each paying about the start-up the plan itself measured (imports, data,
  first compilation), as if the parallel packs did not slow each other down (on a
  machine whose cores they share, they do).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from batchscale.core import protocols
from batchscale.core.errors import CommandFailed
from batchscale.core.spec import StudySpec

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

    def to_dict(self) -> dict:
        out = asdict(self)
        out["per_batch"] = [asdict(b) for b in self.per_batch]
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


def step_time_at(batch_size: int, measured: dict[int, float]) -> tuple[float, str]:
    """Seconds per step at ``batch_size`` from measured step times: as measured, else
    interpolated log-log between the measured neighbours, else extrapolated at the time per
    example of the nearest measured batch size."""
    if not measured:
        raise CommandFailed("no step time was measured within physical bounds: nothing to estimate "
                            "wall time or cost from; run `batchscale plan` again")
    if batch_size in measured:
        return measured[batch_size], "measured"
    sizes = sorted(measured)
    below = [b for b in sizes if b < batch_size]
    above = [b for b in sizes if b > batch_size]
    if below and above:
        b0, b1 = below[-1], above[0]
        t = math.log(batch_size / b0) / math.log(b1 / b0)
        return math.exp((1 - t) * math.log(measured[b0]) + t * math.log(measured[b1])), "interpolated"
    nearest = below[-1] if below else above[0]
    per_example = measured[nearest] / nearest
    return (per_example * batch_size if below else measured[nearest]), "extrapolated"


def estimate_study(spec: StudySpec, noise, probe_batch_size: int, crossings: list[int | None],
                   step_times: dict[int, float], devices: int = 1, price: float = 0.0,
                   price_source: str = "", evaluation_seconds: float = 0.0,
                   startup_seconds: float = 0.0) -> StudyEstimate:
    """The study's estimate (see the module docstring); ``noise`` has ``value``;
    ``evaluation_seconds``: one evaluation of one trial (the probe's); ``startup_seconds``:
    what one pack task pays before it trains."""
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

    per_batch, n = [], spec.trials_per_batch_size
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
        steps = per_trial * n
        evaluations = sum(1 for e in evaluation_steps(budget, spec.evaluation.resolution)
                          if e <= per_trial) * n
        busy = steps * seconds + evaluations * evaluation_seconds
        per_batch.append(BatchEstimate(b, budget, s, s is not None and s > budget, n, steps,
                                       seconds, how, busy * devices / 3600))
    over = [b.batch_size for b in per_batch if b.over_budget]
    if over:
        notes.append(f"the predicted steps to result exceed the budget at batch size(s) "
                     f"{', '.join(map(str, over))}: raise max_steps there or expect no result")
    trained = sum(b.trained_steps for b in per_batch)
    full = float(sum(spec.max_steps[b] * n for b in spec.batch_sizes))
    device_hours = sum(b.device_hours for b in per_batch)
    packs = len(spec.batch_sizes) * math.ceil(n / (spec.pack_size or min(n, PACK_GUESS)))
    wall = (device_hours * 3600 / max(1, devices) + packs * startup_seconds) / max(1, spec.parallelism)
    return StudyEstimate(spec.protocol.name, s_min, b_n, tuple(per_batch), n * len(spec.batch_sizes),
                         spec.trial_cap, trained, full, device_hours, wall,
                         device_hours * price, price, price_source, tuple(notes))
