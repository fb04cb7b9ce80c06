"""The device benchmark's cells: K trials of one model at one batch size, trained by each
of three modes, steady state only (``device_bench_table`` names the modes and records).

- ``vmapped``: one ``PackStep`` K trials wide (``user_model_gpu.Chunks``, built as
  ``step_timing.probe_pack`` builds a probe), ``run_chunk`` calls as a pack makes them;
- ``turns``: one ``PackStep`` one trial wide, its K trials (the same metaparameters) each
  training a chunk in turn through that one compiled step, what a CPU pack does. One
  width-1 step per batch size serves these and the vmapped K = 1 cell (``OneStep``): it
  compiles once, in the first of them (the others' compile seconds are 0);
- ``scanned``: the hand-written pure-JAX model (``device_bench_reference.Scanned``).

The timing protocol of every cell (``time_cell``): a first call of one unit (it compiles;
its compile seconds are kept apart), calibration calls that grow until one lasts a quarter
of ``target`` seconds (``calibrated_units``), then ``repeats`` calls of about ``target``
seconds each; the cell's figure is the median seconds of one
pack step (K trial-steps). A unit is one pack step, for ``scanned`` one call of its
fixed scan length. Every call waits for the device (``run_chunk`` fetches its finite
flags, ``Scanned.run`` too). Before a cell runs, its cost is predicted from the cells of
the same model and mode measured before it (``device_bench_table.cell_cost``); a cell
the part's deadline cannot afford is skipped, and so is one whose first call shows it
cannot finish in time.
"""

from __future__ import annotations

import time

import numpy as np
from device_bench_table import (
    cell_cost,
    failed,
    measured,
    predicted_compile,
    predicted_unit_seconds,
    skipped,
)
from user_model_gpu import Chunks, trial_parameters

COMPILE_GUESS = 3.0  # seconds, before any compile of a model and mode was measured
STEP_GUESS = 1e-3  # seconds of a pack step, before any was measured
MAX_STEPS_A_CALL = 20_000
MAX_INDICES_A_CALL = 1 << 25  # a timed call's batch indices, built on the host (256 MiB)


class Vmapped:
    """K trials in one PackStep K wide (K = 1: a trial of the batch size's width-1 step)."""

    def __init__(self, spec, pipeline, width, x_all, y_all, batch_size, alone):
        self.pack = (alone().sibling(trial_parameters(spec, 1)[0], spec.seed) if width == 1
                     else Chunks(spec, pipeline, width, x_all, y_all))
        self.batch_size, self.unit_steps, self.work = batch_size, 1, width * batch_size

    def run(self, units: int) -> tuple[float, float]:
        """(seconds, of them compiling) of ``units`` pack steps."""
        return self.pack.run(self.batch_size, units)


class Turns:
    """The same K trials, each a chunk at a time through the batch size's width-1 step."""

    def __init__(self, spec, pipeline, width, x_all, y_all, batch_size, alone):
        self.trials = [alone().sibling(p, spec.seed + i)
                       for i, p in enumerate(trial_parameters(spec, width))]
        self.batch_size, self.unit_steps, self.work = batch_size, 1, width * batch_size

    def run(self, units: int) -> tuple[float, float]:
        """Each trial trains ``units`` steps in its turn: (seconds, of them compiling)."""
        seconds = compiling = 0.0
        for trial in self.trials:
            took, compiled = trial.run(self.batch_size, units)
            seconds, compiling = seconds + took, compiling + compiled
        return seconds, compiling


class ScannedMode:
    """The hand-written model, K trials vmapped, ``unit_steps`` steps a ``lax.scan`` call."""

    def __init__(self, spec, pipeline, width, x_all, y_all, batch_size, unit_steps):
        from device_bench_reference import Scanned

        from batchscale.workloads.data_order import EpochPermutations

        params = trial_parameters(spec, width)
        self.model = Scanned(spec.workload.model, pipeline.input_shape, pipeline.num_outputs,
                             [p["learning_rate"] for p in params],
                             [p.get("momentum", 0.0) for p in params], spec.seed)
        self.orders = [EpochPermutations(pipeline.num_train_examples, batch_size, spec.seed + i)
                       for i in range(width)]
        self.x_all, self.y_all, self.batch_size = x_all, y_all, batch_size
        self.unit_steps, self.finite, self.work = unit_steps, True, width * batch_size

    def run(self, units: int) -> tuple[float, float]:
        steps = units * self.unit_steps
        indices = np.stack([o.take(steps).reshape(steps, self.batch_size) for o in self.orders], 1)
        indices = indices.reshape(units, self.unit_steps, *indices.shape[1:]).astype(np.int32)
        compiling = 0.0
        tick = time.perf_counter()
        if self.model.compiled is None:
            self.model.compile(self.batch_size, self.unit_steps, self.x_all, self.y_all)
            compiling = self.model.compile_seconds
        self.finite = self.model.run(indices, self.x_all, self.y_all) and self.finite
        return time.perf_counter() - tick, compiling


def time_cell(mode, target: float, repeats: int, left) -> tuple[list[float], float, int] | str:
    """The timing protocol (module docstring) of ``mode``: (seconds of a pack step in each
    timed call, compile seconds, pack steps timed), or why it stopped after its first
    call (``left()``: seconds left before the deadline)."""
    first, compile_seconds = mode.run(1)
    unit = max(first - compile_seconds, 1e-7)
    if unit + repeats * max(target, unit) > left():
        return (f"over budget after its first call ({1e3 * unit / mode.unit_steps:.3g} ms a pack "
                f"step; {max(left(), 0):.0f} s left)")
    most = max(1, min(MAX_STEPS_A_CALL, MAX_INDICES_A_CALL // mode.work) // mode.unit_steps)
    units = calibrated_units(mode.run, target, most)
    per_step = [mode.run(units)[0] / (units * mode.unit_steps) for _ in range(repeats)]
    return per_step, compile_seconds, repeats * units * mode.unit_steps


def calibrated_units(run, target: float, most: int) -> int:
    """Units of a call that takes about ``target`` seconds: calls that grow until one takes
    at least a quarter of it (a call of one unit is mostly its fixed cost: launching,
    sending the indices, fetching the flags), then scaled to the target."""
    units = 1
    while True:
        seconds, _ = run(units)
        if seconds >= target / 4 or units >= most:
            return int(np.clip(round(units * target / max(seconds, 1e-7)), 1, most))
        units = int(min(most, units * np.clip(target / max(seconds, 1e-7), 2, 64)))


def run_cell(spec, pipeline, x_all, y_all, mode_name: str, width: int, batch_size: int,
             history: list[dict], flops: float | None, args, left, alone=None,
             beside: tuple[dict, ...] = ()) -> dict:
    """One cell's record: measured, skipped (the deadline cannot afford it) or failed.
    ``beside``: the other modes' cells of the same K and batch size measured before it."""
    model = spec.workload.model
    step = predicted_unit_seconds(history, width * batch_size, STEP_GUESS)
    unit_steps = 1
    if mode_name == "scanned":  # a scan call of about one timed call's length, at most
        from batchscale.training.vmapped_step import chunk_capacity  # PackStep's buffer

        # its first call is a whole scan: sized by the same trials' PackStep cells, too
        step = max([step] + [c["seconds_per_step"] for c in beside if c["status"] == "measured"])
        unit_steps = int(np.clip(args.target / step, 1, chunk_capacity(width, batch_size)))
    cost = cell_cost(predicted_compile(history, COMPILE_GUESS), step * unit_steps, args.target,
                     args.repeats)
    if cost > left():
        return skipped(model, batch_size, width, mode_name,
                       f"budget (about {cost:.0f} s predicted, {max(left(), 0):.0f} s left)")
    try:
        if mode_name == "scanned":
            mode = ScannedMode(spec, pipeline, width, x_all, y_all, batch_size, unit_steps)
        else:
            mode = (Vmapped if mode_name == "vmapped" else Turns)(spec, pipeline, width, x_all,
                                                                 y_all, batch_size, alone)
        timed = time_cell(mode, args.target, args.repeats, left)
    except Exception as err:  # noqa: BLE001  (out of memory, say: the cell says so, the run goes on)
        return failed(model, batch_size, width, mode_name, err)
    if isinstance(timed, str):
        return skipped(model, batch_size, width, mode_name, timed)
    per_step, compile_seconds, steps = timed
    cell = measured(model, batch_size, width, mode_name, per_step, compile_seconds, steps, flops)
    cell["all_finite"] = _finite(mode)
    if mode_name == "scanned":
        cell["scan_length"] = unit_steps
    return cell


class OneStep:
    """A batch size's width-1 PackStep, built (and compiled) once, on first use, for the
    vmapped K = 1 cell and every turns cell: their trials are its siblings
    (``Chunks.sibling``), so a cell after the first pays no compile."""

    def __init__(self, spec, pipeline, x_all, y_all):
        self.arguments, self.pack = (spec, pipeline, 1, x_all, y_all), None

    def __call__(self) -> Chunks:
        if self.pack is None:
            self.pack = Chunks(*self.arguments)
        return self.pack


def _finite(mode) -> bool:
    if isinstance(mode, Vmapped):
        return mode.pack.finite
    if isinstance(mode, Turns):
        return all(t.finite for t in mode.trials)
    return mode.finite


def model_cells(spec, pipeline, x_all, y_all, args, left, flops: dict, on_cell) -> list[dict]:
    """Every cell of one model (``spec.workload.model``): batch sizes ascending, K ascending,
    the three modes interleaved; ``on_cell(cells)`` after each (the caller saves)."""
    from batchscale.training.keras_setup import training_scope

    cells: list[dict] = []
    history: dict[str, list[dict]] = {m: [] for m in args.modes}
    with training_scope(spec.backend, spec.workload.precision, 1, print):
        for batch_size in args.batch_sizes:
            alone = OneStep(spec, pipeline, x_all, y_all)
            for width in args.widths:
                beside: list[dict] = []
                for mode_name in args.modes:
                    cell = run_cell(spec, pipeline, x_all, y_all, mode_name, width, batch_size,
                                    history[mode_name], flops.get(batch_size), args, left, alone,
                                    tuple(beside))
                    beside.append(cell)
                    history[mode_name].append(cell)
                    cells.append(cell)
                    print(f"  {spec.workload.model} batch {batch_size} K {width} {mode_name}: "
                          f"{_said(cell)}", flush=True)
                    on_cell(cells)
    return cells


def _said(cell: dict) -> str:
    if cell["status"] != "measured":
        return f"{cell['status']} ({cell['why']})"
    return (f"{cell['trial_steps_per_second']:,.0f} trial-steps/s, "
            f"{1e3 * cell['seconds_per_step']:.3g} ms a pack step, "
            f"compile {cell['compile_seconds']:.2f} s")
