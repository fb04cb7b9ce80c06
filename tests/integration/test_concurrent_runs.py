"""Two runs of one study on one store at once train each trial exactly once (issue 13).

Two pack processes (``tests.integration.pack_driver``, as a second ``run --local`` or a
retried pod would start them) train the same pack at the same time, on a local store and
on the GCS emulator. Each trial must start training exactly once in both processes'
logs together (the trial leases of ``batchscale.store.leases``); both processes end
with every trial finished, and no lease is left in the store.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter

import pytest

from batchscale.search.trials import make_trials
from batchscale.store.layout import StudyStore
from batchscale.store.leases import LEASES_DIR
from batchscale.validation import parse_spec
from batchscale.workloads.prepare import prepare_dataset
from tests.conftest import tiny_spec_dict

BATCH = 16
STARTS = re.compile(rf"^trial {BATCH}/(\d+): (starts at step 0|resumed from its checkpoint)", re.M)


@pytest.mark.parametrize("where", ["local", "gcs"])
def test_two_runs_at_once_train_each_trial_once(where, tmp_path, request):
    root = request.getfixturevalue("gcs_root") if where == "gcs" else str(tmp_path / "store")
    spec = parse_spec(tiny_spec_dict(
        root, name="twice", batch_sizes=[BATCH], trials_per_batch_size=4, max_steps=400,
        goals=[{"metric": "classification_error", "value": 0.06}]))
    store = StudyStore(root)
    prepare_dataset(store, "digits", log=lambda *_: None)
    store.register_study(spec)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec.to_dict()))

    runs = [subprocess.Popen([sys.executable, "-m", "tests.integration.pack_driver", str(spec_file),
                              str(BATCH), "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True) for _ in range(2)]
    outputs = [run.communicate(timeout=300)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs

    starts = Counter(int(m[0]) for out in outputs for m in STARTS.findall(out))
    trials = make_trials(spec)
    assert starts == Counter({t.trial_id: 1 for t in trials}), outputs
    for trial in trials:
        assert store.read_metadata(spec, trial)["status"] in ("COMPLETE", "INFEASIBLE")
    assert store.fs.list_files(f"{spec.name}/{LEASES_DIR}", recursive=True) == []
