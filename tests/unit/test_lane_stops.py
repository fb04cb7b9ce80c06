"""A SIGTERM that reaches a pack task while its pack holds nothing left to train (its
trials re-used from the store) still stops the task: ``run_pack`` raises ``Stopped``, so a
lane (``pack_task.train_lane_task``) does not go on to train its next pack as if the
signal had never come (SIGKILL would follow within the notice, leaving that pack's
leases held and its progress unsaved)."""

import os
import signal

import pytest

from batchscale.search.trials import make_trials
from batchscale.store.layout import StudyStore
from batchscale.training.packs import run_pack
from batchscale.training.signals import Stopped
from batchscale.validation import parse_spec
from tests.conftest import tiny_spec_dict


def test_a_sigterm_while_a_pack_re_uses_its_trials_stops_the_pack(tmp_path):
    spec = parse_spec(tiny_spec_dict(str(tmp_path), batch_sizes=[16], trials_per_batch_size=2))
    store = StudyStore(spec.store)
    trials = make_trials(spec)
    for trial in trials:  # finished earlier: the pack re-uses them, training nothing
        store.write_metadata(spec, trial, {
            "trial_id": trial.trial_id, "batch_size": trial.batch_size, "status": "COMPLETE",
            "stop_reason": "goal", "steps": 100, "max_steps": spec.max_steps[16]})
    sent = []

    def log(line: str) -> None:
        if "re-used" in line and not sent:  # SIGTERM arrives as the pack reads the store
            sent.append(line)
            os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(Stopped):
        run_pack(spec, trials, store, log)
    assert sent
