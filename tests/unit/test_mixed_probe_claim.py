"""Packs of one mixed key that probe at the same time (a stage's ParallelFor) adopt the
record written first, as ``pack_mode.choose_pack_mode`` does: the study's packs then mix
alike, and a stage run again follows the same record."""

from batchscale.store.layout import StudyStore
from batchscale.store.profiles import read_pack_modes, write_pack_mode
from batchscale.training import mixed_probe
from batchscale.validation import parse_spec
from tests.conftest import tiny_spec_dict


def test_a_mixed_probe_adopts_the_record_a_pack_probing_at_the_same_time_wrote_first(
        tmp_path, monkeypatch):
    spec = parse_spec(tiny_spec_dict(str(tmp_path), batch_sizes=[2, 4, 8]))
    store = StudyStore(str(tmp_path))
    slots = mixed_probe.slot_sizes([2, 4, 8], 3)

    def probe(*_args, **_kwargs):  # meanwhile another pack's probe wrote "mixed"
        write_pack_mode(store.fs, spec.name, mixed_probe.mode_record(
            spec, slots, {"mixed": 3.0, "separate": 1.0}, "mixed", "2026-11-26T00:00:00Z", "probe"))
        return mixed_probe.mode_record(spec, slots, {"mixed": 1.0, "separate": 1.0}, "separate",
                                       "2026-11-26T00:00:01Z", "probe")

    monkeypatch.setattr(mixed_probe, "probe_mixed", probe)
    assert mixed_probe.mixed_chosen(spec, store, None, [2, 4, 8], 3, log=lambda *_: None)
    assert [r["chosen"] for r in read_pack_modes(store.fs, spec.name)] == ["mixed"]
