"""What may change between two runs of one study, and the refusal that names what may not.

A study grows: more batch sizes, more trials, larger budgets, more search rounds or a
higher trial cap, another store location, other packing, parallelism, checkpoint
interval or price, or another rule for how a batch size added later starts its search
(``new_batch_sizes``: a recorded round keeps what it was planned with); it may switch
between stopping protocols of one family (``StoppingProtocol.may_switch_to``: ``goal``
and ``race``). Anything else (workload, search
space, fixed metaparameters, goals, schedule, evaluation, seed, backend) would mix trials
that mean different things, so a run that changes it is refused, naming the first field
that differs. Trials per batch size, search rounds and the trial cap may grow, never
shrink (the recorded rounds were planned under them). A budget may grow, never shrink,
and only when no metaparameter is a fraction of the budget (``decay_fraction``): a larger
budget continues the trials that stopped at the old one (``batchscale.core.trial_state``),
which is only the same trial if its learning-rate schedule does not depend on the budget.

The stored spec is ``<study>/study_spec.json``, or, should that be missing or damaged, the
copy every batch size's ``study.json`` carries (``STUDY_SPEC_KEY``).
"""

from __future__ import annotations

import json

from batchscale.core import protocols
from batchscale.core.errors import SpecError
from batchscale.core.spec import DEFAULT_TRIAL_CAP_FACTOR, StudySpec
from batchscale.store.json_files import read_json_object

STUDY_SPEC_KEY = "batchscale_study_spec"  # the spec's copy inside each study.json
GROWS = ("batch_sizes", "trials_per_batch_size", "max_steps", "max_rounds",
         "max_trials_per_batch_size")
COUNTS = ("trials_per_batch_size", "max_rounds", "max_trials_per_batch_size")  # grow only
FREE = ("store", "parallelism", "pack_size", "checkpoint_seconds", "price_per_device_hour",
        "new_batch_sizes")


def stored_spec_dict(fs, study: str) -> dict | None:
    """The spec a study was registered with (``StudySpec.to_dict`` form), or None for a
    new study: study_spec.json, else the copy in any of its batch sizes' study.json."""
    stored, _ = read_json_object(fs, f"{study}/study_spec.json")  # damaged: use a copy
    if stored is not None:
        return stored
    for file in fs.list_files(study, recursive=True):  # relative to the study's folder
        if file.endswith("/study.json"):
            copy = (read_json_object(fs, f"{study}/{file}")[0] or {}).get(STUDY_SPEC_KEY)
            if isinstance(copy, dict):
                return copy
    return None


def check_same_study(stored: dict, spec: StudySpec, where: str) -> None:
    """Refuse ``spec`` if it changes ``stored`` (the study registered in ``where``) other
    than by growing it: one line naming the field, what it was and what is allowed."""
    new = spec.to_dict()
    # A study registered before the protocol field stopped its trials at the goals.
    _check_protocol(stored.get("protocol", protocols.LEGACY.name), spec, where)
    for key in sorted(set(stored) | set(new)):
        if key in GROWS or key in FREE or key == "protocol":
            continue
        field = _first_difference(key, stored.get(key), new.get(key))
        if field is not None:
            raise SpecError(
                f"{field}: differs from study {spec.name!r} in {where} "
                f"({_show(_at(stored, field))} there, {_show(_at(new, field))} here); a study "
                "may only grow (batch sizes, trials, budgets): choose another name for another study")
    _check_budgets(stored, spec)
    _check_counts(stored, new, spec)


def _check_counts(stored: dict, new: dict, spec: StudySpec) -> None:
    """Trials per batch size, search rounds and the trial cap may grow, never shrink: the
    study keeps every trial it trained, and its recorded rounds were planned under the
    larger values (``batchscale.rounds.derivation`` derives them again from the spec)."""
    for key in COUNTS:
        old, now = _count(stored, key), _count(new, key)
        if old is not None and now is not None and now < old:
            raise SpecError(f"{key}: {now} is below the {old} study {spec.name!r} already has; it "
                            "may only grow (the study keeps every trial it trained): choose "
                            "another name for a smaller study")


def _count(spec: dict, key: str) -> int | None:
    """``spec[key]`` as an integer (the trial cap 0 is its default multiple of the trials)."""
    value = spec.get(key)
    if key == "max_trials_per_batch_size" and value == 0:
        trials = spec.get("trials_per_batch_size")
        value = DEFAULT_TRIAL_CAP_FACTOR * trials if isinstance(trials, int) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _check_protocol(old: str, spec: StudySpec, where: str) -> None:
    """Protocols of one family stop a trial only where its further steps could not change
    steps to the study's goals, so a study may switch between them; switching to or from
    any other (``full`` trains every trial to its budget) would leave trials that do not
    mean what the others do. An unknown stored name (a plugin's, not loaded) switches to
    itself only."""
    stored = protocols.find(old)
    if old == spec.protocol.name or (stored is not None and stored.may_switch_to(spec.protocol)):
        return
    raise SpecError(f"protocol: differs from study {spec.name!r} in {where} ({old} there, "
                    f"{spec.protocol.name} here); {_switches_text()}, not to or from "
                    f"{_alone_text()} (its trials would stop at different points): choose "
                    "another name for another study")


def _switches_text() -> str:
    """'a study may switch between goal and race': the table's families."""
    families: dict[str, list[str]] = {}
    for p in protocols.all_protocols():
        if p.family is not None:
            families.setdefault(p.family, []).append(p.name)
    groups = [" and ".join(names) for names in families.values() if len(names) > 1]
    return "a study may switch between " + " or between ".join(groups or ["none"])


def _alone_text() -> str:
    """'full': the protocols of no family (none may switch to or from them)."""
    return " or ".join(p.name for p in protocols.all_protocols() if p.family is None)


def _check_budgets(stored: dict, spec: StudySpec) -> None:
    before = {int(b): int(s) for b, s in (stored.get("max_steps") or {}).items()}
    budget_fraction = "decay_fraction" in (stored.get("search_space") or {}) \
        or "decay_fraction" in (stored.get("fixed") or {})
    for batch_size, steps in spec.max_steps.items():
        old = before.get(batch_size)
        if old is None or old == steps:
            continue
        if steps < old:
            raise SpecError(f"max_steps.{batch_size}: {steps} is below the {old} steps study "
                            f"{spec.name!r} already has; budgets may only grow")
        if budget_fraction:
            raise SpecError(f"max_steps.{batch_size}: study {spec.name!r} decays its learning rate "
                            "over a fraction of the budget (decay_fraction), so a larger budget "
                            f"would change its trials; keep {old} or start another study")


def _first_difference(path: str, a, b) -> str | None:
    """The dotted path of the first place where ``a`` and ``b`` differ, or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            found = _first_difference(f"{path}.{key}", a.get(key), b.get(key))
            if found is not None:
                return found
        return None
    return None if json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) else path


def _at(d: dict, dotted: str):
    for part in dotted.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


def _show(value) -> str:
    return "unset" if value is None else json.dumps(value, sort_keys=True)
