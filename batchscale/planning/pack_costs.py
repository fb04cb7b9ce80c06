"""What a pack task pays besides its training steps, measured by ``batchscale plan`` the
way a pack pays it (the estimate's wall time, ``estimate.PackCosts``).

The plan's timing probes (``training.step_timing``) time training steps alone, in long
chunks. A pack task also starts a process and imports the trainer, loads the data, builds
each trial's model, compiles its step, and trains each trial between the evaluations of
its grid in short calls, each followed by an evaluation, its host work and the trial's
writes to the store. On the quickstart (2026-11-26, benchmarks/pack_time_share.py) that
was about half of pack task time, and it is why the plan's wall time fell 1.7x short.
So the plan measures it:

- a fresh process importing what a pack task imports (kfp's executor, Keras on the
  study's backend, the trainer) and building the study's model once (a fresh process
  compiles its initializers once), in this process's environment (``batchscale plan`` runs in a
  local run's task environment: one XLA thread per task where the tasks share the cores);
- ``light_seconds``: the same for a light task (kfp, the round planner, the report);
- one real pack (``training.packs.run_pack``) of one trial at the spec's smallest batch
  size, on the spec's evaluation grid up to ``CALIBRATION_STEPS`` steps, trained to that
  budget (protocol full) in a scratch store that shares the prepared data set: its
  ``compile_seconds``, its set-up (``pack_setup_seconds`` and what ``run_pack`` does
  around it: the model built, the lease, the files written) and, per evaluation, the
  evaluation with the host work and the training call before it (the trial's time
  outside its compiled steps, ``wall_time`` less ``steps x`` the probe's step time, over
  its evaluations).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace

CALIBRATION_STEPS = 300  # the calibration trial's budget (its grid: ~70 evaluations at 5%)
# the most a start-up process may take: a process that hangs (a device another process
# holds, a blocked import) must not hang the plan; its time is then not counted
PROCESS_TIMEOUT = 300.0
# a pack task's process up to its first model: kfp's executor, Keras (lean) on the backend,
# the trainer, one model built (a fresh process compiles its initializers once)
PACK_START = """
import json, sys
import kfp.dsl.executor_main
from batchscale.training.keras_setup import seed_keras, select_backend
a = json.loads(sys.argv[1])
select_backend(a["backend"])
import batchscale.training.packs
from batchscale.workloads import build_model
seed_keras(0, a["backend"])
build_model(a["model"], a["shape"], a["outputs"], task=a["task"], parameters=a["parameters"])
"""
LIGHT_IMPORTS = ("import kfp.dsl.executor_main; import batchscale.rounds.planner; "
                 "import batchscale.analysis.report")


@dataclass(frozen=True)
class PackCosts:
    """Seconds a pack task pays besides ``steps x step time`` (see the module docstring)."""

    startup_seconds: float = 0.0  # per pack task: process, imports, data, compilation
    trial_seconds: float = 0.0  # per trial: its model, its lease and files
    evaluation_seconds: float = 0.0  # per evaluation of one trial, with the call before it
    light_task_seconds: float = 0.0  # per light task (prepare-data, plan-round, aggregate)

    def to_dict(self) -> dict:
        return asdict(self)


def _process_seconds(code: str, *args: str, log=print, what: str = "a process",
                     timeout: float = PROCESS_TIMEOUT) -> float:
    """Wall seconds of a fresh python running ``code`` (this environment); 0 where it
    fails or runs past ``timeout`` seconds (killed): one line says so, and the estimate
    goes on without that part (it was the plan's before it measured pack costs)."""
    tick = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        log(f"pack costs: {what} ran past {timeout:g} s and was stopped; its start-up is not counted")
        return 0.0
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        log(f"pack costs: {what} failed (exit {done.returncode}: "
            f"{lines[-1] if lines else 'no message'}); its start-up is not counted")
        return 0.0
    return time.perf_counter() - tick


def measure_pack_costs(spec, store, pipeline, step_time: float, log=print) -> PackCosts:
    """Measure ``PackCosts`` for ``spec`` (module docstring); ``pipeline``: its input
    pipeline; ``step_time``: the probe's seconds per step at the spec's smallest batch size."""
    import json

    from batchscale.core.protocols import FULL
    from batchscale.core.spec import TrialSpec
    from batchscale.store.layout import StudyStore
    from batchscale.training.packs import run_pack
    from batchscale.training.step_timing import probe_parameters
    from batchscale.workloads.dataset_registry import dataset_for
    from batchscale.workloads.prepare import prepare_dataset

    params = probe_parameters(spec, 0.25)
    model = {"backend": spec.backend, "model": spec.workload.model, "task": pipeline.task,
             "shape": list(pipeline.input_shape) if pipeline.input_shape is not None else None,
             "outputs": pipeline.num_outputs, "parameters": params}
    pack_imports = _process_seconds(PACK_START, json.dumps(model), log=log,
                                    what="a pack task's start-up (imports, first model)")
    light = _process_seconds(LIGHT_IMPORTS, log=log, what="a light task's start-up")
    b = min(spec.batch_sizes)
    steps = min(spec.max_steps[b], CALIBRATION_STEPS)
    with tempfile.TemporaryDirectory(prefix="batchscale-plan-") as scratch:
        _share_data(store, spec, scratch)
        scratch_spec = replace(spec, store=scratch, batch_sizes=(b,), max_steps={b: steps},
                               trials_per_batch_size=1, protocol=FULL)
        scratch_store = StudyStore(scratch)
        prepare_dataset(scratch_store, dataset_for(spec.workload), _quiet)  # shared: re-used
        trial = TrialSpec(spec.name, b, 1, params)
        tick = time.perf_counter()
        [meta] = run_pack(scratch_spec, [trial], scratch_store, log=_quiet)
        pack_seconds = time.perf_counter() - tick
    evaluations = max(1, int((meta.get("measurements") or {}).get("rows") or 1))
    wall, compiled = float(meta["wall_time"]), float(meta.get("compile_seconds") or 0.0)
    setup = float(meta.get("pack_setup_seconds") or 0.0)  # its model built, its life started
    per_evaluation = max(0.0, wall - compiled - int(meta["steps"]) * step_time) / evaluations
    around = max(0.0, pack_seconds - wall - setup)  # data to the device, leases, final writes
    costs = PackCosts(startup_seconds=pack_imports + around + compiled, trial_seconds=setup,
                      evaluation_seconds=per_evaluation, light_task_seconds=light)
    log(f"pack costs: a pack task's process, imports and first model {pack_imports:.2g} s, data and store "
        f"{around:.2g} s, compilation {compiled:.2g} s; per trial {setup:.2g} s; per evaluation "
        f"{1000 * per_evaluation:.3g} ms (a pack of one trial, {meta['steps']} steps, "
        f"{evaluations} evaluations); a light task {light:.2g} s")
    return costs


def _share_data(store, spec, scratch: str) -> None:
    """Give the scratch store the prepared data set without copying its bytes where the
    study's store is a local folder (hard links; else ``prepare_dataset`` prepares it)."""
    import shutil

    source = os.path.join(str(store.root), "datasets")
    if "://" in str(store.root) or not os.path.isdir(source):
        return
    try:
        shutil.copytree(source, os.path.join(scratch, "datasets"), copy_function=os.link)
    except OSError:  # another file system: copy the bytes
        shutil.rmtree(os.path.join(scratch, "datasets"), ignore_errors=True)
        shutil.copytree(source, os.path.join(scratch, "datasets"))


def _quiet(*_) -> None:
    pass
