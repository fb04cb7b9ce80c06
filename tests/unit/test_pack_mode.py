"""The pack mode chosen by measurement: the choice from given rates, the pack-mode record's
checks, the cache in the study's profile and what a trial's metadata says of its mode."""

from __future__ import annotations

import json

import pytest

from batchscale.core.spec import TrialSpec
from batchscale.store.layout import StudyStore
from batchscale.store.profiles import (
    check_pack_modes,
    pack_mode_name,
    pack_mode_problem,
    read_pack_modes,
    write_pack_mode,
)
from batchscale.training.pack_mode import (
    MARGIN,
    MODE_VARIABLE,
    TURNS,
    VMAPPED,
    PackMode,
    choose,
    choose_pack_mode,
    forced_mode,
    mode_metadata,
    pack_width,
)
from batchscale.validation import parse_spec
from tests.conftest import tiny_spec_dict


def _record(**changes) -> dict:
    record = {"model": "fc_32", "batch_sizes": [16], "width": 4, "device_kind": "cpu",
              "precision": "float32", "rates": {VMAPPED: 900.0, TURNS: 600.0}, "chosen": TURNS,
              "measured": "2026-11-26T20:00:00Z", "source": "probe"}
    record.update(changes)
    return record


def test_vmapped_is_chosen_only_beyond_the_margin():
    assert choose({VMAPPED: 2000.0, TURNS: 1000.0}, 2.0) == VMAPPED  # exactly the margin
    assert choose({VMAPPED: 1999.0, TURNS: 1000.0}, 2.0) == TURNS
    assert choose({VMAPPED: 1300.0, TURNS: 1000.0}, 1.2) == VMAPPED
    assert choose({VMAPPED: 500.0, TURNS: 1000.0}, 1.0) == TURNS
    assert choose({TURNS: 1000.0}) == TURNS and choose({VMAPPED: 5.0}) == TURNS  # one side missing


@pytest.mark.parametrize("change, named", [
    ({"rates": {VMAPPED: float("nan"), TURNS: 1.0}}, "rates['vmapped']"),
    ({"rates": {VMAPPED: -3.0, TURNS: 1.0}}, "rates['vmapped']"),
    ({"rates": {VMAPPED: 1e12, TURNS: 1.0}}, "outside physical bounds"),  # 4 trials: <= 4e7
    ({"rates": {VMAPPED: "fast", TURNS: 1.0}}, "rates['vmapped']"),
    ({"rates": {}}, "has rates"),
    ({"chosen": "mixed"}, "has chosen 'mixed'"),
    ({"batch_sizes": 16}, "has batch_sizes"),
    ({"batch_sizes": [16, 0]}, "has batch_sizes"),
    ({"width": True}, "has width"),
    ({"model": ""}, "has model"),
    ({"device_kind": None}, "has device_kind"),
])
def test_a_malformed_record_is_named_by_its_field(change, named):
    problem = pack_mode_problem(_record(**change))
    assert problem and named in problem and "allowed:" in problem
    assert pack_mode_problem(_record()) is None
    assert pack_mode_problem(["not", "an", "object"]).startswith("is not a JSON object")
    # a mixed measurement (several batch sizes sharing one padded step) is the same kind
    mixed = _record(batch_sizes=[2, 4, 8], width=12, rates={"mixed": 5000.0, TURNS: 900.0},
                    chosen="mixed", extra={"anything": "a writer adds"})
    assert pack_mode_problem(mixed) is None and pack_mode_name(mixed) == "fc_32-2_4_8-cpu-float32-12.json"


def test_records_are_written_one_file_each_and_damaged_ones_named_and_left_out(tmp_path):
    fs = StudyStore(str(tmp_path)).fs
    path = write_pack_mode(fs, "s", _record())
    assert path == "profile/pack_modes/fc_32-16-cpu-float32-4.json"
    write_pack_mode(fs, "s", _record(batch_sizes=[128], chosen=VMAPPED))
    fs.write_text("s/profile/pack_modes/forged.json", json.dumps(_record(width=0)))
    fs.write_text("s/profile/pack_modes/cut.json", '{"model": "fc_32", "batch')
    records, rejected = check_pack_modes(fs, "s")
    assert [r["batch_sizes"] for r in records] == [[16], [128]]
    assert sorted((p.rsplit("/", 1)[1], why.split(" (")[0].split(",")[0]) for p, why in rejected) == [
        ("cut.json", "is not valid JSON"), ("forged.json", "has width 0")]
    said = []
    assert read_pack_modes(fs, "s", said.append) == records
    assert len(said) == 2 and all("left out" in line and "measures again" in line for line in said)
    with pytest.raises(ValueError, match=r"has chosen 'mixed'.*nothing written"):
        write_pack_mode(fs, "s", _record(batch_sizes=[64], chosen="mixed"))
    assert not fs.exists("s/profile/pack_modes/fc_32-64-cpu-float32-4.json")


def _trials(count: int, batch_size: int = 16) -> list[TrialSpec]:
    return [TrialSpec("tiny", batch_size, i + 1, {"learning_rate": 0.05}) for i in range(count)]


@pytest.fixture
def measured(monkeypatch):
    """The mode measured, as outside the test suite (tests/conftest.py fixes turns)."""
    monkeypatch.delenv(MODE_VARIABLE, raising=False)


def test_the_environment_fixes_a_mode_or_is_refused_in_one_line(tmp_path, monkeypatch):
    spec = parse_spec(tiny_spec_dict(str(tmp_path)))
    store = StudyStore(str(tmp_path))

    def probe(width):
        raise AssertionError("no probe where the mode is fixed")

    for value, expected in (("turns", PackMode(TURNS, 1, MODE_VARIABLE)),
                            (" Vmapped ", PackMode(VMAPPED, 3, MODE_VARIABLE))):
        monkeypatch.setenv(MODE_VARIABLE, value)
        assert choose_pack_mode(spec, store, _trials(3), probe, print) == expected
    monkeypatch.setenv(MODE_VARIABLE, "fastest")
    with pytest.raises(ValueError, match=r"^BATCHSCALE_PACK_MODE: 'fastest' is not a pack mode; "
                                         r"allowed: turns, vmapped, measure"):
        forced_mode()
    assert not store.fs.list_files("")  # nothing written


def test_a_pack_probes_once_and_later_packs_of_its_key_read_the_cached_choice(tmp_path, measured):
    spec = parse_spec(tiny_spec_dict(str(tmp_path)))
    store = StudyStore(str(tmp_path))
    probed, said = [], []

    def probe(width):
        probed.append(width)
        return {"rates": {VMAPPED: 2500.0, TURNS: 1000.0}, "probe_seconds": 0.5,
                "measured": "2026-11-26T20:00:00Z", "source": "probe"}

    first = choose_pack_mode(spec, store, _trials(3), probe, said.append)
    assert (first.mode, first.width, first.source, probed) == (VMAPPED, 3, "probe", [3])
    assert first.path == "profile/pack_modes/fc_32-16-cpu-float32-3.json"
    assert first.record["margin"] == MARGIN and first.record["chosen"] == VMAPPED
    again = choose_pack_mode(spec, store, _trials(3), probe, said.append)
    assert probed == [3] and (again.mode, again.width, again.source) == (VMAPPED, 3, "profile")
    assert again.record == first.record and "the study's profile" in said[-1]

    # another key (batch size, width) is probed; a given width or a single trial never is
    assert choose_pack_mode(spec, store, _trials(2), probe, said.append).width == 2
    assert probed == [3, 2]
    assert choose_pack_mode(spec, store, _trials(3), probe, said.append, width=1) == \
        PackMode(TURNS, 1, "given")
    assert choose_pack_mode(spec, store, _trials(1), probe, said.append) == PackMode(TURNS, 1, "one trial")
    assert probed == [3, 2]

    # a damaged cached record is named and measured again (and replaced)
    store.fs.write_text(f"tiny/{first.path}", "{}")
    assert choose_pack_mode(spec, store, _trials(3), probe, said.append).source == "probe"
    assert probed == [3, 2, 3] and any("left out" in line for line in said)
    assert read_pack_modes(store.fs, "tiny")[0]["chosen"] == VMAPPED

    # a record of its key whose choice is no mode of a pack is not believed (it would
    # have trained as PackMode("mixed", 1)): measured again and replaced
    write_pack_mode(store.fs, "tiny", {**first.record, "rates": {"mixed": 3.0, "separate": 1.0},
                                       "chosen": "mixed"})
    assert choose_pack_mode(spec, store, _trials(3), probe, said.append).source == "probe"
    assert probed == [3, 2, 3, 3] and "'mixed', not vmapped or turns" in said[-2]
    assert read_pack_modes(store.fs, "tiny")[0]["chosen"] == VMAPPED


def test_packs_of_one_key_probing_at_once_train_in_the_mode_written_first(tmp_path, measured):
    spec = parse_spec(tiny_spec_dict(str(tmp_path)))
    store = StudyStore(str(tmp_path))
    said = []
    rates = {"probe_seconds": 0.5, "measured": "2026-11-26T20:00:01Z", "source": "probe"}

    def other_pack_wrote_first(width):  # another pack of this key, started together, wins
        first = choose_pack_mode(spec, store, _trials(width), lambda w: {
            **rates, "rates": {VMAPPED: 2500.0, TURNS: 1000.0}}, said.append)
        assert (first.mode, first.source) == (VMAPPED, "probe")
        return {**rates, "rates": {VMAPPED: 1900.0, TURNS: 1000.0}}  # this one: turns

    mode = choose_pack_mode(spec, store, _trials(3), other_pack_wrote_first, said.append)
    assert (mode.mode, mode.width, mode.source) == (VMAPPED, 3, "profile")
    assert "another pack of its key measured first" in said[-1] and "said turns" in said[-1]
    [kept] = read_pack_modes(store.fs, "tiny")
    assert kept["rates"][VMAPPED] == 2500.0 and mode.record == kept


def test_a_failed_probe_takes_turns_and_writes_nothing(tmp_path, measured):
    spec = parse_spec(tiny_spec_dict(str(tmp_path)))
    store = StudyStore(str(tmp_path))
    said = []

    def broken(width):
        raise RuntimeError("out of memory")

    def impossible(width):  # a clock that jumped: outside the bounds every reader applies
        return {"rates": {VMAPPED: float("inf"), TURNS: 1.0}, "probe_seconds": 0.1,
                "measured": "now", "source": "probe"}

    for probe in (broken, impossible):
        assert choose_pack_mode(spec, store, _trials(3), probe, said.append) == \
            PackMode(TURNS, 1, "probe failed")
    assert read_pack_modes(store.fs, "tiny") == []
    assert "RuntimeError: out of memory" in said[0] and "nothing written" in said[1]


def test_a_trials_metadata_says_the_mode_its_group_trained_in():
    record = _record(chosen=VMAPPED)
    chosen = PackMode(VMAPPED, 4, "probe", record, "profile/pack_modes/x.json")
    assert mode_metadata(chosen, 4) == {
        "pack_mode": VMAPPED, "pack_mode_source": "probe", "pack_mode_rates": record["rates"],
        "pack_mode_record": "profile/pack_modes/x.json"}
    # resumed into a group as wide as its checkpoint's (one trial at a time before), or
    # as wide as the pack's choice: the checkpoint decided either way
    assert mode_metadata(chosen, 1, resumed=True) == {"pack_mode": TURNS,
                                                      "pack_mode_source": "checkpoint"}
    assert mode_metadata(chosen, 4, resumed=True)["pack_mode_source"] == "checkpoint"
    # fresh trials in a group narrower than the pack's width (its last trials: 5 trials
    # at width 4 are groups of 4 and 1): the probe decided, no checkpoint did
    assert mode_metadata(chosen, 2)["pack_mode_source"] == "probe"
    assert mode_metadata(chosen, 1) == {**mode_metadata(chosen, 4), "pack_mode": TURNS}
    assert mode_metadata(PackMode(TURNS, 1, "given"), 1) == {"pack_mode": TURNS,
                                                               "pack_mode_source": "given"}


def test_the_would_be_width_is_the_pack_up_to_the_workloads_capacity(tmp_path):
    spec = parse_spec(tiny_spec_dict(str(tmp_path)))  # digits / fc_32: capacity 64
    assert [pack_width(spec, _trials(n)) for n in (1, 5, 64, 100)] == [1, 5, 64, 64]


def test_the_reports_table_joins_records_and_the_modes_trials_trained_in(tmp_path):
    """Rows per record (a mixed record's batch sizes in one row), batch sizes whose trials
    name a mode without a record, and a damaged record named in the notes."""
    from types import SimpleNamespace

    import pandas as pd

    from batchscale.analysis.pages.pack_mode_page import pack_mode_section
    from batchscale.analysis.pages.sections import render_markdown
    from batchscale.analysis.statistics.pack_modes import pack_mode_table

    spec = parse_spec(tiny_spec_dict(str(tmp_path)))
    fs = StudyStore(str(tmp_path)).fs
    write_pack_mode(fs, "tiny", _record(chosen=VMAPPED, margin=2.0))
    write_pack_mode(fs, "tiny", _record(batch_sizes=[2, 4], width=8, chosen="mixed",
                                        rates={"mixed": 4000.0, TURNS: 1000.0}))
    fs.write_text("tiny/profile/pack_modes/bad.json", "[]")
    metadata = pd.DataFrame({"batch_size": [2, 4, 16, 16, 128, 128],
                             "pack_mode": ["mixed", "mixed", VMAPPED, TURNS, TURNS, None]})
    study = SimpleNamespace(layout="batchscale", spec=spec, metadata=metadata,
                            location=f"{tmp_path}/tiny/{spec.workload.path}")
    table, notes = pack_mode_table(study)
    assert table[["batch sizes", "trained in", "chosen"]].values.tolist() == [
        ["2, 4", "mixed: 2", "mixed"], ["16", "turns: 1, vmapped: 1", VMAPPED],
        ["128", "turns: 1", ""]]
    assert table["trial-steps/s (measured)"].tolist() == [
        "mixed 4,000; turns 1,000", "turns 600; vmapped 900", "not measured"]
    assert len(notes) == 1 and "bad.json holds a JSON list" in notes[0]
    section = "\n".join(render_markdown(pack_mode_section(SimpleNamespace(study=study))))
    assert section.startswith("## Pack modes") and "| 2, 4 | mixed: 2 | 8 |" in section
    empty = SimpleNamespace(layout="paper", spec=None, metadata=pd.DataFrame({"batch_size": [8]}))
    assert pack_mode_section(SimpleNamespace(study=empty)) is None
