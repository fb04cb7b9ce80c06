"""The physical bounds of a training step's time: the one rule every reader and writer of
step times applies (step-time probes in ``<study>/profile/step_times/``, a trial's timings
in its metadata.json), so that a damaged or forged number never becomes a time or cost
to result.

A step time is seconds per training step (no compilation, no evaluation). It is believed
only when it is a finite number within [``MIN_SECONDS_PER_STEP``, ``MAX_SECONDS_PER_STEP``]
and was timed over at least one step:

- **at most one day** (86,400 s): a training step that takes longer is not a step a
  study of this tool could run (a budget of 1,000 steps would take three years); the
  slowest step timed for this project is milliseconds (benchmarks/README.md);
- **at least 100 ns** (1e-7 s): one step reads a batch, runs the model forward and
  backward and updates its parameters; on any CPU or accelerator that is hundreds of
  clock cycles at the very least (one XLA loop iteration alone costs more). The fastest
  step timed for this project, FC-128-128 on an H100, is 0.044 ms: 440 times above.

Anything outside says the file is damaged or forged, not that the hardware is exotic:
it is named, in one line, and left out.
"""

from __future__ import annotations

import math

MIN_SECONDS_PER_STEP = 1e-7
MAX_SECONDS_PER_STEP = 86_400.0
BOUNDS_TEXT = (f"allowed: a finite number of seconds per step from {MIN_SECONDS_PER_STEP:g} "
               f"to {MAX_SECONDS_PER_STEP:g} (one day)")


def _shown(value) -> str:
    """A value as a line shows it: numbers with %g, anything else as its repr, cut."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g}"
    return repr(value)[:40]


def _real(value) -> float | None:
    """``value`` as a float when it is a JSON number (not a bool, not a string), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def seconds_per_step_problem(seconds) -> str | None:
    """Why ``seconds`` (seconds per step) cannot be a step time (``"1e+300, outside
    physical bounds; allowed: ..."``), or None."""
    value = _real(seconds)
    if value is None:
        return f"{_shown(seconds)}, not a number"
    if not math.isfinite(value) or not MIN_SECONDS_PER_STEP <= value <= MAX_SECONDS_PER_STEP:
        return f"{_shown(seconds)}, outside physical bounds; {BOUNDS_TEXT}"
    return None


def probe_problem(record: dict) -> str | None:
    """Why a step-time probe record cannot be believed (its seconds per step, its steps
    timed: an integer >= 1, its batch size and devices: integers >= 1), or None."""
    problem = seconds_per_step_problem(record.get("seconds_per_step"))
    if problem:
        return f"has seconds_per_step {problem}"
    for key, required in (("steps", True), ("batch_size", True), ("devices", False)):
        value = record.get(key)
        if value is None and not required:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return f"has {key} {_shown(value)}, not an integer >= 1"
    return None


def trial_timing_problem(metadata: dict, batch_size: int | None = None) -> str | None:
    """Why a trial's timings in its metadata.json cannot be believed, or None.

    ``train_seconds`` (training steps only) must be a finite number >= 0 and, over the
    trial's ``steps`` (>= 1), give a step time within bounds (0 means "not timed", as
    older writers left it); ``examples_per_second`` a finite number >= 0 and, when > 0, give
    a step time within bounds at ``batch_size`` (default: the metadata's); ``wall_time`` a finite number
    >= 0. Each may be absent or null (older stores, the paper's data)."""
    steps = _real(metadata.get("steps"))
    steps = steps if steps is not None and math.isfinite(steps) and steps >= 1 else None
    batch = _real(metadata.get("batch_size") if batch_size is None else batch_size)
    for key, unit in (("train_seconds", " of seconds"), ("examples_per_second", ""),
                      ("wall_time", " of seconds")):
        raw = metadata.get(key)
        if raw is None:
            continue
        value = _real(raw)
        if value is None or not math.isfinite(value) or value < 0:
            return f"has {key} {_shown(raw)}, not a finite number{unit} >= 0"
        if key == "train_seconds" and value > 0 and steps is not None \
                and seconds_per_step_problem(value / steps):
            return (f"has train_seconds {_shown(raw)} over {steps:g} steps: "
                    f"{value / steps:.3g} s per step, outside physical bounds; {BOUNDS_TEXT}")
        if key == "examples_per_second" and value > 0 and batch and batch > 0 \
                and seconds_per_step_problem(batch / value):
            return (f"has examples_per_second {_shown(raw)} at batch size {batch:g}: "
                    f"{batch / value:.3g} s per step, outside physical bounds; {BOUNDS_TEXT}")
    return None


TIMING_KEYS = ("train_seconds", "examples_per_second", "wall_time")  # what a bad timing voids
