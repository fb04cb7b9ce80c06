"""One pack task's work, whichever pipeline runs it (a study's ``train_pack``, an
experiment's ``train_experiment_pack``): check the workload, re-derive the pack's trials
from the spec and the search rounds in the store, train them, and say what happened."""

from __future__ import annotations

from batchscale.core.spec import PackSpec, StudySpec
from batchscale.search.packs import pack_trials
from batchscale.store.layout import StudyStore
from batchscale.training.pack_summary import PackSummary, summarize_pack
from batchscale.training.packs import run_pack
from batchscale.training.workload_check import check_model_source, check_user_workload


def train_pack_task(spec: StudySpec, pack: dict) -> PackSummary:
    """Train (or re-use, or resume) the trials of ``pack`` (a ``PackSpec`` dict) of the
    study ``spec``; returns what the Kubeflow UI shows of it (``pack_summary``)."""
    check_user_workload(spec, files=False)  # the user's model function: importable here, sound
    descriptor, store = PackSpec.from_dict(pack), StudyStore(spec.store)
    check_model_source(spec, store, record=True)  # the code its finished trials were trained by
    rounds = {b: store.read_rounds(spec, b) for b in descriptor.batch_sizes}
    trials = pack_trials(spec, descriptor, rounds)
    return summarize_pack(spec, descriptor, trials, run_pack(spec, trials, store), store)
