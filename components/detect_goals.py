"""KFP wrapper of detect_study_goals (runs after the trial fan-in)."""

from typing import List

from kfp import dsl
from kfp.dsl import Dataset, Output

from batchscale.core.images import LIGHT_IMAGE


@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def detect_goals(study_spec: dict, store_root: str, statuses: List[str],
                 goal_steps: Output[Dataset]) -> str:
    """First step reaching each goal, per trial and split; returns its store location."""
    from batchscale.analysis.goal_steps import GOAL_STEPS_FILE, detect_study_goals
    from batchscale.store.layout import StudyStore
    from batchscale.validation import resolve_spec

    spec = resolve_spec(study_spec, store_root)
    store = StudyStore(spec.store)
    table = detect_study_goals(spec, store)
    table.to_csv(goal_steps.path, index=False)
    counts = {s: statuses.count(s) for s in sorted(set(statuses))}
    trials = len(table[["batch_size", "trial_id"]].drop_duplicates())
    print(f"goals detected for {trials} trials in the store; this run's statuses: {counts}")
    return store.url(f"{spec.name}/{GOAL_STEPS_FILE}")
