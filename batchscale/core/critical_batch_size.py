"""The critical batch size, by every definition batchscale reports: one name, symbol and
one-line definition each, and the typed estimate that carries one across modules.

Papers mean different things by "the critical batch size", and rarely say which: B* of
the fit S(B) = S_min (1 + B*/B) (McCandlish et al. 2018), the batch size where steps
exceed perfect scaling by 20% (Zhang et al. 2024; 0.2 B* under that curve), the gradient
noise scale B_simple, and a local estimate from short branches of a checkpoint at k x B
(Merrill et al. 2025). On one curve they differ by 5x or more. So every number the
report, ``plan``, ``calibrate``, summary.json, plan.json and the Kubeflow metrics call a
critical batch size carries one of the names below, and every table that shows one shows
its definition beside it. The estimates themselves are computed where their data are:
the fit in ``analysis.statistics``, the probes in ``planning``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SWEEP = "sweep"  # needs the finished, re-tuned sweep
PROBE = "probe"  # measured before any sweep


@dataclass(frozen=True)
class CbsDefinition:
    """``name``: the key in summary.json, plan.json and calibration.json; ``metric``: the
    Kubeflow metric's name; ``symbol``: a table's heading; ``definition``: one line."""

    name: str
    symbol: str
    label: str
    definition: str
    source: str
    metric: str


OVERHEAD = 0.2  # Zhang et al. 2024: steps 20% above perfect scaling

DEFINITIONS: dict[str, CbsDefinition] = {d.name: d for d in (
    CbsDefinition(
        "b_star_fit", "B*", "fitted critical batch size",
        "B* of S(B) = S_min (1 + B*/B) fitted to the sweep's steps to result: steps are twice "
        "the floor S_min there (McCandlish et al. 2018)", SWEEP, "cbs_b_star_fit"),
    CbsDefinition(
        "b_overhead_20", "B_20%", "20%-overhead batch size",
        f"where steps to result exceed perfect scaling by {OVERHEAD:.0%} on the fitted curve: "
        f"{OVERHEAD:g} B* (Zhang et al. 2024)", SWEEP, "cbs_overhead_20pct"),
    CbsDefinition(
        "b_simple", "B_simple", "gradient noise scale",
        "tr(Σ)/|G|² of the per-example gradients, measured before the sweep by the noise probe "
        "at the smallest batch size, near the goal (McCandlish et al. 2018)", PROBE,
        "cbs_noise_scale"),
    CbsDefinition(
        "b_branched", "B_branch", "branched local critical batch size",
        "the largest k·B whose branch from a checkpoint of a run at batch size B, learning rate "
        "rescaled by the stated rule, matches the base run's loss within the tolerance after k "
        "times fewer steps (Merrill et al. 2025)", PROBE, "cbs_branched"),
)}


@dataclass(frozen=True)
class CbsEstimate:
    """One critical batch size by definition ``name`` (a key of ``DEFINITIONS``): value and
    interval at ``level`` (an end may be 0 or inf: bounded on one side only), the training
    examples the estimate spent (None: the sweep's own, nothing extra), and a note (the
    rule or caveat that goes with this number)."""

    name: str
    value: float
    low: float
    high: float
    level: float
    examples: int | None = None
    note: str = ""

    def __post_init__(self):
        if self.name not in DEFINITIONS:
            raise ValueError(f"unknown critical batch size definition {self.name!r}; "
                             f"allowed: {', '.join(DEFINITIONS)}")

    @property
    def definition(self) -> CbsDefinition:
        return DEFINITIONS[self.name]

    def to_dict(self) -> dict:
        """JSON-ready; NaN and infinities become None."""
        def num(x):
            return float(x) if x is not None and math.isfinite(x) else None
        d = self.definition
        return {"name": self.name, "symbol": d.symbol, "label": d.label,
                "definition": d.definition, "source": d.source, "value": num(self.value),
                "low": num(self.low), "high": num(self.high), "level": self.level,
                "examples": self.examples, "note": self.note}

    @classmethod
    def from_dict(cls, raw: dict) -> CbsEstimate:
        def num(x, missing):
            return missing if x is None else float(x)
        return cls(str(raw["name"]), num(raw.get("value"), math.nan), num(raw.get("low"), 0.0),
                   num(raw.get("high"), math.inf), float(raw.get("level", 0.95)),
                   raw.get("examples"), str(raw.get("note", "")))
