"""Whether a stored trial is finished under a study's current budget: the one rule that
the packs (train or re-use), the progress line and the report's completeness all use.

A trial is finished when its metadata says COMPLETE or INFEASIBLE, except a trial that
stopped at its step budget (stop_reason "budget") when the study's budget for its batch
size has since grown: that trial *continues*, from the checkpoint it kept when it
stopped, up to the new budget. A trial that reached its goals or diverged is finished
whatever the budget: more steps could not change its result.
"""

from __future__ import annotations

from batchscale.core.names import DONE_STATUSES
from batchscale.core.protocols import STOP_BUDGET


def is_finished(metadata: dict | None, max_steps: int) -> bool:
    """Whether a trial with this metadata.json needs no more training at ``max_steps``."""
    if not metadata or metadata.get("status") not in DONE_STATUSES:
        return False
    return not continues(metadata, max_steps)


def continues(metadata: dict | None, max_steps: int) -> bool:
    """Whether a trial stopped at a budget smaller than ``max_steps`` (it trains on)."""
    return bool(metadata) and metadata.get("status") == "COMPLETE" \
        and metadata.get("stop_reason") == STOP_BUDGET \
        and int(metadata.get("max_steps") or 0) < max_steps


def keeps_checkpoint(stop_reason: str) -> bool:
    """Whether a finished trial keeps its last checkpoint: only a trial stopped by its
    budget, the one kind a larger budget would continue."""
    return stop_reason == STOP_BUDGET
