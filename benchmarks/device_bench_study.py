"""The device benchmark's short real study: the quickstart spec (trimmed in smoke mode)
run in this process through the code the pipeline's tasks run, without kfp.local (kfp is
not on the accelerator machine): ``prepare_dataset`` (prepare-data), for each stage
``plan_stage`` (plan-round) and ``run_pack`` for each of its packs (train-pack, one pack
after another here, where the pipeline runs ``parallelism`` at once), then
``settle_budgets`` and ``report_study`` (aggregate), into a scratch store. Its answer is
read from the report's analysis: B* with its interval, and steps to result per batch size.

The study keeps to its deadline the way a pack task keeps to a preemption notice: a timer
sends this process SIGTERM at the deadline, the pack checkpoints and stops (``Stopped``),
and the study is recorded as stopped, with what it had finished.
"""

from __future__ import annotations

import os
import signal
import threading
import time

SMOKE_CHANGES = {"batch_sizes": [32, 256, 2048], "trials_per_batch_size": 3,
                 "max_steps": {32: 400, 256: 200, 2048: 100}, "max_rounds": 1}


def study_spec(root: str, smoke: bool):
    """The quickstart spec into the scratch store ``root``; trimmed when ``smoke``."""
    from batchscale.validation import default_spec_dict, parse_spec

    raw = {**default_spec_dict(), "store": root, **(SMOKE_CHANGES if smoke else {})}
    return parse_spec(raw)


def what(spec, smoke: bool) -> str:
    trimmed = "trimmed " if smoke else ""
    return (f"{trimmed}quickstart, {len(spec.batch_sizes)} batch sizes x "
            f"{spec.trials_per_batch_size} trials, up to {spec.max_rounds} round(s), protocol "
            f"{spec.protocol.name}; the pipeline's own code in one process, without kfp.local")


def run_study(root: str, smoke: bool, left, log) -> dict:
    """Run the study (module docstring) within ``left()`` seconds: its record."""
    from batchscale.training.signals import Stopped

    spec = study_spec(root, smoke)
    record = {"what": what(spec, smoke), "spec": {"batch_sizes": list(spec.batch_sizes),
                                                 "trials_per_batch_size": spec.trials_per_batch_size,
                                                 "max_rounds": spec.max_rounds}}
    if left() <= 0:
        return {**record, "status": "skipped", "why": "no budget left"}
    stop_at = threading.Timer(max(left(), 0.0), os.kill, (os.getpid(), signal.SIGTERM))
    previous = signal.signal(signal.SIGTERM, _stop_between_packs)
    stop_at.start()
    progress = {"packs": 0, "trials_done": 0}
    try:
        return {**record, **_stages(spec, log, progress), "status": "finished"}
    except (Stopped, _BetweenPacks) as stop:
        said = getattr(stop, "message", None) or str(stop)
        return {**record, **progress, "status": "stopped",
                "why": f"at its deadline, after {progress['packs']} pack(s) and "
                       f"{progress['trials_done']} trial(s) ({said})"}
    finally:
        stop_at.cancel()
        signal.signal(signal.SIGTERM, previous)


class _BetweenPacks(BaseException):
    """SIGTERM outside a pack (where ``run_pack`` does not catch it); a BaseException, as
    KeyboardInterrupt, so that no ``except Exception`` of the code it interrupts (the
    report's) swallows it."""


def _stop_between_packs(signum, frame):
    raise _BetweenPacks("SIGTERM between packs")


def _stages(spec, log, progress: dict) -> dict:
    from batchscale.core.presets import DEFAULT as DEFAULT_PRESET
    from batchscale.pipelines.placement import pack_size_for
    from batchscale.rounds.planner import plan_stage, planned_trials
    from batchscale.search.packs import pack_trials
    from batchscale.store.layout import StudyStore
    from batchscale.training.keras_setup import on_cpu, select_backend
    from batchscale.training.packs import run_pack
    from batchscale.training.workload_check import check_model_source, check_user_workload
    from batchscale.workloads.dataset_registry import dataset_for
    from batchscale.workloads.prepare import prepare_dataset

    select_backend(spec.backend)
    preset = DEFAULT_PRESET if on_cpu() else "nvidia-a100-80gb"  # any one-accelerator preset
    tick = time.perf_counter()
    store = StudyStore(spec.store)
    prepare_dataset(store, dataset_for(spec.workload), log=log)
    data_seconds = time.perf_counter() - tick
    plan_seconds = pack_seconds = 0.0
    size = pack_size_for(spec, preset)
    for stage in range(1, spec.max_rounds + 1):
        started = time.perf_counter()
        planned = plan_stage(spec, store, stage, size, log)
        plan_seconds += time.perf_counter() - started
        for pack in planned:
            started = time.perf_counter()
            check_user_workload(spec, files=False)  # what the pack task checks first
            check_model_source(spec, store, record=True)
            # as components/train_pack: every batch size's rounds (a mixed pack holds several)
            trials = pack_trials(spec, pack, {b: store.read_rounds(spec, b) for b in pack.batch_sizes})
            run_pack(spec, trials, store, log=log)
            pack_seconds += time.perf_counter() - started
            progress["packs"] += 1
            progress["trials_done"] += len(trials)
    started = time.perf_counter()
    store.settle_budgets(spec, planned_trials(spec, store))
    answer = _answer(spec)
    report_seconds = time.perf_counter() - started
    return {"preset": preset, "pack_size": size, "packs": progress["packs"],
            "wall_seconds": time.perf_counter() - tick, "data_seconds": data_seconds,
            "plan_seconds": plan_seconds, "pack_seconds": pack_seconds,
            "report_seconds": report_seconds, **answer}


def _answer(spec) -> dict:
    """What the aggregate step's report says: B*, steps to result, trials and statuses."""
    from batchscale.analysis.report import report_study

    analysis, _ = report_study(f"{spec.store.rstrip('/')}/{spec.name}")
    goal = analysis.study.goals[0].label
    fit = analysis.fits[goal]
    steps = analysis.steps[(analysis.steps["goal"] == goal) & (analysis.steps["split"] == "val")]
    metadata = analysis.study.metadata
    b_star = (f"{fit.b_star.value:.0f} [{fit.b_star.low:.0f}, {fit.b_star.high:.0f}]"
              if fit.fitted and fit.b_star is not None else f"not fitted ({fit.reason})")
    return {"b_star": b_star, "trials": int(len(metadata)),
            "statuses": ", ".join(f"{n} {s}" for s, n in
                                  metadata["status"].value_counts().sort_index().items()),
            "trained_steps": int(metadata["steps"].sum()),
            "steps_to_result": ", ".join(
                f"{int(r['batch_size'])}: {_steps(r['steps_to_result'])}" for _, r in steps.iterrows()),
            "answer": [text for _, _, text in analysis.answer.items]}


def _steps(value) -> str:
    try:
        return f"{float(value):,.0f}" if value == value else "-"
    except (TypeError, ValueError):
        return str(value)
