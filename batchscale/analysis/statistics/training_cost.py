"""What the study trained, and what the paper's protocol (``full``) would have trained.

Early stopping (``goal``, ``race``) is a saving: a trial stops once more steps cannot
change steps to the study's goals. The methods section states its size so a reader can
weigh it against what it hides (``censoring``): the steps and examples (steps x batch
size) the trials trained, summed over metadata.json's ``steps``, against what ``full``
would have trained: every trial that did not diverge to its budget (metadata
``max_steps``, else its batch size's study.json ``max_steps``, else its own steps), a
diverged trial its own steps (it would have diverged all the same).
"""

from __future__ import annotations

import math

import pandas as pd

from batchscale.analysis.reading.censoring import protocol_label, study_protocol

KEYS = ["batch_size", "trial_id"]


def training_cost(study) -> dict:
    """protocol (``censoring.protocol_label``'s text, as summary.json holds it), trials,
    trained_steps, trained_examples, full_steps, full_examples and the fractions
    trained_steps/full_steps and trained_examples/full_examples (None when nothing would
    have been trained)."""
    meta = study.metadata.reindex(columns=[*KEYS, "max_steps"])
    table = study.trials[[*KEYS, "status", "steps"]].merge(meta, on=KEYS, how="left")
    steps = pd.to_numeric(table["steps"], errors="coerce").fillna(0.0)
    declared = {int(b): s.get("max_steps") for b, s in study.study_json.items()}
    fallback = pd.to_numeric(table["batch_size"].map(declared), errors="coerce")
    budget = pd.to_numeric(table["max_steps"], errors="coerce").fillna(fallback).fillna(steps)
    full = budget.where(table["status"] != "INFEASIBLE", steps).clip(lower=steps)
    batch = table["batch_size"].astype(float)
    out = {"protocol": protocol_label(study_protocol(study)), "trials": int(len(table)),
           "trained_steps": int(steps.sum()), "trained_examples": int((steps * batch).sum()),
           "full_steps": int(full.sum()), "full_examples": int((full * batch).sum())}
    for unit in ("steps", "examples"):
        whole = out[f"full_{unit}"]
        out[f"fraction_of_full_{unit}"] = out[f"trained_{unit}"] / whole if whole else None
    return out


def count_text(value: int) -> str:
    """``12,345`` up to a million, then ``1.23M`` / ``4.5B``."""
    for size, suffix in ((1e9, "B"), (1e6, "M")):
        if value >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:,}"


def cost_sentence(cost: dict) -> str:
    """One sentence for the methods section (and the console)."""
    if not cost or not cost.get("trials"):
        return ""
    text = (f"Training cost: the {cost['trials']} trials trained "
            f"{count_text(cost['trained_steps'])} steps ({count_text(cost['trained_examples'])} examples)")
    fraction = cost.get("fraction_of_full_examples")
    if fraction is None or math.isclose(fraction, 1.0):
        return text + "."
    return (text + f"; protocol full (every non-diverged trial to its budget) would have "
            f"trained {count_text(cost['full_steps'])} steps ({count_text(cost['full_examples'])} "
            f"examples): the study trained {cost['fraction_of_full_steps']:.0%} of those steps "
            f"and {fraction:.0%} of those examples.")
