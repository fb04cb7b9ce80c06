"""Stopping protocols as records (batchscale.core.protocols): what each one means, the
plan's estimate rules against the branches they replaced, the refusals built from the
table, a protocol added by a plugin, and that no module compares a protocol's name.

The name scan (tests/protocol_names.py) runs per folder, so a failure names the folder;
the checker itself is tested on snippets, so a broken checker cannot pass silently.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from batchscale.core import protocols
from batchscale.core.errors import SpecError
from batchscale.core.protocols import FULL, GOAL, RACE
from batchscale.store.compatibility import check_same_study
from batchscale.store.layout import paper_study_json
from batchscale.validation import parse_spec
from tests.conftest import tiny_spec_dict
from tests.protocol_names import SCANNED, offenders, scan

REPO = Path(__file__).resolve().parents[2]
SHIPPED = {"full", "goal", "race"}


def spec(**changes):
    return parse_spec(tiny_spec_dict("s", **changes))


def test_what_each_shipped_protocol_stops_and_censors():
    assert protocols.names() == ("full", "goal", "race")
    assert (FULL.stop_reasons, GOAL.stop_reasons, RACE.stop_reasons) == \
        ((), ("goal",), ("goal", "race"))
    assert [p.early_stopping for p in (FULL, GOAL, RACE)] == [False, True, True]
    assert [p.lockstep for p in (FULL, GOAL, RACE)] == [False, False, True]
    assert protocols.early_stop_reasons() == (protocols.STOP_GOAL, protocols.STOP_RACE)
    assert protocols.DEFAULT is GOAL and protocols.LEGACY is GOAL and protocols.PAPER is FULL
    assert spec().protocol is GOAL and spec(protocol="race").protocol is RACE


def test_which_protocols_a_study_may_switch_to():
    allowed = {(a.name, b.name) for a in (FULL, GOAL, RACE) for b in (FULL, GOAL, RACE)
               if a.may_switch_to(b)}
    assert allowed == {("full", "full"), ("goal", "goal"), ("race", "race"),
                       ("goal", "race"), ("race", "goal")}


def test_names_are_no_protocols():
    assert protocols.find("fast") is None and protocols.find(None) is None
    assert protocols.find("race") is RACE and str(RACE) == "race"
    with pytest.raises(TypeError, match="not with the name 'race'"):
        _ = RACE == "race"
    assert RACE == protocols.find("race") and RACE != GOAL and len({GOAL, RACE, GOAL}) == 2


def _old_estimate(name: str, budget: int, crossings: list, ratio: float) -> float:
    """planning/estimate.py's per-trial steps as they were, branch by protocol name."""
    reached = [c for c in crossings if c is not None]
    if name == "full":
        return float(budget)
    if name == "goal":
        return sum(min(budget, c * ratio) if c is not None else budget
                   for c in crossings) / len(crossings)
    return min(budget, min(reached) * ratio)


@pytest.mark.parametrize("budget, crossings, ratio", [
    (300, [120, None, 250, 90], 1.0), (300, [120, None, 250, 90], 0.37),
    (100, [120, None, 250, 90], 2.5), (1000, [7], 1 / 3), (50, [None, 33, None], 1.7)])
def test_the_estimate_rules_give_the_numbers_of_the_branches_they_replaced(budget, crossings, ratio):
    scaled = [None if c is None else c * ratio for c in crossings]
    for p in (FULL, GOAL, RACE):
        assert p.estimate(budget, scaled) == _old_estimate(p.name, budget, crossings, ratio), p


def test_the_refusals_are_one_line_from_the_table():
    with pytest.raises(SpecError) as refused:
        spec(protocol="fast")
    text = str(refused.value)
    assert "\n" not in text and text.endswith("allowed: " + protocols.allowed_text())
    assert all(f"{name} (" in text for name in SHIPPED)
    with pytest.raises(SpecError) as refused:
        check_same_study(spec(protocol="race").to_dict(), spec(protocol="full"), "S")
    assert str(refused.value) == (  # the words it had before the table built them
        "protocol: differs from study 'tiny' in S (race there, full here); a study may switch "
        "between goal and race, not to or from full (its trials would stop at different "
        "points): choose another name for another study")


def test_study_json_writes_the_protocols_name():
    for name in SHIPPED:
        study = paper_study_json(spec(protocol=name), 16, [])
        assert study["protocol"] == name and study["early_stopping"] is (name != "full")


def test_a_plugin_protocol_is_found_validated_and_refused_by_the_table(protocol_plugin):
    from batchscale.cli.options import add_spec_args

    alone = protocols.find("goal_alone")  # imports the plugin (BATCHSCALE_PLUGINS)
    assert alone is not None and protocols.names() == ("full", "goal", "race", "goal_alone")
    assert alone.stop_reasons == ("goal",) and not alone.lockstep
    assert alone.may_switch_to(alone) and not alone.may_switch_to(GOAL)
    assert not GOAL.may_switch_to(alone)
    assert spec(protocol="goal_alone").protocol is alone
    assert paper_study_json(spec(protocol="goal_alone"), 16, [])["protocol"] == "goal_alone"
    with pytest.raises(SpecError, match=r"allowed: full \(.*\), goal_alone \(.*test-only plugin\)$"):
        spec(protocol="fast")
    with pytest.raises(SpecError, match=r"\(goal there, goal_alone here\); a study may switch "
                                        r"between goal and race, not to or from full or goal_alone"):
        check_same_study(spec().to_dict(), spec(protocol="goal_alone"), "S")
    parser = argparse.ArgumentParser()
    add_spec_args(parser)
    assert "goal_alone (stop once every goal" in " ".join(parser.format_help().split())


def test_without_the_plugin_its_protocol_is_unknown():
    assert protocols.find("goal_alone") is None  # the fixture restored the table


# ---- the name scan -----------------------------------------------------------------------

OFFENDING = '''
EARLY_STOPPING_PROTOCOLS = ("goal", "race")
TEXT = {"full": "every trial", "goal": "stops", "race": "races"}
if spec.protocol == "race": pass
if spec.protocol != "full" and x: pass
if protocol in ("goal", "race"): pass
if "race" in protocol: pass
if study_json.get("protocol", "goal") not in {"goal"}: pass
'''
INNOCENT = '''
table = steps[(steps["goal"] == goal) & (steps["split"] == "val")]
if "goal" in curves: pass
reasons = {"INFEASIBLE": "diverged", "COMPLETE": "goal" if early else "budget"}
columns = ["goal", "split", "batch_size"]
if spec.protocol.races and reason == "race": pass
if metadata.get("stop_reason") == "goal": pass
full = {"full": 1, "compile": 2}
'''


def test_the_scan_flags_protocol_names_and_not_the_word_goal():
    found = offenders(OFFENDING, SHIPPED)
    assert [line.split(":")[1] for line in found] == ["2", "3", "4", "5", "6", "6", "7", "8"], found
    assert offenders(INNOCENT, SHIPPED) == []


def _folders() -> list[str]:
    """Each scanned source folder: batchscale's subpackages one by one, then the others."""
    inner = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "batchscale").iterdir()
                   if p.is_dir() and (p / "__init__.py").exists())
    return ["batchscale/__init__.py", *inner, *(f for f in SCANNED if f != "batchscale")]


@pytest.mark.parametrize("folder", _folders())
def test_no_module_compares_a_protocols_name(folder):
    """Every module asks the record (core.protocols); none spells a protocol by name."""
    path = REPO / folder
    found = scan(REPO, SHIPPED, (folder,)) if path.is_dir() else offenders(
        path.read_text(), SHIPPED, folder)
    assert not found, "protocol names compared (ask the core.protocols record):\n" + "\n".join(found)


def test_a_plugin_that_cannot_be_imported_is_one_line_every_time(monkeypatch, capsys):
    """BATCHSCALE_PLUGINS naming a module that does not import: every look-up says so in one
    line naming the variable (the CLI exits 2 with it, no traceback), never skips it."""
    from batchscale.cli.main import main

    monkeypatch.setenv(protocols.PLUGINS_VARIABLE, "goal_alone_nowhere")
    monkeypatch.setattr(protocols, "_plugins_loaded", set(protocols._plugins_loaded))
    for _ in range(2):  # a failed import is not remembered as loaded
        with pytest.raises(ValueError, match=r"^BATCHSCALE_PLUGINS: cannot import 'goal_alone_nowhere'"):
            protocols.find("goal")
    assert main(["validate"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("batchscale: error: BATCHSCALE_PLUGINS: cannot import")
