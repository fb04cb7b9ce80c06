"""A small database in the layout of the paper's released data, with answers worked out by hand.

Workload fashion_mnist/simple_cnn_base/momentum, batch sizes 2 and 8; evaluation steps
uneven; COMPLETE, INCOMPLETE and INFEASIBLE trials; a tie; NaN values of a diverged trial.
Every number in ``ANSWERS`` was computed by hand from the rows below (see the comments).
"""

from __future__ import annotations

import json

from batchscale.store.filesystem import open_root

WORKLOAD = "fashion_mnist/simple_cnn_base/momentum"
NAN = float("nan")

PARAMETER_CONFIGS = {
    "learning_rate": {"type": "DOUBLE", "min_value": 1e-3, "max_value": 10.0, "scale": "LOG_SCALE"},
    "momentum": {"type": "DOUBLE", "min_value": 0.9, "max_value": 0.9999,
                 "scale": "REVERSE_LOG_SCALE"},
}

# batch size -> trial id -> (status, parameters, rows of (step, val error, train error))
TRIALS = {
    2: {
        1: ("COMPLETE", {"learning_rate": 0.1, "momentum": 0.9},
            [(0, 0.9, 0.9), (100, 0.25, 0.2), (250, 0.15, 0.1), (400, 0.09, 0.05)]),
        2: ("COMPLETE", {"learning_rate": 0.5, "momentum": 0.99},
            [(0, 0.9, 0.9), (100, 0.3, 0.28), (250, 0.09, 0.08), (400, 0.08, 0.04)]),
        3: ("INFEASIBLE", {"learning_rate": 9.0, "momentum": 0.999},
            [(0, 0.9, 0.9), (100, 0.05, NAN)]),
        4: ("INCOMPLETE", {"learning_rate": 0.01, "momentum": 0.95},
            [(0, 0.9, 0.9), (100, 0.05, 0.05)]),
        5: ("COMPLETE", {"learning_rate": 0.2, "momentum": 0.95},
            [(0, 0.9, 0.9), (120, 0.19, 0.15), (250, 0.15, 0.12)]),
    },
    8: {
        3: ("COMPLETE", {"learning_rate": 1.0, "momentum": 0.9},
            [(0, 0.9, 0.9), (50, 0.15, 0.3), (100, 0.08, 0.25)]),
        7: ("COMPLETE", {"learning_rate": 2.0, "momentum": 0.99},
            [(0, 0.9, 0.9), (50, 0.15, 0.1), (100, 0.12, 0.05)]),
        9: ("INFEASIBLE", {"learning_rate": 8.0, "momentum": 0.9},
            [(0, 0.9, 0.9), (10, NAN, NAN)]),
    },
}

# goal label -> split -> batch size -> (steps to result, best trial); None = not reached.
ANSWERS = {
    "classification_error<0.2": {
        # B=2: trial 5 beats 0.2 at step 120 (0.19), trial 1 only at 250; INFEASIBLE 3 and
        # INCOMPLETE 4 beat it at 100 but do not count. B=8: trials 3 and 7 both at 50 -> 3.
        "val": {2: (120, 5), 8: (50, 3)},
        # train: B=2 trial 1 has exactly 0.2 at 100 (not strictly below) -> trial 5 at 120.
        "train": {2: (120, 5), 8: (50, 7)},
    },
    "classification_error<0.1": {
        "val": {2: (250, 2), 8: (100, 3)},  # trial 2's 0.09 at 250; trial 1 only at 400
        "train": {2: (250, 2), 8: (100, 7)},  # trial 1 has exactly 0.1 at 250 -> 400
    },
}
COUNTS = {2: {"trials": 5, "complete": 3, "incomplete": 1, "infeasible": 1},
          8: {"trials": 3, "complete": 2, "incomplete": 0, "infeasible": 1}}
# Budgets, goal val classification_error<0.2 / <0.1 -> batch size -> steps (None: not reached)
STEP_BUDGET_200 = {"classification_error<0.2": {2: 120, 8: 50},
                   "classification_error<0.1": {2: None, 8: 100}}
EXAMPLE_BUDGET_480 = {  # B=2: step <= 240; B=8: step <= 60
    "classification_error<0.2": {2: 120, 8: 50}, "classification_error<0.1": {2: None, 8: None}}
# Best val error under budgets: batch size -> (value, trial, step)
BEST_STEP_BUDGET_100 = {2: (0.25, 1, 100), 8: (0.08, 3, 100)}
BEST_EXAMPLE_BUDGET_400 = {2: (0.19, 5, 120), 8: (0.15, 3, 50)}  # B=8 tie at 50 -> trial 3
# num_trials=2 keeps COMPLETE trials 1 and 2 at B=2 (INFEASIBLE 3 / INCOMPLETE 4 come after
# trial 2 and are dropped): val <0.2 is then trial 1 and 2 tied at 250 -> trial 1.
FIRST_TWO_VAL_02 = {2: (250, 1), 8: (50, 3)}


def write_paper_database(root: str, workload: str = WORKLOAD) -> str:
    """Write the database under ``root`` (local folder or gs://); returns the workload URL."""
    fs = open_root(root)
    dataset, model, optimizer = workload.split("/")
    for batch_size, trials in TRIALS.items():
        base = f"{workload}/{batch_size}"
        fs.write_text(f"{base}/study.json", json.dumps({
            "batch_size": batch_size, "dataset": dataset, "model": model, "optimizer": optimizer,
            "early_stopping": True, "train_steps": 0, "parameter_configs": PARAMETER_CONFIGS}))
        for trial_id, (status, params, rows) in trials.items():
            fs.write_text(f"{base}/{trial_id}/metadata.json", json.dumps({
                "parameters": params, "status": status, "steps": rows[-1][0], "trial_id": trial_id}))
            lines = ["step,train/classification_error,val/classification_error"]
            lines += [f"{s},{_csv(t)},{_csv(v)}" for s, v, t in rows]
            fs.write_text(f"{base}/{trial_id}/measurements.csv", "\n".join(lines) + "\n")
    return fs.url(workload)


def _csv(value: float) -> str:
    return "nan" if value != value else repr(value)


def write_synthetic_database(root: str, crossings, workload: str = "mnist/simple_cnn_base/sgd",
                             goal: float = 0.01) -> str:
    """A paper-layout database whose trials cross ``val/classification_error < goal`` exactly
    as the ``crossings`` table says (batch_size, trial_id, step, previous_step; NaN = never):
    each trial is evaluated at step 0, previous_step and step (above the goal before)."""
    fs = open_root(root)
    dataset, model, optimizer = workload.split("/")
    for batch_size, group in crossings.groupby("batch_size"):
        base = f"{workload}/{int(batch_size)}"
        fs.write_text(f"{base}/study.json", json.dumps({
            "batch_size": int(batch_size), "dataset": dataset, "model": model,
            "optimizer": optimizer, "train_steps": 0, "parameter_configs": {
                "learning_rate": {"type": "DOUBLE", "min_value": 0.01, "max_value": 10.0,
                                  "scale": "LOG_SCALE"}}}))
        for row in group.itertuples():
            reached = row.step == row.step
            last = int(row.step) if reached else 10_000_000
            rows = [(0, 0.9)]
            if reached and row.previous_step == row.previous_step and row.previous_step > 0:
                rows.append((int(row.previous_step), goal * 1.5))
            rows.append((last, goal * 0.5 if reached else goal * 2))
            fs.write_text(f"{base}/{row.trial_id}/metadata.json", json.dumps({
                "parameters": {"learning_rate": 0.01 * (1 + row.trial_id)}, "status": "COMPLETE",
                "steps": last, "trial_id": int(row.trial_id)}))
            fs.write_text(f"{base}/{row.trial_id}/measurements.csv",
                          "step,val/classification_error\n" + "".join(f"{s},{v!r}\n" for s, v in rows))
    return fs.url(workload)
