"""Train a pack of trials of one batch size in one process (see ``run_pack``).

TEMPORARY sequential body while the vmapped trainer is written; the signature is final.
"""

from __future__ import annotations

from batchscale.core.spec import StudySpec, TrialSpec
from batchscale.store.layout import StudyStore


def run_pack(spec: StudySpec, trials: list[TrialSpec], store: StudyStore, log=print) -> list[dict]:
    """Train (or re-use, or resume) every trial of a pack; return each trial's metadata,
    in the order given. Divergence is a status (INFEASIBLE), never an exception."""
    from batchscale.training.trainer import run_trial

    return [run_trial(spec, trial, store, log) for trial in trials]
