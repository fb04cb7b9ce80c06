"""How a batch size added to a grown study starts its search: the spec's ``new_batch_sizes``.

The paper searched every batch size over one hand-chosen range (Section 3). Once a study
has batch sizes whose search is done, their best metaparameters follow laws in the batch
size (``batchscale.search.metaparameter_laws``), and a batch size added later may search
the box those laws propose for it instead of the whole range, with fewer trials
(``search: fitted_box``). Its round 1 is then a round of its own in its study.json,
recording the trials it was fitted from (``core.rounds.FittedFrom``), so the store keeps
the paper's layout and the round planner's derivation can recompute it
(``batchscale.rounds.fitted_round``). ``search: search_space`` (the default) searches the
spec's ``search_space``, as every batch size of a study always did.

A batch size that starts from a fitted box wants ``trials`` non-divergent trials, not
``trials_per_batch_size``: its top-ups and re-searches count to that, or the top-up would
sample back up to the full count and the saving would be lost. Changing this field changes
no recorded round (each keeps what it was planned with), so it may change between runs.
"""

from __future__ import annotations

from dataclasses import dataclass

SEARCH_SPACE = "search_space"  # the spec's search space, the paper's protocol
FITTED_BOX = "fitted_box"  # the box the metaparameter laws propose, where they can
SEARCHES = (SEARCH_SPACE, FITTED_BOX)
KEYS = ("search", "trials")


@dataclass(frozen=True)
class NewBatchSizes:
    """``search``: one of SEARCHES; ``trials``: how many trials a fitted round samples,
    0 for half of ``trials_per_batch_size`` (at least 1)."""

    search: str = SEARCH_SPACE
    trials: int = 0

    @property
    def fitted(self) -> bool:
        return self.search == FITTED_BOX

    def fitted_trials(self, trials_per_batch_size: int) -> int:
        """The trials of a fitted round (and the non-divergent trials its batch size wants)."""
        return self.trials or max(1, trials_per_batch_size // 2)
