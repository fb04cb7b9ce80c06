"""The errors whose message is meant for the user, one line each, and the exit status the
CLI gives each kind (docs/bad-input.md, ``batchscale.cli.main``):

- ``InputError`` (exit 2): an input that cannot be used: a spec field, a flag, a path
  given on the command line, a setting, a file of the user's. ``SpecError``, the one
  a spec field or flag raises, is one.
- ``StoreDamaged`` (exit 3): a file or folder of the store is not what the store's layout
  says it must be (a file where the report's folder must be); the message names it.

- ``CommandFailed`` (exit 1): the command could not do its work though its input and the
  store are fine: a measurement that gave nothing usable (every timing probe outside
  physical bounds).

Every other exception that reaches the CLI is a bug, never reported as bad input. Both are
ValueErrors, so code that refuses a value with ValueError inside a layer can be caught the
same way; nothing is written to the store before the input that raised one was checked.
"""

from __future__ import annotations


class InputError(ValueError):
    """An input the user gave that cannot be used; the message is one line naming it and
    what is allowed."""


class SpecError(InputError):
    """A study spec, goal or flag that cannot be used; the message is one line naming the
    field and the remedy."""


class StoreDamaged(ValueError):
    """A file or folder in the store that is not what its place in the layout must hold;
    the message is one line naming it and what to do."""


class CommandFailed(RuntimeError):
    """The work failed for a reason outside the input and the store (a measurement, the
    machine); the message is one line saying what and what to try."""


def fail_field(field_name: str, problem: str) -> None:
    """Raise the one-line SpecError every refusal uses: ``<field>: <problem>``."""
    raise SpecError(f"{field_name}: {problem}")
