"""The one rule that ends a trial, whichever engine trains it: ``trial_outcome``.

Both engines (``trainer.run_trial``, ``pack_loop``) ask it through their trial's
``trial_lifecycle.TrialLife.outcome`` after every evaluation, so a trial stops at the same
evaluation however it was trained. What a protocol allows is read from its record
(``core.protocols``), never from its name. Pure: reads rows and the crossings it is
handed, writes nothing.
"""

from __future__ import annotations

import math

from batchscale.core.goals import all_goals_reached, first_step_reaching
from batchscale.core.names import TASK_LOSS_METRIC
from batchscale.core.protocols import STOP_BUDGET, STOP_DIVERGED, STOP_GOAL, STOP_RACE
from batchscale.core.spec import StudySpec
from batchscale.workloads.dataset_registry import workload_task


def trial_outcome(spec: StudySpec, rows: list[dict], finite: bool, step: int,
                  max_steps: int, board=None) -> tuple[str, str] | None:
    """``(status, stop_reason)`` when the latest evaluation ends the trial, else None: a
    non-finite training loss or one above ``divergence_factor`` times its step-0 value
    (INFEASIBLE, "diverged"); under a protocol that ``stops_at_goal``, every goal reached
    (COMPLETE, "goal"); the budget spent (COMPLETE, "budget"); under one that ``races``,
    no goal left that this trial could still reach first (COMPLETE, "race": see
    ``raced``; ``board`` is where its batch size's crossings are known, anything with
    ``earliest() -> {goal index: step}``). The training loss is the task's
    (``core.names.TASK_LOSS_METRIC``: cross entropy, or regression's mean squared error).
    The rule both trainers stop by."""
    metric = f"train/{TASK_LOSS_METRIC[workload_task(spec.workload)]}"
    loss, initial = rows[-1][metric], rows[0][metric]
    if not finite or not math.isfinite(loss) or loss > spec.evaluation.divergence_factor * initial:
        return "INFEASIBLE", STOP_DIVERGED
    if spec.protocol.stops_at_goal and all_goals_reached(rows, spec.goals):
        return "COMPLETE", STOP_GOAL
    if step >= max_steps:
        return "COMPLETE", STOP_BUDGET
    if spec.protocol.races and board is not None and raced(spec, rows, step, board.earliest()):
        return "COMPLETE", STOP_RACE
    return None


def raced(spec: StudySpec, rows: list[dict], step: int, earliest: dict[int, int]) -> bool:
    """Whether every goal is either beaten by this trial or already beaten by another
    trial of its batch size at a step <= ``step``, this trial's latest evaluation: its
    first crossing of any goal it has not beaten would come after ``step``, so it could
    not lower steps to result (a minimum over trials) for any goal."""
    return all(first_step_reaching(rows, goal) is not None
               or (i in earliest and earliest[i] <= step)
               for i, goal in enumerate(spec.goals))
