"""A pack task's page in the Kubeflow UI, from a hand-made store: counts, each trial's
first step at the goal and best validation value, nothing invented for what is missing."""

from batchscale.core.spec import PackSpec, TrialSpec
from batchscale.store.layout import StudyStore
from batchscale.training.pack_summary import summarize_pack
from batchscale.validation import parse_spec
from tests.conftest import tiny_spec_dict


def _trial(store, spec, trial_id, status, errors, reason):
    trial = TrialSpec(spec.name, 16, trial_id, {"learning_rate": 0.01 * trial_id, "momentum": 0.9})
    rows = [{"step": 10 * i, "val/classification_error": e} for i, e in enumerate(errors)]
    store.write_measurements(spec, trial, rows)
    meta = {"trial_id": trial_id, "status": status, "stop_reason": reason, "steps": 10 * (len(errors) - 1),
            "train_seconds": 1.5, "parameters": trial.parameters}
    return trial, meta


def test_a_pack_page_and_its_metrics(tmp_path):
    spec = parse_spec(tiny_spec_dict(str(tmp_path)))  # goal classification_error<0.2
    store = StudyStore(spec.store)
    made = [_trial(store, spec, 1, "COMPLETE", [0.9, 0.3, 0.15], "goal"),
            _trial(store, spec, 2, "INFEASIBLE", [0.9, 0.1, float("nan")], "diverged"),
            _trial(store, spec, 3, "COMPLETE", [0.9, 0.5, 0.25], "budget")]
    trials, metas = [t for t, _ in made], [m for _, m in made]
    shown = summarize_pack(spec, PackSpec("b16-t1-3", 16, (1, 2, 3)), trials, metas, store)
    assert shown.metrics == {
        "trials": 3, "complete": 2, "infeasible": 1, "unfinished": 0, "train_seconds": 4.5,
        "trial_1_steps_to_result": 20, "trial_1_best_val_classification_error": 0.15,
        "trial_2_best_val_classification_error": 0.1,  # a diverged trial never reaches the goal
        "trial_3_best_val_classification_error": 0.25,
        "reached_goal": 1, "best_steps_to_result": 20}
    assert shown.line == "b16-t1-3: 2 COMPLETE, 1 INFEASIBLE"
    page = shown.markdown.splitlines()
    assert page[0] == "### Pack b16-t1-3: batch size 16, trials 1, 2, 3"
    assert "Fewest steps to classification_error<0.2 in this pack: **20**." in page[2]
    assert "| 1 | COMPLETE | goal | 20 | 20 | 0.15 | 0.01 | 0.9 |" in page
    assert "| 2 | INFEASIBLE | diverged | 20 |  | 0.1 | 0.02 | 0.9 |" in page
    assert page[-1] == f"Live curves: `tensorboard --logdir {tmp_path}/tiny/tensorboard`"
