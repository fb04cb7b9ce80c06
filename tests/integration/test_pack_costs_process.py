"""The plan's start-up probes (``planning.pack_costs._process_seconds``): a fresh process
that hangs is stopped at its timeout and one that fails is one logged line, never a
hung or crashed plan; either way that part counts 0 s."""

from __future__ import annotations

from batchscale.planning.pack_costs import _process_seconds


def test_a_start_up_process_that_hangs_or_fails_is_one_line_and_counts_nothing():
    lines = []
    assert _process_seconds("import time; time.sleep(60)", log=lines.append, what="hang",
                            timeout=0.5) == 0.0
    assert _process_seconds("raise SystemExit('no kfp here')", log=lines.append, what="fail") == 0.0
    assert len(lines) == 2 and "hang ran past 0.5 s" in lines[0]
    assert "fail failed (exit 1: no kfp here)" in lines[1]
    assert _process_seconds("pass", log=lines.append) > 0 and len(lines) == 2
