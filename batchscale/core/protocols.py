"""Stopping protocols: when a trial stops before its budget, as one typed record each.

A study's ``protocol`` names one record of this table. Everything any layer needs to know
about a protocol is a field of its record: whether trials stop once they beat every goal,
whether they race (stop once they can no longer lower their batch size's steps to result)
and so train a pack's trials in lockstep, which protocols a study may switch to under the
same name, what a stop means for censoring, the report's words, and how ``batchscale
plan`` estimates the steps it trains. No module outside this one compares a protocol's
name (``tests/unit/test_protocols.py`` keeps it so): they ask the record.

The paper trained every trial to its budget (``full``). ``goal`` and ``race`` stop
earlier without changing steps to the study's goals (a minimum over trials): a
goal-stopped trial beat every goal; a race-stopped one could only have crossed later than
a trial of its batch size already had. What they do change is what is known about a
*stricter* goal, which ``batchscale.analysis`` reads from the stop reasons below.

A new protocol is one ``StoppingProtocol(...)`` passed to ``register``: in this table for
a shipped one, or in a plugin module named by ``BATCHSCALE_PLUGINS`` (imported at the
first look-up, in every process of a study: the CLI, kfp.local's tasks, and a cluster's
pods, to which a compiled pipeline hands the variable), which is how the tests add a
test-only protocol. Leaf layer: imports nothing of the project.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from batchscale.core.errors import InputError

# Why a trial stopped (metadata.json's stop_reason). The first two are not early stops.
STOP_DIVERGED = "diverged"  # INFEASIBLE: non-finite or exploding training loss
STOP_BUDGET = "budget"  # trained its whole step budget
STOP_GOAL = "goal"  # beat every goal of the study (a protocol with stops_at_goal)
STOP_RACE = "race"  # could no longer lower steps to result (a protocol that races)

PLUGINS_VARIABLE = "BATCHSCALE_PLUGINS"  # comma-separated modules that call register()

# The plan's estimate of the steps one trial trains: from its budget and the crossings of
# the goal predicted for the probe runs scaled to this batch size (None: never reached).
EstimateRule = Callable[[float, Sequence["float | None"]], float]


def to_budget(budget: float, crossings: Sequence[float | None]) -> float:
    """Every trial trains its whole budget."""
    return float(budget)


def to_own_crossing(budget: float, crossings: Sequence[float | None]) -> float:
    """Each trial stops at its own crossing (its budget where it never crosses): the mean."""
    if not crossings:
        return float(budget)
    return sum(min(budget, c) if c is not None else budget for c in crossings) / len(crossings)


def to_first_crossing(budget: float, crossings: Sequence[float | None]) -> float:
    """Every trial stops about where the first one crosses (the budget itself, as given,
    where it comes first)."""
    reached = [c for c in crossings if c is not None]
    return min(budget, min(reached)) if reached else float(budget)


@dataclass(frozen=True, eq=False)
class StoppingProtocol:
    """One stopping protocol: what it means to every layer.

    ``stops_at_goal``: a trial stops (COMPLETE, ``STOP_GOAL``) once it beats every goal.
    ``races``: a trial also stops (COMPLETE, ``STOP_RACE``) once every goal it has not
    beaten was already crossed by another trial of its batch size at or before its step;
    trials then publish their crossings (``store.crossings``) and a pack's trials train in
    lockstep, evaluation by evaluation, so that a crossing is known before anyone trains
    past it. ``family``: a study may switch between protocols of one family under its
    name (their trials stop only where further steps could not change steps to result);
    ``None`` switches with none. ``summary``: the few words the CLI and errors use;
    ``method``: the report's sentence on what a trial did. ``fit_approximate``: the
    regime fit's intervals use crossings the protocol censored (the report says so).
    ``estimate``: the plan's trained-steps rule.
    """

    name: str
    summary: str
    method: str
    stops_at_goal: bool
    races: bool
    estimate: EstimateRule
    family: str | None = None
    fit_approximate: bool = False

    @property
    def early_stopping(self) -> bool:
        """Whether any trial may stop before its budget with no divergence."""
        return bool(self.stop_reasons)

    @property
    def lockstep(self) -> bool:
        """Whether a pack's trials train interleaved, evaluation by evaluation."""
        return self.races

    @property
    def stop_reasons(self) -> tuple[str, ...]:
        """The stop reasons of a trial this protocol stopped early (censored there)."""
        return ((STOP_GOAL,) if self.stops_at_goal else ()) + ((STOP_RACE,) if self.races else ())

    def may_switch_to(self, other: StoppingProtocol) -> bool:
        """Whether a study registered under this protocol may go on under ``other``."""
        return self.name == other.name or (self.family is not None and self.family == other.family)

    def __str__(self) -> str:
        return self.name

    # Records are equal by name (one record per name in the table). Comparing one with a
    # string is a bug this module exists to prevent, so it fails loudly instead of False.
    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            raise TypeError(f"compare stopping protocols by their record's fields, not with "
                            f"the name {other!r} (batchscale.core.protocols)")
        return isinstance(other, StoppingProtocol) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


FULL = StoppingProtocol(
    "full", summary="every trial to its budget, as the paper",
    method="every trial trained to its step budget (the paper's protocol), so every curve "
           "is whole and nothing is censored.",
    stops_at_goal=False, races=False, estimate=to_budget)
GOAL = StoppingProtocol(
    "goal", summary="stop once every goal is beaten",
    method="a trial stopped once it beat every goal of the study.",
    stops_at_goal=True, races=False, estimate=to_own_crossing, family="early")
RACE = StoppingProtocol(
    "race", summary="also stop once a trial can no longer beat its batch size's best",
    method="a trial stopped once it beat every goal of the study, or once its evaluated step "
           "reached the earliest crossing another trial of its batch size had made of each "
           "goal it had not beaten (steps to result, a minimum, cannot change).",
    stops_at_goal=True, races=True, estimate=to_first_crossing, family="early",
    fit_approximate=True)

DEFAULT = GOAL  # a spec that names none
# A study.json of ours without a protocol field (written before it existed) stopped at
# the goals; the paper's database ran COMPLETE trials to their budgets.
LEGACY = GOAL
PAPER = FULL

_TABLE: dict[str, StoppingProtocol] = {p.name: p for p in (FULL, GOAL, RACE)}
_plugins_loaded: set[str] = set()
_plugins_lock = threading.RLock()  # re-entrant: a plugin may look a protocol up as it loads


def register(protocol: StoppingProtocol) -> StoppingProtocol:
    """Add ``protocol`` to the table (a plugin's; the same record again is a no-op)."""
    known = _TABLE.get(protocol.name)
    if known is not None and known is not protocol:
        raise ValueError(f"stopping protocol {protocol.name!r} is registered already")
    _TABLE[protocol.name] = protocol
    return protocol


def plugin_modules() -> tuple[str, ...]:
    """The modules ``BATCHSCALE_PLUGINS`` names in this process (a compiled pipeline hands
    the same variable to its pods)."""
    return tuple(filter(None, (m.strip() for m in os.environ.get(PLUGINS_VARIABLE, "").split(","))))


def _load_plugins() -> None:
    """Import the modules ``BATCHSCALE_PLUGINS`` names, once each, at look-up time. One
    that cannot be imported is refused in one line (ValueError, which the CLI prints as
    such) and tried again at the next look-up, not skipped."""
    with _plugins_lock:  # look-ups from several threads import each plugin once
        for module in plugin_modules():
            if module in _plugins_loaded:
                continue
            try:
                importlib.import_module(module)
            except ImportError as err:
                raise InputError(f"{PLUGINS_VARIABLE}: cannot import {module!r} ({err}); allowed: "
                                 "comma-separated modules importable here (and in the images a "
                                 "cluster runs) that register stopping protocols") from None
            _plugins_loaded.add(module)


def all_protocols() -> tuple[StoppingProtocol, ...]:
    """Every known protocol, the shipped ones first."""
    _load_plugins()
    return tuple(_TABLE.values())


def names() -> tuple[str, ...]:
    return tuple(p.name for p in all_protocols())


def find(name: object) -> StoppingProtocol | None:
    """The protocol called ``name``, or None."""
    _load_plugins()
    return _TABLE.get(name) if isinstance(name, str) else None


def allowed_text(mark_default: bool = False) -> str:
    """'full (...), goal (...), race (...)': what a spec or flag may name (``mark_default``:
    '; default' after the summary of ``DEFAULT``, as the CLI's help says it)."""
    return ", ".join(f"{p.name} ({p.summary}{'; default' if mark_default and p is DEFAULT else ''})"
                     for p in all_protocols())


def unknown(name: str) -> StoppingProtocol:
    """A stand-in for a protocol a stored study names but this process does not know (its
    plugin is not loaded): it assumes the most a protocol could have done, so the analysis
    censors every early stop and calls the regime fit approximate, and it says so."""
    return StoppingProtocol(
        name, summary="not registered in this process",
        method=(f"protocol {name} is not registered here (its plugin is not loaded: name it in "
                f"{PLUGINS_VARIABLE}), so every trial that stopped before its budget is treated as "
                "censored where it stopped."),
        stops_at_goal=True, races=True, estimate=to_budget, fit_approximate=True)


def early_stop_reasons() -> tuple[str, ...]:
    """Every stop reason some protocol gives a trial it stops before its budget."""
    found: dict[str, None] = {}
    for p in all_protocols():
        found.update(dict.fromkeys(p.stop_reasons))
    return tuple(found)
