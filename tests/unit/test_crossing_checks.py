"""A crossing file is believed only when its trial's record shows it (``crossing_problem``),
each file checked once; forged crossings on a real race study are
tests/integration/test_faults_derived.py."""

from batchscale.core.spec import TrialSpec
from batchscale.store.crossings import NOT_YET, checked_board, crossing_problem
from batchscale.store.layout import StudyStore
from batchscale.training.trial_lifecycle import finish_trial
from batchscale.validation import default_spec_dict, parse_spec


def _rows(*errors):
    return [{"step": i * 10, "val/classification_error": e, "val/cross_entropy_error": 1.0,
             "train/cross_entropy_error": 1.0} for i, e in enumerate(errors)]


def _store(tmp_path):
    spec = parse_spec({**default_spec_dict(), "store": str(tmp_path), "batch_sizes": [64],
                       "trials_per_batch_size": 4, "max_steps": 100, "protocol": "race",
                       "goals": ["classification_error<0.1"]})
    store = StudyStore(str(tmp_path))
    store.register_study(spec)
    for trial_id, status in ((1, "COMPLETE"), (2, "INFEASIBLE")):  # both beat the goal at 10
        trial = TrialSpec(spec.name, 64, trial_id, {"learning_rate": 0.1})
        finish_trial(store, spec, trial, {"trial_id": trial_id}, _rows(0.5, 0.05), (status, "x"),
                     10, 1000, 1.0, 1.0, lambda *_: None)
    store.write_metadata(spec, TrialSpec(spec.name, 64, 3, {}), {"status": "INCOMPLETE"})
    return spec, store


def test_a_crossing_is_true_only_for_a_complete_trial_whose_measurements_show_it(tmp_path):
    spec, store = _store(tmp_path)
    assert crossing_problem(store, spec, 64, 0, 10, 1) is None
    assert "at step 10, not step 20" in crossing_problem(store, spec, 64, 0, 20, 1)
    assert "INFEASIBLE" in crossing_problem(store, spec, 64, 0, 10, 2)
    assert crossing_problem(store, spec, 64, 0, 10, 3) == NOT_YET  # INCOMPLETE
    assert crossing_problem(store, spec, 64, 0, 10, 4) == NOT_YET  # planned, not started
    assert "not one of batch size 64's trials" in crossing_problem(store, spec, 64, 0, 10, 5)
    assert "1 goal(s)" in crossing_problem(store, spec, 64, 1, 10, 1)
    path = f"{store.batch_dir(spec, 64)}/1/measurements.csv"
    store.fs.write_text(path, store.fs.read_text(path).replace("0.05", "0.5"))  # altered
    assert "does not match metadata.json's record" in crossing_problem(store, spec, 64, 0, 10, 1)


def test_the_board_checks_each_file_once_and_names_a_false_one_once(tmp_path):
    spec, store = _store(tmp_path)
    lines, now = [], [0.0]
    board = checked_board(store, spec, 64, log=lines.append)
    board.clock = lambda: now[0]
    folder = f"{spec.name}/crossings/64"
    for name in ("g0-s20-t1", "g0-s10-t2", "g0-s5-t3", "g0-s30-t1-copy"):
        store.fs.write_bytes(f"{folder}/{name}", b"")
    assert board.earliest() == {}
    assert len(lines) == 4 and all(" ignored: " in line for line in lines), lines
    store.fs.write_bytes(f"{folder}/g0-s10-t1", b"")  # the true one
    reads = []
    read_bytes = store.fs.read_bytes
    store.fs.read_bytes = lambda path: reads.append(path) or read_bytes(path)
    now[0] = 10.0
    assert board.earliest() == {0: 10}
    assert len(lines) == 4  # nothing named twice
    assert [p for p in reads if "/2/" in p] == []  # a verdict is kept: trial 2 not read again
    assert any("/3/" in p for p in reads)  # an unfinished trial is asked again
