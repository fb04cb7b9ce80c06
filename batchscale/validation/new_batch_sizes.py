"""The spec's ``new_batch_sizes`` checked (``batchscale.core.new_batch_sizes``): the one place.

``{search: search_space | fitted_box, trials: N}``; left out (or null), a batch size added
to a study searches the spec's ``search_space``. ``trials`` is 0 (half of
``trials_per_batch_size``, at least 1) or from 1 to ``trials_per_batch_size``: a fitted
round of more trials than the spec's own search would save nothing. Each refusal is one
SpecError line naming the field.
"""

from __future__ import annotations

from batchscale.core.new_batch_sizes import KEYS, SEARCHES, NewBatchSizes
from batchscale.core.spec import as_integer_in
from batchscale.core.spec import fail_field as _fail

FIELD = "new_batch_sizes"


def parse_new_batch_sizes(raw, trials_per_batch_size: int) -> NewBatchSizes:
    """``raw`` (the spec's value, None when left out) as a NewBatchSizes, or a SpecError."""
    if raw is None:
        return NewBatchSizes()
    if not isinstance(raw, dict):
        _fail(FIELD, f"must be a mapping, got {raw!r}; allowed keys: {', '.join(KEYS)} (e.g. "
              "{search: fitted_box, trials: 5})")
    extra = sorted(map(str, set(raw) - set(KEYS)))
    if extra:
        _fail(f"{FIELD}.{extra[0]}", f"unknown key; allowed: {', '.join(KEYS)}")
    search = raw.get("search", NewBatchSizes.search)
    if search not in SEARCHES:
        _fail(f"{FIELD}.search", f"unknown value {search!r}; allowed: {', '.join(SEARCHES)}")
    trials = as_integer_in(f"{FIELD}.trials", raw.get("trials", 0), 0, trials_per_batch_size)
    return NewBatchSizes(search, trials)
