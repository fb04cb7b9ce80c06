"""A number YAML read as text (``1e-4``: PyYAML's YAML 1.1 needs a dot in the exponent)
is refused in one line that says so and how to write it; other bad values keep their line."""

import pytest
import yaml

from batchscale.core.spec import SpecError, as_number


def test_exponent_without_a_dot_gets_the_hint():
    value = yaml.safe_load("min: 1e-4")["min"]
    assert value == "1e-4"  # the trap itself: YAML 1.1 reads it as a string
    hint = r"min: .1e-4. is not a finite number \(read as text: .*write 0\.0001\)"
    with pytest.raises(SpecError, match=hint):
        as_number("min", value)


def test_other_bad_values_get_no_hint():
    for value in ("fast", float("nan"), None, "nan"):
        with pytest.raises(SpecError) as err:
            as_number("min", value)
        assert "read as text" not in str(err.value)
