"""The pack mode chosen by measurement: a pack's trials vmapped together, or taking turns.

A pack of trials of one batch size can share the device two ways (``pack_loop``):

- **vmapped**: ``width`` trials (the pack's trials, at most the workload's
  ``pack_capacity``) in one compiled step vmapped over them;
- **turns**: one trial at a time through one compiled width-1 step, group after group
  (a pack still pays imports, data loading and compilation once).

Which is faster depends on the device and the model, not on a rule: a GPU leaves one
small trial's step mostly idle (FC-128-128 at batch 128 on an H100: 15.7x the trial-steps
of one trial with 64 vmapped), while two CPU cores gain little or nothing. So at a pack's
start (``choose_pack_mode``) a short probe times both (``probe_rates``): trial-steps per
second of ``width`` trials vmapped against one trial at width 1, copies of the pack's
first trials through the pack's own ``vmapped_step.PackStep`` (so the chosen mode's
compilation is the pack's), timed by ``step_timing.timed_steps``, turns and vmapped
interleaved twice (A, B, A, B) against a busy machine's drift, and one evaluation of each
(a vmapped group evaluates its trials in one call, turns evaluate one trial at a time;
vmapped's is skipped where even free evaluations would leave it short of the margin),
weighed by the evaluations the trial's grid makes over its budget: the rate compared is
of a whole trial, training and evaluation. Vmapped is chosen only when it is at least
``MARGIN`` times faster (``choose``).

The choice is cached in the study's profile (``store.profiles.write_pack_mode``,
``profile/pack_modes/``), per (model, batch size, device kind, precision, width): a later
pack of the same key reads it instead of probing, and packs that probe at the same time
adopt the one written first (``claim_pack_mode``), so every pack of a study, and a study
run again, trains in the mode its first pack chose. Two fresh runs of one study on
different machines (or on one machine under different load) may choose differently, and
XLA rounds a vmapped step differently from a width-1 one, so their numbers can differ in
the low bits; keeping the store's ``profile/pack_modes/`` keeps the choice.

A trial resumed from a checkpoint keeps the width its group had (``pack_groups``): a
checkpoint's width wins over a new choice. Each trial's metadata.json says which mode it
trained in and what decided it (``mode_metadata``). ``BATCHSCALE_PACK_MODE=turns`` (or
``vmapped``) fixes the mode without measuring (``forced_mode``; the test suite sets turns).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from batchscale.core.spec import StudySpec, TrialSpec

VMAPPED, TURNS = "vmapped", "turns"
# Vmapped only when at least this many times faster than turns (the rates of whole trials,
# evaluation included), for two measured reasons (benchmarks/README.md, "Pack mode"):
# under a protocol that stops trials early, a vmapped group's finished trials keep their
# slots training until its last trial ends: in the quickstart (goal protocol, 10-15 trials
# per batch size) the trials used 47-63% of the trial-steps a vmapped group of them would
# train (sum of steps / (trials x the longest)), so vmapped pays only beyond about 2x; and
# on a busy CPU repeated probes of one key differed up to 2x (0.82 and 1.68 at batch 8).
# A GPU's measured gain is 3-9x, far above.
MARGIN = 2.0
PROBE_SECONDS = 0.1  # timed training per mode and round (two rounds, interleaved) ...
PROBE_MIN_STEPS = 1  # ... and at least this many steps per round (after one warm-up step)
PROBE_MAX_STEPS = 300
# Set to "turns" or "vmapped" to skip the measurement (a fixed mode, e.g. for tests that
# compare stores run apart); "measure" or unset: measured.
MODE_VARIABLE = "BATCHSCALE_PACK_MODE"
_FORCED = ("turns", "vmapped", "measure")


@dataclass(frozen=True)
class PackMode:
    """A pack's mode: ``width`` trials per vmapped group (1: turns); ``source`` what
    decided it ("probe", "profile": a cached record, "given": a caller's ``width``, "one
    trial": nothing to vmap, ``MODE_VARIABLE``: fixed by the environment, "probe
    failed": turns, "checkpoint": every trial resumes at its checkpoint's width, nothing
    to choose); ``record`` and ``path`` the pack-mode record that did."""

    mode: str
    width: int
    source: str
    record: dict | None = None
    path: str | None = None


def forced_mode() -> str | None:
    """The mode ``MODE_VARIABLE`` fixes (None: measured); a value it does not allow is
    refused in one line (``packs.run_pack`` checks it before the pack touches the store)."""
    value = os.environ.get(MODE_VARIABLE, "").strip().lower()
    if value and value not in _FORCED:
        raise ValueError(f"{MODE_VARIABLE}: {value!r} is not a pack mode; allowed: "
                         f"{', '.join(_FORCED)} (measure, the default, when unset)")
    return value if value in (TURNS, VMAPPED) else None


def choose(rates: dict, margin: float = MARGIN) -> str:
    """``VMAPPED`` when its rate is at least ``margin`` times the rate of ``TURNS``, else
    ``TURNS`` (also when either is missing)."""
    vmapped, turns = rates.get(VMAPPED), rates.get(TURNS)
    if vmapped is None or turns is None:
        return TURNS
    return VMAPPED if vmapped >= margin * turns else TURNS


def pack_width(spec: StudySpec, trials: list[TrialSpec]) -> int:
    """How many of ``trials`` would train vmapped at once: all of them, at most the
    workload's ``pack_capacity``."""
    from batchscale.workloads.defaults import pack_capacity

    return max(1, min(len(trials), pack_capacity(spec.workload.dataset, spec.workload.model)))


def mode_key(spec: StudySpec, batch_size: int, width: int) -> dict:
    """The fields that say what a pack-mode record is of (``profiles.pack_mode_key``)."""
    from batchscale.training.keras_setup import hardware

    return {"model": spec.workload.model, "batch_sizes": [int(batch_size)], "width": int(width),
            "device_kind": hardware(1)["device_kind"], "precision": spec.workload.precision}


def choose_pack_mode(spec: StudySpec, store, trials: list[TrialSpec], probe, log=print,
                     width: int | None = None) -> PackMode:
    """The mode of a pack of ``trials`` (one batch size): ``width`` when given; else the
    study's cached record of its key; else a probe's choice (``probe(width)``: a
    ``probe_rates`` dict), written to the profile unless a pack of the same key that
    probed at the same time wrote its choice first (then that one: ``claim_pack_mode``).
    A failed probe is logged and gives turns (nothing written: the next pack probes
    again)."""
    from batchscale.store.profiles import (
        PACK_MODES,
        claim_pack_mode,
        pack_mode_key,
        pack_mode_name,
        read_pack_modes,
    )

    if width is not None:
        return PackMode(VMAPPED if width > 1 else TURNS, max(1, width), "given")
    wide = pack_width(spec, trials)
    if wide <= 1:
        return PackMode(TURNS, 1, "one trial")
    forced = forced_mode()
    if forced is not None:
        return PackMode(forced, wide if forced == VMAPPED else 1, MODE_VARIABLE)
    batch_size = trials[0].batch_size
    key = mode_key(spec, batch_size, wide)
    for record in read_pack_modes(store.fs, spec.name, log):
        if pack_mode_key(record) == pack_mode_key(key):
            if record["chosen"] not in (VMAPPED, TURNS):  # another writer's modes: not ours
                log(f"pack-mode record {PACK_MODES}/{pack_mode_name(record)} chose "
                    f"{record['chosen']!r:.40}, not {VMAPPED} or {TURNS}; measured again")
                break
            log(f"pack mode at batch size {batch_size}: {record['chosen']} "
                f"(the study's profile, measured {record['measured']})")
            return _mode(record, "profile", f"{PACK_MODES}/{pack_mode_name(record)}")
    try:
        measured = probe(wide)
    except Exception as err:  # noqa: BLE001  (a probe is not worth failing the pack)
        log(f"pack-mode probe at batch size {batch_size} failed, the pack takes turns: "
            f"{type(err).__name__}: {err}")
        return PackMode(TURNS, 1, "probe failed")
    record = {**key, **measured, "margin": MARGIN, "chosen": choose(measured["rates"], MARGIN)}
    try:  # a pack of this key that probed at the same time and wrote first decides
        path, first = claim_pack_mode(store.fs, spec.name, record,
                                      lambda there: there["chosen"] in (VMAPPED, TURNS))
    except ValueError as err:  # outside the bounds every reader applies: not written
        log(f"pack-mode probe at batch size {batch_size}: {err}; the pack takes turns")
        return PackMode(TURNS, 1, "probe failed")
    if first is not record:
        log(f"pack mode at batch size {batch_size}: {first['chosen']} (another pack of its "
            f"key measured first, {first['measured']}; this probe said {record['chosen']})")
        return _mode(first, "profile", path)
    rates = record["rates"]
    log(f"pack mode at batch size {batch_size}: {record['chosen']} (probe: {wide} vmapped "
        f"{rates[VMAPPED]:.0f} trial-steps/s, turns {rates[TURNS]:.0f}, margin {MARGIN:g}; "
        f"{record['probe_seconds']:.1f} s)")
    return _mode(record, "probe", path)


def _mode(record: dict, source: str, path: str) -> PackMode:
    vmapped = record["chosen"] == VMAPPED
    return PackMode(record["chosen"], record["width"] if vmapped else 1, source, record, path)


def mode_metadata(mode: PackMode | None, group_width: int, resumed: bool = False) -> dict:
    """What a trial's metadata.json says of its pack mode: ``pack_mode`` (the mode its
    group trained in: vmapped when wider than one; a checkpoint's width wins over the
    pack's choice, so a resumed trial keeps its mode), ``pack_mode_source`` (what decided:
    "checkpoint" for a trial placed by a checkpoint, ``resumed``, whatever its width;
    else ``PackMode.source``, also for a fresh group narrower than the pack's width, the
    pack's last trials or a user's model's own group), and where a record decided a
    fresh trial, ``pack_mode_rates`` (mode -> trial-steps per second) and
    ``pack_mode_record`` (its file, relative to the study)."""
    trained = VMAPPED if group_width > 1 else TURNS
    if mode is None:
        return {"pack_mode": trained, "pack_mode_source": "given"}
    out = {"pack_mode": trained, "pack_mode_source": "checkpoint" if resumed else mode.source}
    if mode.record is not None and not resumed:
        out.update(pack_mode_rates=dict(mode.record["rates"]), pack_mode_record=mode.path)
    return out


def probe_rates(spec: StudySpec, step_fn, arrays: list[dict], params: list[dict],
                evaluators: list, x_all, y_all, batch_size: int, width: int) -> dict:
    """Trial-steps per second of ``width`` trials vmapped against one trial at width 1
    (see the module docstring), trained and evaluated through ``step_fn`` (the pack's
    ``PackStep``: the chosen mode's compilation is the pack's own) from copies of the
    first ``width`` trials' ``arrays`` (``StackedState.trial`` form) with their resolved
    ``params`` and ``evaluators``, on data orders of their own (the trials' are not
    touched). Returns ``rates`` (training and evaluation of a whole trial over its budget),
    ``step_rates`` (training only), ``evaluation_seconds`` (one evaluation of the group:
    ``width`` trials vmapped, one trial in turns; vmapped's only where it could change the
    choice, else its rate is its training-only one, an upper bound), ``steps`` and
    ``evaluations`` (a trial's budget and grid, which weigh them), ``probe_seconds`` (what
    the probe cost), ``measured``, ``source``."""
    from batchscale.core.names import SCHEDULE_OPTIONAL_PARAMETERS, SCHEDULE_PARAMETERS
    from batchscale.training.evaluation_grid import evaluation_steps
    from batchscale.training.step_timing import now_iso
    from batchscale.training.vmapped_step import stack_hyper, stack_trials

    started = time.perf_counter()
    widths = {TURNS: 1, VMAPPED: width}
    keys = (*SCHEDULE_PARAMETERS[step_fn.schedule], *SCHEDULE_OPTIONAL_PARAMETERS[step_fn.schedule])
    packs = {mode: [step_fn, stack_trials(arrays[:w], step_fn.slots),
                    stack_hyper(params[:w], keys, step_fn.optimizer),
                    _orders(evaluators[0].pipeline, batch_size, w, spec.seed)]
             for mode, w in widths.items()}
    steps = {mode: 0 for mode in widths}
    seconds = {mode: 0.0 for mode in widths}
    for warm in (False, True):  # A, B, A, B: a busy machine's drift falls on both
        for mode, pack in packs.items():
            n, took, pack[1] = _timed(pack, x_all, y_all, warm)
            steps[mode], seconds[mode] = steps[mode] + n, seconds[mode] + took
    budget = spec.max_steps[batch_size]
    evaluations = len(evaluation_steps(budget, spec.evaluation.resolution))
    step_rates = {m: widths[m] * steps[m] / seconds[m] for m in widths}
    # turns' evaluation compiles what the pack reuses when it takes turns; vmapped's is
    # measured only where it could change the choice: vmapped with free evaluations
    # (its training-only rate) must beat turns by the margin, or it loses anyway
    evaluation = {TURNS: _evaluation_seconds(packs[TURNS], evaluators[:1], x_all)}
    turns_rate = budget / (budget / step_rates[TURNS] + evaluations * evaluation[TURNS])
    if step_rates[VMAPPED] >= MARGIN * turns_rate:
        evaluation[VMAPPED] = _evaluation_seconds(packs[VMAPPED], evaluators[:width], x_all)
    rates = {m: widths[m] * budget / (budget * widths[m] / step_rates[m]
                                      + evaluations * evaluation.get(m, 0.0)) for m in widths}
    return {"rates": rates, "step_rates": step_rates, "evaluation_seconds": evaluation,
            "steps": budget, "evaluations": evaluations,
            "probe_seconds": time.perf_counter() - started, "measured": now_iso(), "source": "probe"}


def standalone_probe(spec: StudySpec, pipeline, batch_size: int, width: int, log=print) -> dict:
    """``probe_rates`` outside a pack (benchmarks/pack_mode.py): ``width`` copies of one
    freshly built model at the probe's metaparameters (``step_timing.probe_parameters``),
    through a step of the spec's schedule."""
    from batchscale.training.evaluator import Evaluator
    from batchscale.training.keras_setup import seed_keras, training_scope
    from batchscale.training.step_timing import device_arrays, probe_parameters
    from batchscale.training.trainer import resolve_parameters
    from batchscale.training.vmapped_step import PackStep, initial_arrays
    from batchscale.workloads import build_model

    x_all, y_all = device_arrays(pipeline)
    params = resolve_parameters(probe_parameters(spec, 0.25), spec.max_steps[batch_size],
                                spec.workload.optimizer)
    with training_scope(spec.backend, spec.workload.precision, batch_size, log):
        seed_keras(spec.seed, spec.backend)
        model = build_model(spec.workload.model, pipeline.input_shape, pipeline.num_outputs,
                            task=pipeline.task, parameters=params)
        step_fn = PackStep(model, spec.schedule, spec.workload.optimizer,
                           bool(params.get("l2_penalty", 0.0)), pipeline.num_outputs, pipeline.task)
        arrays = [initial_arrays(model, step_fn.slots)] * width
        evaluators = [Evaluator(None, pipeline, spec.evaluation.train_examples, spec.seed + i)
                      for i in range(width)]
        return probe_rates(spec, step_fn, arrays, [params] * width, evaluators, x_all, y_all,
                           batch_size, width)


def _orders(pipeline, batch_size: int, width: int, seed: int) -> list:
    from batchscale.workloads.data_order import EpochPermutations

    return [EpochPermutations(pipeline.num_train_examples, batch_size, seed + i) for i in range(width)]


def _timed(pack: list, x_all, y_all, warm: bool):
    """(steps, seconds, state) of one timed stretch of a probe pack [step, state, hyper,
    orders], after one untimed step unless ``warm``."""
    from batchscale.training.step_timing import timed_steps

    step_fn, state, hyper, orders = pack
    return timed_steps(step_fn, state, hyper, orders, x_all, y_all, PROBE_SECONDS,
                       PROBE_MIN_STEPS, PROBE_MAX_STEPS, first_chunk=1, warm=warm)


def _evaluation_seconds(pack: list, evaluators: list, x_all) -> float:
    """Seconds of one evaluation of a probe pack's trials in one call (as a vmapped group
    evaluates; one trial for turns), after one untimed evaluation (it compiles, unless the
    pack compiled it before)."""
    from batchscale.training.evaluator import evaluate_pack

    step_fn, state = pack[0], pack[1]

    def predict(x, shared):
        return step_fn.predict(state, x, shared, x_all)

    evaluate_pack(evaluators, predict, 0, 0.0)
    tick = time.perf_counter()
    evaluate_pack(evaluators, predict, 0, 0.0)
    return time.perf_counter() - tick
