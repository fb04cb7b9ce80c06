"""The device benchmark's pure parts: its time budget, what a cell is predicted to cost,
and the one table (Markdown) and JSON document it writes (``device_bench.py``).

Nothing here imports JAX or the project, so the unit tests check the budget rule and the
table on made-up records (tests/unit/test_device_bench.py).

A *cell* is one (model, batch size, K, mode): K trials trained by one of three modes --
``vmapped`` (one ``PackStep`` K trials wide), ``turns`` (the same K trials taking turns
through one compiled width-1 step) or ``scanned`` (a hand-written pure-JAX model, K trials
vmapped inside ``lax.scan``). A cell that the budget cannot afford is not run and says so
(``status`` "skipped", ``why``); one that raised says "failed" and why. A *pack step* is
one step of all K trials together; a *trial-step* is one step of one trial.
"""

from __future__ import annotations

import math
import time

MODES = ("vmapped", "turns", "scanned")
MODE_WORDS = {"vmapped": "vmapped (one PackStep K wide)",
              "turns": "turns (K trials through one width-1 step)",
              "scanned": "scanned JAX (K vmapped in lax.scan)"}
# Each part's weight in the budget: a part must be done by the sum of its own and the
# earlier parts' shares (start-up, data loading and the first compiles come out of the
# first); what one part leaves unused passes to the next. The smoke mode's trimmed study
# on a CPU takes about as long as its cells; a quickstart-size study on a GPU about a
# third of the run. Parts left out (``--no-study``, ``--models``) give their weight to the rest.
PART_WEIGHTS = {"profile": 0.16, "cells fc_128_128": 0.2, "cells simple_cnn_base": 0.31,
                "study": 0.33}
SMOKE_WEIGHTS = {"profile": 0.15, "cells fc_128_128": 0.2, "cells simple_cnn_base": 0.3,
                 "study": 0.35}


class Budget:
    """Seconds the whole run may take, from its start; each of ``parts`` (in the order
    they run) gets a deadline at its cumulative share of the budget (``weights``)."""

    def __init__(self, seconds: float, parts, weights: dict | None = None,
                 clock=time.monotonic):
        self.seconds, self.clock, self.start = float(seconds), clock, clock()
        weights = weights or PART_WEIGHTS
        total, running, self.shares = sum(weights[p] for p in parts), 0.0, {}
        for part in parts:
            running += weights[part] / total
            self.shares[part] = running

    def deadline(self, part: str) -> float:
        return self.start + self.shares[part] * self.seconds

    def left(self, part: str) -> float:
        """Seconds left before ``part``'s deadline (negative once past it)."""
        return self.deadline(part) - self.clock()

    def used(self) -> float:
        return self.clock() - self.start


def cell_cost(compile_seconds: float, seconds_per_unit: float, target: float,
              repeats: int) -> float:
    """Predicted seconds of a cell's timing protocol (``device_bench_cells.time_cell``):
    the first call (compile and one unit), one calibration unit, then ``repeats`` timed
    calls of about ``target`` seconds each, and never less than one unit each."""
    return compile_seconds + 2 * seconds_per_unit + repeats * max(target, seconds_per_unit)


def predicted_unit_seconds(history: list[dict], work: int, default: float) -> float:
    """Seconds of one pack step of ``work`` examples (K x batch size), predicted from the
    last measured cell of the same model and mode (``history``): its time scaled up in
    proportion to the work, never down (small steps are latency-bound, not cheaper).
    ``default`` when nothing is measured yet."""
    measured = [c for c in history if c.get("status") == "measured"]
    if not measured:
        return default
    last = measured[-1]
    return last["seconds_per_step"] * max(1.0, work / (last["width"] * last["batch_size"]))


def predicted_compile(history: list[dict], default: float) -> float:
    """The longest compile measured so far for this model and mode, else ``default``."""
    seen = [c["compile_seconds"] for c in history if c.get("compile_seconds") is not None]
    return max(seen) if seen else default


def skipped(model: str, batch_size: int, width: int, mode: str, why: str) -> dict:
    return {"model": model, "batch_size": batch_size, "width": width, "mode": mode,
            "status": "skipped", "why": why}


def failed(model: str, batch_size: int, width: int, mode: str, error: BaseException) -> dict:
    first = (str(error).strip().splitlines() or [""])[0][:160]
    return {"model": model, "batch_size": batch_size, "width": width, "mode": mode,
            "status": "failed", "why": f"{type(error).__name__}: {first}"}


def measured(model: str, batch_size: int, width: int, mode: str, per_step: list[float],
             compile_seconds: float, steps: int, flops: float | None) -> dict:
    """A measured cell: ``per_step`` the seconds of one pack step in each timed call."""
    ordered = sorted(per_step)
    median = ordered[len(ordered) // 2] if len(ordered) % 2 else \
        0.5 * (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2])
    rate = width / median
    return {"model": model, "batch_size": batch_size, "width": width, "mode": mode,
            "status": "measured", "seconds_per_step": median,
            "seconds_per_step_min": ordered[0], "seconds_per_step_max": ordered[-1],
            "trial_steps_per_second": rate, "examples_per_second": rate * batch_size,
            "compile_seconds": compile_seconds, "steps_timed": steps,
            "flops_per_trial_step": flops,
            "tflops": None if flops is None else flops * rate / 1e12}


# ---- the table -----------------------------------------------------------------
LEGEND = ("Each mode: trial-steps per second (ms of one pack step, K trial-steps), steady "
          "state, the median of the timed calls; the ratios are of trial-steps per second; "
          "TFLOP/s: XLA's FLOPs of one trial-step x trial-steps per second; compile s: "
          "vmapped / turns / scanned; probe: what step_timing.time_steps records for one "
          "trial; skipped (budget): the part's deadline could not afford the cell.")
def short_why(why: str) -> str:
    """A table's few words for why a cell or probe was not measured (the JSON has all)."""
    if why.startswith("budget") or why.startswith("over budget"):
        return "budget"
    return why.split(":")[0][:40] + (": out of memory" if "RESOURCE_EXHAUSTED" in why
                                     or "out of memory" in why.lower() else "")


def _cell_text(cell: dict | None) -> str:
    if cell is None:
        return "-"
    if cell["status"] != "measured":
        return f"{cell['status']} ({short_why(cell['why'])})"
    return f"{cell['trial_steps_per_second']:,.0f} ({1e3 * cell['seconds_per_step']:.3g} ms)"


def _ratio(a: dict | None, b: dict | None) -> str:
    if not (a and b and a["status"] == b["status"] == "measured"):
        return "-"
    return f"{a['trial_steps_per_second'] / b['trial_steps_per_second']:.2f}"


def _tflops(cell: dict | None) -> str:
    if not cell or cell["status"] != "measured" or cell.get("tflops") is None:
        return "-"
    value = cell["tflops"]
    return f"{value:.3g}" if value >= 0.001 else f"{value:.1e}"


def _compiles(cells: dict) -> str:
    return " / ".join("-" if cells.get(m) is None or cells[m].get("compile_seconds") is None
                      else f"{cells[m]['compile_seconds']:.1f}" for m in MODES)


def cells_table(cells: list[dict], profile: list[dict]) -> str:
    """One row per (model, batch size, K): trial-steps per second of each mode with the
    ms of one pack step, the ratios, effective TFLOP/s, compile seconds and, on K = 1
    rows, the step-time probe (``step_timing.time_steps``) of one trial."""
    rows: dict[tuple, dict] = {}
    for cell in cells:
        rows.setdefault((cell["model"], cell["batch_size"], cell["width"]), {})[cell["mode"]] = cell
    probes = {(p["model"], p["batch_size"]): p for p in profile}
    out = ["| model | batch | K | vmapped trial-steps/s (ms a pack step) | turns | scanned JAX | "
           "vmapped / turns | vmapped / scanned | TFLOP/s vmapped | TFLOP/s scanned | "
           "compile s v / t / s | probe ms/step (one trial) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (model, batch, width), by_mode in rows.items():
        probe = probes.get((model, batch)) if width == 1 else None
        probe_text = ("-" if probe is None else
                      f"{probe['status']} ({short_why(probe['why'])})"
                      if probe.get("status") != "measured"
                      else f"{1e3 * probe['seconds_per_step']:.3g}")
        v, t, s = (by_mode.get(m) for m in MODES)
        out.append(f"| {model} | {batch} | {width} | {_cell_text(v)} | {_cell_text(t)} | "
                   f"{_cell_text(s)} | {_ratio(v, t)} | {_ratio(v, s)} | {_tflops(v)} | "
                   f"{_tflops(s)} | {_compiles(by_mode)} | {probe_text} |")
    return "\n".join(out)


def study_lines(study: dict | None) -> list[str]:
    """The short real study in a few lines: what ran, its wall time, its answer."""
    if not study:
        return []
    if study.get("status") != "finished":
        return [f"Study ({study.get('what', '?')}): {study.get('status')}: {study.get('why', '')}"]
    parts = [f"Study ({study['what']}): {study['trials']} trials in {study['packs']} packs, "
             f"{study['wall_seconds']:.1f} s wall (packs {study['pack_seconds']:.1f} s, "
             f"planning {study['plan_seconds']:.1f} s, data {study['data_seconds']:.1f} s, "
             f"report {study['report_seconds']:.1f} s); {study['trained_steps']:,} trial-steps "
             f"trained; {study['statuses']}."]
    parts.append(f"B* {study['b_star']}; steps to result: {study['steps_to_result']}")
    return parts


def header(env: dict) -> str:
    load = env.get("load_average")
    load_text = "/".join(f"{x:.2f}" for x in load) if load else "?"
    before = env.get("load_average_before")
    before_text = "/".join(f"{x:.2f}" for x in before) if before else "?"
    return (f"{env.get('device_kind', '?')} ({env.get('platform', '?')}, "
            f"{env.get('devices', '?')} device(s)), {env.get('cpu_count', '?')} CPU cores, "
            f"load average {before_text} before, {load_text} now, jax {env.get('jax', '?')}, "
            f"keras {env.get('keras', '?')}, python {env.get('python', '?')}, {env.get('date', '?')}")


def document(result: dict) -> str:
    """The whole printout (Markdown): the machine, THE table, the study's lines."""
    lines = [header(result.get("environment", {})), "",
             cells_table(result.get("cells", []), result.get("profile", [])), "", LEGEND]
    study = study_lines(result.get("study"))
    if study:
        lines += ["", *study]
    for error in result.get("errors", []):
        lines += ["", f"FAILED part {error}"]
    seconds = result.get("total_seconds")
    if seconds is not None:
        budget = result.get("arguments", {}).get("budget")
        lines += ["", f"{seconds:.0f} s in all (budget {budget} s); "
                      f"finished: {str(result.get('finished', False)).lower()}"]
    return "\n".join(lines)


def exit_status(result: dict, smoke: bool) -> int:
    """The run's exit status: 1 when a part raised (``errors``), or in the smoke mode
    (what CI runs) when a cell or a step-time probe failed or nothing was measured at
    all; else 0. A cell or probe the budget skipped is no failure; on a GPU a cell may
    fail for its memory (K x batch too large), which the table says, and the run passes."""
    if result.get("errors"):
        return 1
    if not smoke:
        return 0
    rows = [*result.get("cells", []), *result.get("profile", [])]
    broken = any(row.get("status") == "failed" for row in rows)
    return 1 if broken or not any(row.get("status") == "measured" for row in rows) else 0


def finite_or_none(value):
    """JSON has no NaN or infinity: such a number is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
