"""One commit point per trial (``training/trial_lifecycle.py``): a crash right after ANY
write of a trial's life leaves it finished, or resumable to the result an uninterrupted
run records; and docs/store.md's repair recipes, done exactly as written, end with the
uninterrupted result.

The crash: the store's storage is wrapped so that the process "dies" (``_Killed``, a
BaseException nothing in a pack catches, as test_pack_faults.py does) right before or
after one named write of the trial: its start's INCOMPLETE metadata, a checkpoint and the
flush after it (measurements, metadata), the checkpoint its budget stop keeps, its final
measurements, its goal crossing, its final metadata (the commit) and the removal of its
spent checkpoint. Then the same pack runs again, and every trial's history (status,
stop reason, steps, every measurement row but its wall time), the checkpoints kept and
the crossings published must equal the uninterrupted run's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from batchscale.core.names import DONE_STATUSES
from batchscale.search.trials import make_trials
from batchscale.store.checkpoints import checkpoint_path, decode_checkpoint, encode_checkpoint
from batchscale.store.crossings import crossings_dir
from batchscale.store.layout import StudyStore
from batchscale.training.packs import run_pack
from batchscale.training.trainer import run_trial
from batchscale.validation import parse_spec
from tests.conftest import share_datasets, tiny_spec_dict

BATCH, BUDGET = 16, 30
# "budget": one trial that never reaches its goal, stopped by its budget (it keeps its
# checkpoint); "goal": one trial that beats its goal under the race protocol (it publishes
# its crossing and removes its checkpoint).
SPECS = {
    "budget": dict(goals=[{"metric": "classification_error", "value": 0.0}]),
    "goal": dict(protocol="race", max_steps=60,
                 goals=[{"metric": "classification_error", "value": 0.25}],
                 search_space={"learning_rate": {"scale": "log", "min": 0.08, "max": 0.0801}}),
}


class _Killed(BaseException):
    """Stands for kill -9 at one write: no handler in a pack catches it."""


def quiet(*_):
    pass


def _spec(root: str, case: str):
    changes = {"name": "commit", "batch_sizes": [BATCH], "trials_per_batch_size": 1,
               "max_steps": BUDGET, "checkpoint_seconds": 0.001, **SPECS[case]}
    return parse_spec(tiny_spec_dict(root, **changes))


def _prepared(digits_store: str, root: str, case: str):
    os.makedirs(root)
    share_datasets(digits_store, root)
    spec, store = _spec(root, case), StudyStore(root)
    store.register_study(spec)
    return spec, store


def _train(spec, store, engine: str) -> None:
    [trial] = make_trials(spec)
    if engine == "pack":
        run_pack(spec, [trial], store, log=quiet)
    else:
        run_trial(spec, trial, store, log=quiet)


def _history(spec, store) -> dict:
    """What an uninterrupted run leaves: per trial its outcome and rows (no wall times),
    whether its checkpoint is kept, and the crossings published."""
    out = {}
    for trial in make_trials(spec):
        meta = store.read_metadata(spec, trial)
        rows = [{k: v for k, v in row.items() if k != "wall_time"}
                for row in store.read_measurements(spec, trial)]
        out[trial.trial_id] = ({k: meta.get(k) for k in ("status", "stop_reason", "steps", "max_steps")},
                               rows, store.fs.exists(checkpoint_path(spec, trial)))
    out["crossings"] = sorted(store.fs.list_files(crossings_dir(spec.name, BATCH)))
    return out


class CrashingStorage:
    """A store's storage that dies right ``when`` ("before"/"after") the first write of
    kind ``event`` of the study's trial: every other call goes to ``fs``."""

    def __init__(self, fs, spec, store, when: str, event: str):
        [trial] = make_trials(spec)
        self.fs, self.when, self.event = fs, when, event
        folder = store.trial_dir(spec, trial)
        self.metadata, self.measurements = f"{folder}/metadata.json", f"{folder}/measurements.csv"
        self.checkpoint = checkpoint_path(spec, trial)
        self.crossings = crossings_dir(spec.name, BATCH) + "/"
        self.budget = spec.max_steps[BATCH]
        self.seen: list[str] = []  # the trial's writes so far, by kind

    def __getattr__(self, name):
        return getattr(self.fs, name)

    def _kind(self, path: str, data: bytes | None) -> str | None:
        if path == self.metadata:
            status = json.loads(data)["status"]
            if status in DONE_STATUSES:
                return "final-metadata"
            return "flush-metadata" if "start-metadata" in self.seen else "start-metadata"
        if path == self.measurements:
            return "measurements"
        if path == self.checkpoint and data is None:
            return "checkpoint-delete"
        if path == self.checkpoint:
            state = decode_checkpoint(data).state
            at_budget = state["step"] == self.budget and state["rows"][-1]["step"] == self.budget
            return "final-checkpoint" if at_budget else "checkpoint"
        return "crossing" if path.startswith(self.crossings) else None

    def _write(self, path: str, data: bytes | None, write) -> None:
        kind = self._kind(path, data)
        due = kind == self.event and kind not in self.seen
        if due and self.when == "before":
            raise _Killed(f"before {kind}")
        write()
        if kind is not None:
            self.seen.append(kind)
        if due:
            raise _Killed(f"after {kind}")

    def write_bytes(self, path: str, data: bytes) -> None:
        self._write(path, data, lambda: self.fs.write_bytes(path, data))

    def write_text(self, path: str, text: str) -> None:
        self.write_bytes(path, text.encode("utf-8"))

    def delete(self, path: str) -> None:
        if path == self.checkpoint and not self.fs.exists(path):
            return self.fs.delete(path)
        self._write(path, None, lambda: self.fs.delete(path))


@pytest.fixture(scope="module")
def uninterrupted(digits_store, tmp_path_factory):
    """(case, engine) -> the uninterrupted run's history (trained on first use)."""
    cache = {}

    def get(case: str, engine: str) -> dict:
        if (case, engine) not in cache:
            root = str(tmp_path_factory.mktemp(f"uninterrupted-{case}-{engine}") / "store")
            spec, store = _prepared(digits_store, root, case)
            _train(spec, store, engine)
            cache[case, engine] = _history(spec, store)
        return cache[case, engine]
    return get


# Every write a trial makes, in the order of its life; "before X" is "after the write
# before X" where that one has no kind of its own (its final measurements).
CRASHES = [
    ("budget", "after", "start-metadata"), ("budget", "after", "checkpoint"),
    ("budget", "after", "measurements"), ("budget", "after", "flush-metadata"),
    ("budget", "after", "final-checkpoint"), ("budget", "before", "final-metadata"),
    ("budget", "after", "final-metadata"),
    ("goal", "before", "crossing"), ("goal", "after", "crossing"),
    ("goal", "after", "final-metadata"), ("goal", "after", "checkpoint-delete"),
]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("engine, case, when, event",
                         [("pack", *c) for c in CRASHES]
                         + [("fit", "budget", "after", "final-checkpoint"),
                            ("fit", "budget", "before", "final-metadata")])
def test_a_crash_after_any_write_of_a_trial_resumes_to_the_uninterrupted_result(
        engine, case, when, event, digits_store, uninterrupted, tmp_path):
    reference = uninterrupted(case, engine)
    spec, store = _prepared(digits_store, str(tmp_path / "store"), case)
    store.fs = crashing = CrashingStorage(store.fs, spec, store, when, event)
    with pytest.raises(_Killed, match=f"^{when} {event}$"):
        _train(spec, store, engine)
    assert crashing.seen, "the trial wrote nothing before the crash"
    store = StudyStore(spec.store)  # a new process, the same store
    [trial] = make_trials(spec)
    assert store.read_metadata(spec, trial)["status"] in ("INCOMPLETE", *DONE_STATUSES)
    _train(spec, store, engine)
    assert _history(spec, store) == reference
    _train(spec, store, engine)  # and once more: re-used as it is, nothing changes
    assert _history(spec, store) == reference


# ---- docs/store.md's repair recipes, as written ---------------------------------------

def _batchscale(*args: str, cwd) -> subprocess.CompletedProcess:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return subprocess.run([sys.executable, "-m", "batchscale.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": root})


def _cli_spec(root: str) -> dict:
    """Three trials at one batch size: one reaches its goal, two stop at their budget."""
    return tiny_spec_dict(root, name="repair", batch_sizes=[BATCH], trials_per_batch_size=3,
                          max_steps=60, goals=[{"metric": "classification_error", "value": 0.25}],
                          search_space={"learning_rate": {"scale": "log", "min": 0.001, "max": 0.5}})


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_repair_recipes_as_docs_store_md_writes_them(digits_store, tmp_path):
    """"To repair a trial, delete its folder and run the same study again": a trial that
    reached its goal and one stopped at its budget (whose checkpoint stays) deleted, and a
    third whose checkpoint was replaced by a copy of another trial's before its folder was
    deleted. `batchscale run --local` with the same spec then ends with the uninterrupted
    trials, exit 0, the copied checkpoint named and never restored. (The first run trains
    in this process, with the packs `run --local` runs, to save a CLI run.)"""
    root = str(tmp_path / "store")
    os.makedirs(root)
    share_datasets(digits_store, root)
    spec, store = parse_spec(_cli_spec(root)), StudyStore(root)
    store.register_study(spec)
    trials = make_trials(spec)
    run_pack(spec, trials, store, log=quiet)
    reference = _history(spec, store)
    stops = {t.trial_id: reference[t.trial_id][0]["stop_reason"] for t in trials}
    goal = next(t for t in trials if stops[t.trial_id] == "goal")
    budget = [t for t in trials if stops[t.trial_id] == "budget"]
    assert len(budget) == 2, stops

    victim, other = budget[1], budget[0]  # another trial's checkpoint, copied in
    store.fs.write_bytes(checkpoint_path(spec, victim), store.fs.read_bytes(checkpoint_path(spec, other)))
    for trial in (goal, *budget):  # the recipe, as written: delete its folder, run again
        shutil.rmtree(os.path.join(root, store.trial_dir(spec, trial)))
    spec_file = tmp_path / "repair.yaml"
    spec_file.write_text(yaml.safe_dump(_cli_spec(root)))
    again = _batchscale("run", "--local", str(spec_file), cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "trials 3/3 done" in again.stdout and "unfinished" not in again.stdout
    assert _history(spec, store) == reference
    logs = "".join(p.read_text() for p in (tmp_path / ".batchscale" / "logs").glob("repair-*.log"))
    named = (f"checkpoint {store.url(checkpoint_path(spec, victim))} is not this trial's "
             f"(trial_id {other.trial_id} there, {victim.trial_id} here); ignoring it")
    assert named in logs
    assert f"trial {BATCH}/{other.trial_id}: resumed from its checkpoint at step 60, its budget" in logs


def test_a_checkpoint_past_the_budget_is_ignored_never_looped_on(digits_store, tmp_path):
    """A trial's own checkpoint rewritten to a step past its budget (as a checkpoint of a
    larger budget would be), its folder deleted: before, every run resumed it there,
    trained nothing and left it INCOMPLETE; now it is named, ignored, trained anew."""
    spec, store = _prepared(digits_store, str(tmp_path / "store"), "budget")
    _train(spec, store, "pack")
    reference = _history(spec, store)
    [trial] = make_trials(spec)
    path = checkpoint_path(spec, trial)
    kept = decode_checkpoint(store.fs.read_bytes(path))
    store.fs.write_bytes(path, encode_checkpoint(kept.arrays, {
        **kept.state, "step": BUDGET + 7, "identity": {**kept.state["identity"], "max_steps": BUDGET + 10}}))
    shutil.rmtree(os.path.join(spec.store, store.trial_dir(spec, trial)))
    lines = []
    run_pack(spec, [trial], store, log=lines.append)
    assert f"checkpoint {store.url(path)} is not this trial's (written under a budget of " \
           f"{BUDGET + 10} steps, more than this trial's {BUDGET}); ignoring it, the trial " \
           "starts from step 0" in lines
    assert _history(spec, store) == reference


def test_a_trial_an_engine_cannot_finish_fails_in_one_line_naming_it(tmp_path):
    """The guard behind every engine: nothing left to train and no outcome (a trial that
    would be resumed to the same place by every run) is an error naming the trial and its
    checkpoint, never an unfinished trial left behind with exit 0."""
    from batchscale.training.trial_lifecycle import StuckTrial, TrialLife

    spec = _spec(str(tmp_path / "store"), "budget")
    store = StudyStore(spec.store)
    [trial] = make_trials(spec)
    life = TrialLife(store, spec, trial, dict(trial.parameters), {"status": "INCOMPLETE"}, quiet)
    life.record({"step": 0, "train/cross_entropy_error": 2.3, "val/classification_error": 0.9})
    life.trained(20, 0.1, True)  # trained to 20, not evaluated there: no outcome
    assert life.outcome() is None
    with pytest.raises(StuckTrial) as stuck:
        life.outcome(final=True)
    assert str(stuck.value) == (
        f"trial {BATCH}/1: nothing left to train at step 20 of {BUDGET}, yet unfinished (last "
        f"evaluated at step 0); its checkpoint {store.url(checkpoint_path(spec, trial))} cannot "
        "finish it: delete that file and run the same study again")
