"""The one error a bad input raises: ``SpecError``, whose message is one line naming the
field (or flag) and what is allowed. The CLI prints it and exits 2; nothing is written
to the store before the input that raised it was checked."""

from __future__ import annotations


class SpecError(ValueError):
    """A study spec, goal or flag that cannot be used; the message is one line naming the
    field and the remedy."""


def fail_field(field_name: str, problem: str) -> None:
    """Raise the one-line SpecError every refusal uses: ``<field>: <problem>``."""
    raise SpecError(f"{field_name}: {problem}")
