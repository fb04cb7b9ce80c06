"""The study's metaparameter laws: the best metaparameters against batch size fitted in the
common forms (``search.metaparameter_laws``), and the search box each law proposes for the
next batch size up (twice the largest) and down (half the smallest).

The points are the first goal's best trial per batch size (``steps``' one rule: the
earliest validation step beating the goal, ties to the lower trial id) with the searched
metaparameters only; beside each, the trials that reached the goal within ``NEAR_BEST``
of its steps, whose spread says how flat the optimum is (the intervals are never
narrower than it). The original search box is the spec's search space (round 1), or, for
the paper's data, the largest batch size's ``parameter_configs``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from batchscale.core.names import effective_learning_rate
from batchscale.core.spec import Parameter
from batchscale.search.metaparameter_laws import (
    EFFECTIVE,
    LEVEL,
    MIN_BATCH_SIZES,
    NEAR_BEST,
    LawFit,
    best_law,
    fit_laws,
    proposed_box,
)

LAWS_CAPTION = (
    "The best trial's metaparameters against batch size (log2 x, log y; bars: the trials within "
    f"{NEAR_BEST:.0%} of its steps), every law fitted (thin) and the chosen one (thick) with its "
    f"{LEVEL:.0%} prediction band; shaded bars: the proposed search boxes of the next batch "
    "sizes up and down. Momentum and β are shown as 1 − the value.")
PAPER_SCALES = {"LINEAR_SCALE": "linear", "LOG_SCALE": "log", "REVERSE_LOG_SCALE": "reverse_log"}


@dataclass
class MetaparameterLaws:
    """``fits``: parameter -> every form fitted; ``chosen``: parameter -> its best law;
    ``points``: one row per batch size (the best trial's values, and the lowest and highest
    value among it and its near-best trials: ``<p>_low``, ``<p>_high``); ``space``: the
    original search box; ``boxes``: (batch size, box, reason) for the next batch size up
    and down; ``reason``: why there are no laws (empty when there are); ``notes``: points
    whose best value sits at an edge of its searched range (``edge_notes``)."""

    fits: dict[str, list[LawFit]] = field(default_factory=dict)
    chosen: dict[str, LawFit] = field(default_factory=dict)
    points: pd.DataFrame = field(default_factory=pd.DataFrame)
    space: tuple[Parameter, ...] = ()
    boxes: list[tuple[int, tuple[Parameter, ...], str]] = field(default_factory=list)
    reason: str = ""
    level: float = LEVEL
    notes: list[str] = field(default_factory=list)

    @property
    def fitted(self) -> bool:
        return bool(self.chosen)

    def to_dict(self) -> dict:
        """summary.json's ``metaparameter_laws``."""
        return {
            "level": self.level, "near_best": NEAR_BEST, "reason": self.reason, "notes": self.notes,
            "batch_sizes": [int(b) for b in self.points.get("batch_size", [])],
            "goodness": "leave-one-out root mean square error of log values",
            "fits": {name: [f.to_dict(self.level) for f in fits] for name, fits in self.fits.items()},
            "chosen": {name: law.form for name, law in self.chosen.items()},
            "search_space": box_dict(self.space),
            "proposed_boxes": [{"batch_size": b, "search_space": box_dict(box), "reason": why}
                               for b, box, why in self.boxes],
        }


def box_dict(space: tuple[Parameter, ...]) -> dict:
    return {p.name: ({"values": list(p.values)} if p.values is not None else
                     {"scale": p.scale, "min": p.min, "max": p.max}) for p in space}


def law_points(trials: pd.DataFrame, crossed: pd.DataFrame, summary: pd.DataFrame,
               names: list[str], near: float = NEAR_BEST) -> list[tuple]:
    """``(batch size, best trial's parameters, near-best trials' parameters)`` per batch
    size with a best trial; ``crossed``: each counted trial's first step beating the goal."""
    points = []
    steps = crossed.dropna(subset=["step"]).merge(trials, on=["batch_size", "trial_id"])
    for row in summary.dropna(subset=["steps_to_result"]).sort_values("batch_size").itertuples():
        if pd.isna(getattr(row, "best_trial", math.nan)):
            continue
        rows = steps[steps["batch_size"] == row.batch_size]
        best = rows[rows["trial_id"] == row.best_trial]
        if best.empty:
            continue
        others = rows[(rows["trial_id"] != row.best_trial)
                      & (rows["step"] <= row.steps_to_result * (1 + near))]
        points.append((int(row.batch_size), _values(best.iloc[0], names),
                       [_values(r, names) for _, r in others.iterrows()]))
    return points


def original_space(study) -> tuple[Parameter, ...]:
    """The spec's search space; the paper's data: the largest batch size's ranges."""
    if study.spec is not None:
        return tuple(study.spec.search_space)
    configs = study.search_space.get(max(study.search_space, default=0)) or {}
    out = []
    for name, config in configs.items():
        scale = PAPER_SCALES.get(config.get("scale", ""), "linear")
        if config.get("type") == "DISCRETE":
            out.append(Parameter(name, "discrete", values=tuple(config.get("feasible_points") or ())))
        elif config.get("min_value") is not None and config.get("max_value") is not None:
            out.append(Parameter(name, scale, float(config["min_value"]), float(config["max_value"]),
                                 integer=config.get("type") == "INTEGER"))
    return tuple(out)


def edge_notes(warnings: list[dict], names: list[str]) -> list[str]:
    """One note per parameter whose best value sits at an edge of the searched range at
    some batch sizes (``metaparameters.edge_warnings``' dicts): there the optimum may lie
    outside, and a law through those points follows the range, not the optimum."""
    found: dict[str, list[int]] = {}
    for w in warnings or []:
        if w.get("parameter") in names:
            found.setdefault(w["parameter"], []).append(int(w["batch_size"]))
    return [f"best {name} at an edge of its searched range at batch size "
            f"{', '.join(str(b) for b in sorted(set(sizes)))}: the optimum there may lie outside, "
            "so the laws through those points follow the range, not the optimum"
            for name, sizes in found.items()]


def metaparameter_laws(study, trials: pd.DataFrame, crossed: pd.DataFrame,
                       summary: pd.DataFrame, warnings: list[dict] = ()) -> MetaparameterLaws:
    """The laws of the first goal's best trials and the boxes they propose (module doc);
    without ``MIN_BATCH_SIZES`` batch sizes with a best trial, a record that says so.
    ``warnings``: the report's search-space edge warnings (``edge_notes``)."""
    space = original_space(study)
    names = [p.name for p in space if p.values is None]
    points = law_points(trials, crossed, summary, names)
    table = _points_table(points, names)
    if len(points) < MIN_BATCH_SIZES or not names:
        why = (f"needs {MIN_BATCH_SIZES} batch sizes with a best trial, has {len(points)}"
               if names else "no continuous parameter was searched")
        return MetaparameterLaws(points=table, space=space, reason=why)
    fits = {n: f for n, f in fit_laws(points).items() if f}
    chosen = {n: best_law(f) for n, f in fits.items()}
    sizes = [b for b, _, _ in points]
    boxes = []
    for b in (2 * sizes[-1], sizes[0] // 2):
        if b >= 1 and b not in sizes:
            box, why = proposed_box(points, b, space)
            boxes.append((b, box, why))
    return MetaparameterLaws(fits, chosen, table, space, boxes,
                             "" if chosen else "no searched parameter moved with batch size",
                             notes=edge_notes(warnings, names))


def _with_effective(params: dict) -> dict:
    if "learning_rate" not in params or "momentum" not in params:
        return params
    return {**params, EFFECTIVE: float(effective_learning_rate(params["learning_rate"],
                                                               params["momentum"]))}


def _values(row, names: list[str]) -> dict:
    out = {}
    for n in names:
        value = row.get(n) if hasattr(row, "get") else None
        if value is not None and not pd.isna(value):
            out[n] = float(value)
    return out


def _points_table(points: list[tuple], names: list[str]) -> pd.DataFrame:
    """One row per point: the best value of each parameter and its near-best range, the
    effective learning rate η/(1−γ) too where learning rate and momentum were searched."""
    rows = []
    shown = names + ([EFFECTIVE] if {"learning_rate", "momentum"} <= set(names) else [])
    for b, best, near in points:
        row = {"batch_size": b, "near_best_trials": len(near)}
        if EFFECTIVE in shown:
            best, near = _with_effective(best), [_with_effective(p) for p in near]
        for n in shown:
            values = [p[n] for p in [best, *near] if n in p]
            row[n] = best.get(n, math.nan)
            row[f"{n}_low"] = min(values, default=math.nan)
            row[f"{n}_high"] = max(values, default=math.nan)
        rows.append(row)
    return pd.DataFrame(rows)
