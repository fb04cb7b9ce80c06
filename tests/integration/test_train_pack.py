"""Trials trained for real through the pack trainer (``run_pack``, what each pack task
runs), here in packs of one: on both backends, to the goal, to divergence, re-used."""

import json
import os
import subprocess
import sys

import pytest

from batchscale.core.spec import TrialSpec
from batchscale.store.filesystem import open_root
from batchscale.store.layout import StudyStore
from batchscale.store.profiles import read_step_times
from batchscale.training.evaluation_grid import evaluation_steps
from batchscale.training.packs import run_pack
from batchscale.training.step_timing import TIME_MIN_STEPS
from batchscale.validation import parse_spec
from tests.conftest import StopAfter, host_devices_env, share_datasets, tiny_spec_dict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = """
import json, sys
from batchscale.core.spec import TrialSpec
from batchscale.validation import parse_spec
from batchscale.store.layout import StudyStore
from batchscale.training.packs import run_pack
spec = parse_spec(json.loads(sys.argv[1]))
store = StudyStore(spec.store)
store.register_study(spec)
trial = TrialSpec("tiny", 32, 1, {"learning_rate": 0.05, "momentum": 0.9})
[meta] = run_pack(spec, [trial], store, log=lambda *a: None)
rows = store.read_measurements(spec, trial)
print(json.dumps({"meta": meta, "rows": rows, "tf": "tensorflow" in sys.modules}))
"""


@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
def test_short_trial_on_each_backend(backend, digits_store, tmp_path):
    """Same trainer, same paper optimizer, either backend: a full 60-step trial."""
    root = str(tmp_path / backend)
    os.makedirs(root)
    share_datasets(digits_store, root)
    raw = tiny_spec_dict(root, name="tiny", batch_sizes=[32], backend=backend, max_steps=60,
                         goals=[{"metric": "classification_error", "value": 0.0}])  # unreachable
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(raw)], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    meta, rows = result["meta"], result["rows"]
    assert meta["status"] == "COMPLETE" and meta["stop_reason"] == "budget" and meta["steps"] == 60
    assert meta["backend"] == backend and meta["examples_per_second"] > 0
    assert meta["effective_learning_rate"] == pytest.approx(0.05 / (1 - 0.9))
    assert [r["step"] for r in rows] == evaluation_steps(60, 0.05)
    assert rows[-1]["train/cross_entropy_error"] < 0.5 * rows[0]["train/cross_entropy_error"]
    assert rows[-1]["val/classification_error"] < 0.5
    if backend == "jax":
        assert not result["tf"], "training from in-memory arrays on JAX must not import TensorFlow"


def _spec(digits_store, **changes):
    return parse_spec(tiny_spec_dict(digits_store, **changes))


def run_trial(spec, trial, store, log):
    """One trial as a pack of one: its metadata."""
    [meta] = run_pack(spec, [trial], store, log=log)
    return meta


def test_goal_stops_the_trial_early_and_reuse_does_not_retrain(digits_store):
    spec = _spec(digits_store, name="early", goals=[{"metric": "classification_error", "value": 0.5}])
    store = StudyStore(digits_store)
    store.register_study(spec)
    trial = TrialSpec("early", 16, 1, {"learning_rate": 0.1, "momentum": 0.9})
    meta = run_trial(spec, trial, store, log=lambda *a: None)
    assert meta["status"] == "COMPLETE" and meta["stop_reason"] == "goal" and meta["steps"] < 300
    rows = store.read_measurements(spec, trial)
    assert rows[-1]["val/classification_error"] < 0.5 <= rows[-2]["val/classification_error"]
    metadata_path = f"{store.trial_dir(spec, trial)}/metadata.json"
    before = store.fs.read_text(metadata_path)
    messages = []
    assert run_trial(spec, trial, store, log=messages.append) == meta
    assert "re-used" in messages[0] and store.fs.read_text(metadata_path) == before


def test_divergence_is_data_not_an_exception(digits_store):
    spec = _spec(digits_store, name="diverge")
    store = StudyStore(digits_store)
    store.register_study(spec)
    trial = TrialSpec("diverge", 16, 1, {"learning_rate": 50.0, "momentum": 0.99})
    meta = run_trial(spec, trial, store, log=lambda *a: None)
    assert meta["status"] == "INFEASIBLE" and meta["stop_reason"] == "diverged"
    assert meta["steps"] < 300
    assert store.is_done(spec, trial)


def test_same_trial_same_curve(digits_store, tmp_path):
    """Initialisation, dropout and data order follow the trial's seed."""
    curves = []
    for name in ("det-a", "det-b"):
        spec = _spec(digits_store, name=name, max_steps=30)
        store = StudyStore(digits_store)
        store.register_study(spec)
        trial = TrialSpec(name, 16, 2, {"learning_rate": 0.05, "momentum": 0.9})
        run_trial(spec, trial, store, log=lambda *a: None)
        rows = store.read_measurements(spec, trial)
        curves.append([(r["step"], r["val/cross_entropy_error"]) for r in rows])
    assert curves[0] == curves[1]


def test_an_interrupted_trial_is_trained_again(digits_store):
    """INCOMPLETE (a run cut off mid-trial) is not done: the trial restarts from step 0."""
    spec = _spec(digits_store, name="interrupted", max_steps=20)
    store = StudyStore(digits_store)
    store.register_study(spec)
    trial = TrialSpec("interrupted", 16, 1, {"learning_rate": 0.05, "momentum": 0.9})
    store.write_metadata(spec, trial, {"trial_id": 1, "status": "INCOMPLETE", "steps": 7,
                                       "parameters": trial.parameters})
    store.write_measurements(spec, trial, [{"step": 0}, {"step": 7}])
    meta = run_trial(spec, trial, store, log=lambda *a: None)
    assert meta["status"] == "COMPLETE" and meta["steps"] == 20
    rows = store.read_measurements(spec, trial)
    assert [r["step"] for r in rows] == evaluation_steps(20, 0.05)


@pytest.mark.slow
def test_data_parallel_trial_matches_one_device(digits_store, tmp_path):
    """The trainer splits the global batch over every device (here 4 logical CPUs via
    XLA's host-platform device count, in a fresh process): same curve as on one device."""
    results = {}
    for devices in (1, 4):
        root = str(tmp_path / f"d{devices}")
        os.makedirs(root)
        share_datasets(digits_store, root)
        raw = tiny_spec_dict(root, name="tiny", batch_sizes=[32], max_steps=30,
                             goals=[{"metric": "classification_error", "value": 0.0}])
        env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": ROOT,
               **host_devices_env(devices)}
        out = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(raw)], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        results[devices] = json.loads(out.stdout.strip().splitlines()[-1])
    assert results[1]["meta"]["replicas"] == 1 and results[4]["meta"]["replicas"] == 4
    assert results[4]["meta"]["devices"] == 4 and results[4]["meta"]["trained_together"] == 1
    # a trial times itself; CPU "devices" are not profiled over device counts by the pack
    # (test_the_profile_over_device_counts does it on purpose)
    assert all(read_step_times(open_root(str(tmp_path / f"d{d}")), "tiny") == [] for d in (1, 4))
    one, four = results[1]["rows"], results[4]["rows"]
    assert [r["step"] for r in one] == [r["step"] for r in four]
    for a, b in zip(one, four):
        for key in ("train/cross_entropy_error", "val/cross_entropy_error", "val/classification_error"):
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-5), (a["step"], key)


PROFILE_SCRIPT = """
import faulthandler, json, sys
faulthandler.dump_traceback_later(120, exit=True)  # a hang: its Python stacks, then exit 1
from batchscale.validation import parse_spec
from batchscale.store.layout import StudyStore
from batchscale.store.profiles import read_step_times
from batchscale.training.keras_setup import select_backend
from batchscale.training.step_timing import profile_devices
from batchscale.workloads import get_dataset
from batchscale.workloads.dataset_registry import open_pipeline
spec = parse_spec(json.loads(sys.argv[1]))
store = StudyStore(spec.store)
select_backend("jax")
pipeline = open_pipeline(store, get_dataset("digits"), {})
first = profile_devices(spec, store, pipeline, 32, 4, log=print, accelerators_only=False)
again = profile_devices(spec, store, pipeline, 32, 4, log=print, accelerators_only=False)
on_cpu = profile_devices(spec, store, pipeline, 16, 4, log=print)
print(json.dumps({"first": first, "again": again, "on_cpu": on_cpu,
                  "stored": read_step_times(store.fs, spec.name)}))
"""


@pytest.mark.slow
def test_the_profile_over_device_counts(digits_store, tmp_path):
    """After a data-parallel pack on a pod of 4 devices (here 4 logical CPUs, in a fresh
    process with XLA's threads), batch 32 is timed on every device count that divides it,
    through jax.sharding, once; on CPU devices a pack skips it unless told otherwise.

    Its timing loop dispatches up to 300 all-reduce steps without waiting on them, which
    on 2 busy cores deadlocked XLA:CPU's runtime pool of 4 threads (2 of 4 fresh-clone CI
    runs on 2026-11-27); ``host_devices_env`` sizes that pool so it cannot. Should it
    hang again, its Python stacks are printed after 120 s (faulthandler)."""
    root = str(tmp_path / "p")
    os.makedirs(root)
    share_datasets(digits_store, root)
    raw = tiny_spec_dict(root, name="tiny", batch_sizes=[32])
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": ROOT, **host_devices_env(4)}
    out = subprocess.run([sys.executable, "-c", PROFILE_SCRIPT, json.dumps(raw)], env=env,
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert [r["devices"] for r in result["first"]] == [1, 2, 4]
    assert result["again"] == [] and result["on_cpu"] == []
    assert sorted((r["batch_size"], r["devices"]) for r in result["stored"]) == [(32, 1), (32, 2), (32, 4)]
    assert all(r["seconds_per_step"] > 0 and r["steps"] >= TIME_MIN_STEPS and r["source"] == "probe"
               for r in result["stored"])
    assert "step time at batch size 32 over 4 device(s)" in out.stdout



def test_a_convolutional_pack_on_cpu_steps_once_per_call_and_matches_the_trial_trainer(
        digits_store, tmp_path):
    """On a CPU, XLA runs convolutions inside a compiled loop 4-6x slower than outside
    (benchmarks/README.md), so a CNN pack takes one compiled call per step while an fc pack
    loops in the graph; either way the trial reaches the per-trial trainer's result.

    Evaluated at resolution 0.5 (steps 0, 1, 2, 3, 4, 6, 9, 13, 19, 28, 40): intervals of
    up to 12 steps, so the pack takes several calls between evaluations (at the default
    0.05 every interval up to 40 is one step, and each engine evaluated 41 times)."""
    from batchscale.search.trials import make_trials
    from batchscale.training.keras_setup import seed_keras
    from batchscale.training.trainer import run_trial
    from batchscale.training.vmapped_step import steps_in_graph
    from batchscale.workloads import build_model

    seed_keras(0, "jax")
    assert steps_in_graph(build_model("fc_32", (8, 8, 1), 10, task="classification"))
    assert not steps_in_graph(build_model("resnet_8", (8, 8, 1), 10, task="classification"))

    workload = {"dataset": "digits", "model": "resnet_8", "optimizer": "nesterov_momentum"}
    done = {}
    for how in ("trial", "pack"):
        root = str(tmp_path / how)
        os.makedirs(root)
        share_datasets(digits_store, root)
        spec = parse_spec(tiny_spec_dict(root, workload=workload, batch_sizes=[32],
                                         trials_per_batch_size=1, max_steps=40,
                                         evaluation={"resolution": 0.5, "train_examples": 500}))
        store = StudyStore(root)
        store.register_study(spec)
        [trial] = make_trials(spec)
        if how == "trial":
            run_trial(spec, trial, store, log=lambda *_: None)
        else:
            run_pack(spec, [trial], store, log=lambda *_: None)
        done[how] = store.read_metadata(spec, trial), store.read_measurements(spec, trial)
    (meta, rows), (pack_meta, pack_rows) = done["trial"], done["pack"]
    assert pack_meta["trainer"] == "vmapped" and pack_meta["vmap_width"] == 1
    assert (pack_meta["status"], pack_meta["steps"]) == (meta["status"], meta["steps"])
    assert [r["step"] for r in pack_rows] == [r["step"] for r in rows] == evaluation_steps(40, 0.5)
    assert pack_rows[-1]["val/cross_entropy_error"] == pytest.approx(
        rows[-1]["val/cross_entropy_error"], rel=1e-3)


@pytest.mark.parametrize("stops", [[0], [2, 5]])
def test_the_fit_trainer_checkpoints_on_a_stop_and_resumes_step_for_step(stops, digits_store,
                                                                         tmp_path):
    """The per-trial (``fit``) trainer, used where a pack cannot be vmapped (TensorFlow, a
    data-parallel trial, streamed data): stopped after a few fit calls, it checkpoints and
    raises Stopped; run again it resumes, and its measurements equal an uninterrupted run's."""
    from batchscale.search.trials import make_trials
    from batchscale.store.checkpoints import checkpoint_path
    from batchscale.training.signals import Stopped
    from batchscale.training.trainer import run_trial

    histories = {}
    for how in ("uninterrupted", "stopped"):
        root = str(tmp_path / how)
        os.makedirs(root)
        share_datasets(digits_store, root)
        spec = parse_spec(tiny_spec_dict(root, batch_sizes=[16], trials_per_batch_size=1,
                                         max_steps=300, checkpoint_seconds=1000))
        store = StudyStore(root)
        store.register_study(spec)
        [trial] = make_trials(spec)
        for checks in (stops if how == "stopped" else []):
            with pytest.raises(Stopped):
                run_trial(spec, trial, store, log=lambda *_: None, stop=StopAfter(checks))
            assert store.read_metadata(spec, trial)["status"] == "INCOMPLETE"
            assert store.fs.exists(checkpoint_path(spec, trial))
        meta = run_trial(spec, trial, store, log=lambda *_: None)
        assert meta["trainer"] == "fit" and not store.fs.exists(checkpoint_path(spec, trial))
        histories[how] = (meta["status"], meta["steps"],
                          [{k: v for k, v in r.items() if k != "wall_time"}
                           for r in store.read_measurements(spec, trial)])
    assert histories["stopped"] == histories["uninterrupted"]


def test_an_evaluation_interval_longer_than_a_chunk_buffer_trains_in_pieces(digits_store, tmp_path):
    """With resolution 0.5 evaluations fall at .., 1066, 1599, 2398, 3000: intervals of more
    steps than one compiled chunk holds (512 here) run as several calls."""
    from batchscale.search.trials import make_trials
    from batchscale.training.vmapped_step import chunk_capacity

    root = str(tmp_path / "store")
    os.makedirs(root)
    share_datasets(digits_store, root)
    spec = parse_spec(tiny_spec_dict(root, batch_sizes=[16], trials_per_batch_size=1,
                                     max_steps=3000, evaluation={"resolution": 0.5},
                                     goals=[{"metric": "classification_error", "value": 0.0001}]))
    store = StudyStore(root)
    store.register_study(spec)
    assert chunk_capacity(1, 16) < 2398 - 1599
    [meta] = run_pack(spec, make_trials(spec), store, log=lambda *_: None)
    assert (meta["status"], meta["steps"]) == ("COMPLETE", 3000)
    steps = [r["step"] for r in store.read_measurements(spec, make_trials(spec)[0])]
    assert steps == evaluation_steps(3000, 0.5) and steps[-2:] == [2398, 3000]
