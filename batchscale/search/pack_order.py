"""The order a stage's pack tasks start in: the longest expected first.

A stage's packs run in a ParallelFor, ``parallelism`` at a time: the loop starts them in
list order, and each lane takes the next pack when its own ends (kfp.local: a thread
pool fed in list order; Argo the same). Started in batch-size order, the quickstart's
longest pack (batch size 4,000: the fewest steps, each the slowest) started last and ran
alone at the end while the other lane stood idle. Longest first (Graham's LPT rule) ends a
stage no later than 4/3 of the best schedule's time, and here about one short pack's time
after the lanes' average.

A pack's expected duration is its trials' budgets in steps times the seconds per step
at its batch size: as measured in the study's step-time profile
(``store.profiles``), interpolated log-log between measured batch sizes, or beyond them
at the nearest one's time per example (``step_time_at``, the plan's rule too). Without a
profile, steps x batch size (examples, a proxy for work) orders them. Under a protocol
that stops early the budget is still the bound, and a bound orders as well as a guess.
Ties keep the order given (batch size, then trial id); the same inputs give the same order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from batchscale.core.errors import CommandFailed
from batchscale.core.spec import PackSpec


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


def expected_pack_seconds(pack: PackSpec, budgets: dict[int, int],
                          step_times: dict[int, float]) -> float:
    """What orders ``pack`` (see the module docstring): over its batch sizes (several in a
    mixed pack), trials x budget (``budgets``: by batch size) x the seconds per step at the
    batch size (``step_times``: measured ones, by batch size), or x the batch size when
    nothing was measured."""
    def per_step(batch_size: int) -> float:
        return step_time_at(batch_size, step_times)[0] if step_times else batch_size

    return sum(len(ids) * budgets[b] * per_step(b) for b, ids in pack.parts)


def longest_first(packs: Sequence[PackSpec], seconds: Callable[[PackSpec], float]) -> list[PackSpec]:
    """``packs`` by ``seconds(pack)``, longest first; ties in their given order."""
    return sorted(packs, key=lambda pack: -seconds(pack))  # sorted is stable
