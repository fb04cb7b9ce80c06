"""Whether a trial folder of our study is one of the trials its spec and rounds plan.

A trial's folder is source data, but which trials exist is not the folder's to say: the
spec and each batch size's search rounds (study.json, checked against their derivation by
``batchscale.rounds.derivation`` whenever the study runs) give every trial id. A folder
outside them (a trial copied in under a new id, one an older run trained from a forged
round) would otherwise count towards steps to result silently. The study reader names it
as damaged and leaves it out; the paper's layout has no spec and is not checked.

Only the id is checked, not the metaparameters the round gives that id: a trial whose
``parameters`` were edited in its metadata.json is still believed (the tests' synthetic
stores write chosen parameters, and no crash or copy produces such a file).
"""

from __future__ import annotations

from batchscale.analysis.reading.completeness import id_ranges
from batchscale.core.rounds import read_rounds
from batchscale.core.spec import StudySpec


def planned_ids(spec: StudySpec, study_json: dict) -> set[int] | None:
    """The trial ids a batch size's rounds hold; None where the rounds cannot be read (the
    reader then checks nothing: what it cannot derive it does not judge)."""
    try:
        return {i for r in read_rounds(study_json, spec) for i in r.trial_ids}
    except ValueError:
        return None


def unplanned(planned: set[int] | None, trial_id: int) -> str | None:
    """Why trial ``trial_id`` is not one of the planned trials (None: it is)."""
    if planned is None or trial_id in planned:
        return None
    return (f"is trial {trial_id}, not one of the trials its batch size's search rounds hold "
            f"({id_ranges(planned)})")
