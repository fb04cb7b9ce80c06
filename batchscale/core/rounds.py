"""Search rounds: which trial ids of a batch size were sampled from which search space.

A study runs in rounds (the paper's protocol, Section 3): round 1 samples the spec's
search space; a later round adds trials to one batch size, either more points of the
same space (a *top-up*, because some trials diverged) or points of a new space (a
*re-search*, because the best trial sat at the edge of what was searched, or none
reached the goal). A batch size added to a grown study may instead start with a round 1
that samples the box the metaparameter laws fit to the finished batch sizes
(``FittedFrom``, ``core.new_batch_sizes``). Trial ids continue across rounds, so every id
keeps its meaning when a study grows. Each batch size's study.json records its rounds
(``ROUNDS_KEY``), each with the range it searched in the paper's ``parameter_configs`` form; the planner
(``batchscale.rounds.planner``) appends to them and the trainer derives a trial's
metaparameters from the round that holds its id (``batchscale.search.trials``).
"""

from __future__ import annotations

from dataclasses import dataclass

from batchscale.core.edges import hull_configs
from batchscale.core.spec import Parameter, StudySpec

ROUNDS_KEY = "search_rounds"  # in each batch size's study.json
FITTED_KEY = "fitted_from"  # in a round 1 that searched a fitted box (``FittedFrom``)
INITIAL = "initial search"


@dataclass(frozen=True)
class PlannedWith:
    """What a round after the first was planned under: the study's trials per batch size,
    trial cap and the batch size's step budget then. A study may grow, so the spec of a
    later run can hold larger values; re-deriving the round (``batchscale.rounds.derivation``)
    needs the ones it was planned with."""

    trials_per_batch_size: int
    trial_cap: int
    max_steps: int

    def to_dict(self) -> dict:
        return {"trials_per_batch_size": self.trials_per_batch_size,
                "max_trials_per_batch_size": self.trial_cap, "max_steps": self.max_steps}

    @classmethod
    def from_dict(cls, raw) -> PlannedWith | None:
        """None for a round recorded without it (before it was recorded) or a damaged one."""
        try:
            values = [raw[k] for k in ("trials_per_batch_size", "max_trials_per_batch_size",
                                       "max_steps")]
        except (KeyError, TypeError):
            return None
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
            return None
        return cls(*values)


@dataclass(frozen=True)
class FittedSource:
    """One point of a fitted box's laws: a settled batch size's best trial and the trials
    nearly as good as it (``near_best``, whose spread says how flat its optimum is)."""

    batch_size: int
    trial_id: int
    near_best: tuple[int, ...] = ()

    def to_dict(self) -> dict:
        return {"batch_size": self.batch_size, "trial_id": self.trial_id,
                "near_best": list(self.near_best)}

    @classmethod
    def from_dict(cls, raw) -> FittedSource:
        return cls(_count(raw["batch_size"]), _count(raw["trial_id"]),
                   tuple(_count(i) for i in raw.get("near_best") or ()))


@dataclass(frozen=True)
class FittedFrom:
    """What a fitted round 1 (``core.new_batch_sizes``: a batch size added to a grown study,
    searching the box the metaparameter laws propose) was fitted from: ``sources``, one
    per settled batch size, whose trials' parameters the laws used, and ``trials``, how
    many trials the round was planned with (the non-divergent trials its batch size
    wants). ``batchscale.rounds.fitted_round`` recomputes the box from those parameters."""

    sources: tuple[FittedSource, ...]
    trials: int

    def to_dict(self) -> dict:
        return {"sources": [s.to_dict() for s in self.sources], "trials": self.trials}

    @classmethod
    def from_dict(cls, raw) -> FittedFrom:
        """ValueError (or KeyError, TypeError, AttributeError) for a record that is not one."""
        sources = tuple(FittedSource.from_dict(s) for s in raw["sources"])
        if not sources:
            raise ValueError("fitted_from has no sources")
        return cls(sources, _count(raw["trials"]))

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        return tuple(s.batch_size for s in self.sources)


@dataclass(frozen=True)
class SearchRound:
    """Trials ``first..last`` (inclusive) of one batch size, sampled from ``space``;
    ``planned_with``: what a later round was planned under (None for round 1);
    ``fitted_from``: what a round 1 searching a fitted box was fitted from (None: the
    spec's search space)."""

    round: int
    first: int
    last: int
    space: tuple[Parameter, ...]
    reason: str = INITIAL
    planned_with: PlannedWith | None = None
    fitted_from: FittedFrom | None = None

    @property
    def trial_ids(self) -> range:
        return range(self.first, self.last + 1)

    def to_dict(self) -> dict:
        """The study.json form: the space both as the paper's ``parameter_configs`` (what
        readers of the paper's database understand) and as the spec writes it."""
        out = {
            "round": self.round, "trial_ids": [self.first, self.last], "reason": self.reason,
            "parameter_configs": {p.name: p.paper_config() for p in self.space},
            "search_space": {p.name: _compact(p) for p in self.space},
        }
        if self.planned_with is not None:
            out["planned_with"] = self.planned_with.to_dict()
        if self.fitted_from is not None:
            out[FITTED_KEY] = self.fitted_from.to_dict()
        return out

    @classmethod
    def from_dict(cls, raw: dict) -> SearchRound:
        first, last = (int(i) for i in raw["trial_ids"])
        space = tuple(_parameter(name, fields) for name, fields in raw["search_space"].items())
        fitted = FittedFrom.from_dict(raw[FITTED_KEY]) if FITTED_KEY in raw else None
        return cls(int(raw["round"]), first, last, space, str(raw.get("reason", "")),
                   PlannedWith.from_dict(raw.get("planned_with")), fitted)


def initial_round(spec: StudySpec) -> SearchRound:
    """Round 1 of every batch size: trials 1..trials_per_batch_size in the spec's space."""
    return SearchRound(1, 1, spec.trials_per_batch_size, spec.search_space, INITIAL)


def read_rounds(study_json: dict | None, spec: StudySpec) -> list[SearchRound]:
    """A batch size's rounds from its study.json; a study.json without them (a study
    registered before rounds existed, or not yet) has round 1 only. While round 1 is the
    only round it grows with ``trials_per_batch_size``, as a study always has (not a
    fitted round 1: it keeps the count it was planned with). An entry
    that is not a round raises ValueError naming it (``search_rounds[1] is not ...``).
    What the rounds say is not checked here: ``batchscale.rounds.derivation`` compares them
    with what the spec and the trials' measurements give."""
    raw = (study_json or {}).get(ROUNDS_KEY)
    rounds = []
    for i, entry in enumerate(raw if isinstance(raw, list) else []):
        try:
            rounds.append(SearchRound.from_dict(entry))
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise ValueError(f"{ROUNDS_KEY}[{i}] is not a search round ({type(err).__name__}: "
                             f"{str(err)[:80]})") from None
    if not rounds:
        return [initial_round(spec)]
    only = rounds[0]
    if len(rounds) == 1 and only.fitted_from is None and only.last < spec.trials_per_batch_size:
        rounds = [SearchRound(only.round, only.first, spec.trials_per_batch_size, only.space,
                              only.reason)]
    return rounds


def wanted_trials(spec: StudySpec, rounds: list[SearchRound]) -> int:
    """The non-divergent trials a batch size wants ("equal budgets of non-divergent
    trials", the paper's Section 3): ``trials_per_batch_size``, or, for a batch size whose
    round 1 searched a fitted box, that round's count (``FittedFrom.trials``)."""
    fitted = rounds[0].fitted_from if rounds else None
    return fitted.trials if fitted is not None else spec.trials_per_batch_size


def searched_configs(rounds: list[SearchRound]) -> dict:
    """What the rounds searched, as one ``parameter_configs`` (per parameter, the hull of
    every round's range): study.json's top-level ``parameter_configs``."""
    return hull_configs([{p.name: p.paper_config() for p in r.space} for r in rounds])


def round_of(rounds: list[SearchRound], trial_id: int) -> SearchRound:
    for r in rounds:
        if r.first <= trial_id <= r.last:
            return r
    raise ValueError(f"trial id {trial_id} belongs to no search round "
                     f"({', '.join(f'{r.first}-{r.last}' for r in rounds)})")


def _compact(p: Parameter) -> dict:
    out = {"scale": p.scale}
    if p.values is not None:
        out["values"] = list(p.values)
    else:
        out["min"], out["max"] = p.min, p.max
    if p.integer:
        out["integer"] = True
    return out


def _parameter(name: str, fields: dict) -> Parameter:
    values = fields.get("values")
    return Parameter(name, fields["scale"], fields.get("min"), fields.get("max"),
                     tuple(values) if values is not None else None, bool(fields.get("integer")))


def _count(value) -> int:
    """A positive integer as a record holds it (ValueError otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{value!r} is not a positive integer")
    return value
