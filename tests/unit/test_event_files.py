"""Segment file names: TensorBoard must see every segment of a trial, in the order the
segments started (a later one's SessionLog.START drops what earlier ones said after it).
TensorBoard's own reader reads them in tests/integration/test_live_curves.py (its
IsTensorFlowEventsFile would import TensorFlow, 8 s, here)."""

from batchscale.store.event_files import segment_name


def test_segments_started_at_the_same_moment_get_different_names():
    names = [segment_name(1795580630.25) for _ in range(3)]
    assert len(set(names)) == 3  # whole seconds alone once gave a resumed trial one file
    assert all(name.startswith("events.out.tfevents.") for name in names)


def test_segment_names_sort_in_start_order_within_and_across_seconds():
    starts = [1795580630.0, 1795580630.5, 1795580630.999999, 1795580631.0, 1795580700.123]
    names = [segment_name(t) for t in reversed(starts)][::-1]  # made last-first: the count
    assert sorted(names) == names                              # must not decide the order
