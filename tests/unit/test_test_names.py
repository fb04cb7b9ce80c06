"""Every test module's file name is unique across the tiers' folders.

tests/unit, tests/integration and tests/e2e are not packages, so pytest imports each test
module by its base name: a second tests/integration/test_x.py beside tests/unit/test_x.py
fails to collect ("import file mismatch") in whichever worker imports it second, and the
run errors. A CI run caught that once.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_name():
    names = Counter(p.name for p in TESTS.glob("*/test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
