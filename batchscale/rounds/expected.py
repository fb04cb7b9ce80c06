"""How many trials the later search rounds of a running study will likely add: what the
run console's ETA counts beside the trials already planned.

The planner (``rounds.planner``) adds a round to a batch size only once every trial it
has recorded is finished, at most ``spec.max_rounds`` rounds in all and never past
``spec.trial_cap`` trials, and what the round holds is ``search.next_round``'s call on
those trials. So, per batch size:

- every recorded trial finished: the round the planner adds next is known exactly, by
  asking ``next_round`` what the planner will ask. None means the batch size is done (the
  planner asks again at each later stage, with the same trials, and gets None again);
  a round of n trials counts n, and the rounds that may follow it count as below;
- trials still training: nothing is known yet. Each of the rounds left (``max_rounds``
  minus its latest round) is counted as adding m trials with probability q, and only if
  the round before it did: m (q + q² + ... + q^left), capped at the room the trial cap
  leaves.

Both come from the planner's decisions in this study so far (the rounds recorded after
the first, and the exact calls above): q is the share of them that added trials, by
Laplace's rule of succession, (added + 1) / (decided + 2), so 1/2 before any decision;
m is the mean size of the rounds added, ``trials_per_batch_size`` (a re-search's size)
before any. Early in a study, before any batch size has finished its first round, that
prior is all there is: the quickstart's estimate starts at ~75 trials for the 15 its
top-ups added in benchmarks/README.md, and comes down as batch sizes finish. An
estimate, said as one ("~N").
"""

from __future__ import annotations

from batchscale.core.rounds import SearchRound
from batchscale.core.spec import StudySpec
from batchscale.search.next_round import TrialResult, next_round


def later_round_trials(spec: StudySpec, rounds: dict[int, list[SearchRound]],
                       finished: dict[int, list[TrialResult] | None]) -> float:
    """The expected number of trials later rounds add to the study, over its batch sizes.

    ``rounds``: each batch size's recorded rounds; ``finished``: each batch size's results
    of its recorded trials when every one is finished, else None (some still train)."""
    known: dict[int, int] = {}  # batch size -> trials its next round adds (0: none)
    for b, results in finished.items():
        if results is not None and rounds[b][-1].round < spec.max_rounds:
            added = next_round(spec, rounds[b], results, rounds[b][-1].round + 1)
            known[b] = 0 if added is None else len(added.trial_ids)
    sizes = [len(r.trial_ids) for recorded in rounds.values() for r in recorded[1:]]
    sizes += [n for n in known.values() if n]
    q = success_rate(len(sizes), len(sizes) + sum(n == 0 for n in known.values()))
    per_round = sum(sizes) / len(sizes) if sizes else spec.trials_per_batch_size
    total = 0.0
    for b, recorded in rounds.items():
        left = spec.max_rounds - recorded[-1].round
        room = spec.trial_cap - recorded[-1].last
        if b not in known:
            total += expected_added(left, per_round, room, q)
        elif known[b]:
            total += known[b] + expected_added(left - 1, per_round, room - known[b], q)
    return total


def success_rate(added: int, decided: int) -> float:
    """Laplace's rule of succession: the chance the next decision adds a round."""
    return (added + 1) / (decided + 2)


def expected_added(rounds_left: int, per_round: float, room: int, q: float) -> float:
    """Trials ``rounds_left`` more rounds add, each with chance ``q`` once the one before
    it did, ``per_round`` each, at most ``room`` in all."""
    if rounds_left <= 0 or room <= 0:
        return 0.0
    return min(per_round * sum(q ** k for k in range(1, rounds_left + 1)), float(room))
