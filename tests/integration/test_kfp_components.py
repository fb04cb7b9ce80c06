"""Each KFP wrapper executed as a real task by kfp.local's SubprocessRunner."""

import io
import os

import pandas as pd
import pytest
from kfp import local

from batchscale.components.aggregate import aggregate
from batchscale.components.plan_round import plan_round
from batchscale.components.prepare_data import prepare_data
from batchscale.components.train_pack import train_pack
from batchscale.core.spec import TrialSpec
from batchscale.search.trials import make_trials as plan_trials
from batchscale.store.layout import StudyStore
from batchscale.validation import parse_spec
from tests.conftest import tiny_spec_dict


@pytest.fixture
def kfp_local(tmp_path):
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path / "kfp"))


def test_prepare_data_then_plan_round_then_train_pack(kfp_local, tmp_path):
    root = str(tmp_path / "store")
    raw = tiny_spec_dict(root, trials_per_batch_size=3, max_steps=20)
    prep = prepare_data(study_spec=raw, store_root="")
    assert prep.outputs["Output"].endswith("datasets/digits")
    store = StudyStore(root)
    assert store.has_dataset("digits")
    x, y = store.read_split("digits", "validation")
    assert x.shape == (250, 8, 8, 1) and set(y) == set(range(10))

    lanes = plan_round(study_spec=raw, store_root="", dataset_location=prep.outputs["Output"],
                       pack_size=2, stage=1, lanes=2).output
    # dealt longest first (no step-time profile yet: steps x batch size, search.pack_order)
    # to the lane with the least work so far (search.lanes)
    assert [(lane["lane"], lane["kind"], [p["pack_id"] for p in lane["packs"]]) for lane in lanes] == [
        (1, "one_pod", ["b128-t1-2"]), (2, "one_pod", ["b128-t3", "b16-t1-2", "b16-t3"])]
    spec = parse_spec(raw)
    assert parse_spec(store.read_spec_dict("tiny")) == spec
    assert store.fs.exists("tiny/digits/fc_32/nesterov_momentum/128/study.json")

    again = prepare_data(study_spec=raw, store_root="")  # second time: re-used, not rewritten
    assert again.outputs["Output"] == prep.outputs["Output"]

    # one pack task, lane 1 (one pack): its two trials re-derived from the spec, trained,
    # each in its own folder
    task = train_pack(study_spec=raw, lane=lanes[0], store_root="")
    summary = task.outputs["Output"]
    counts = dict(reversed(part.split(" ")) for part in summary.removeprefix("b128-t1-2: ").split(", "))
    assert set(counts) <= {"COMPLETE", "INFEASIBLE"} and sum(map(int, counts.values())) == 2, summary
    # what the Kubeflow UI shows of the pack: its Metrics and a Markdown table of its trials
    metrics = task.outputs["metrics"].metadata
    assert metrics["trials"] == 2 and metrics["complete"] + metrics["infeasible"] == 2
    assert {"trial_1_best_val_classification_error", "train_seconds"} <= set(metrics)
    page = open(task.outputs["summary"].path).read()
    assert page.startswith("### Pack b128-t1-2: batch size 128, trials 1, 2")
    assert "| 1 | " in page and "| 2 | " in page and "tensorboard --logdir" in page
    trained = {t.trial_id: t for t in plan_trials(spec) if t.batch_size == 128}
    assert [store.is_done(spec, trained[i]) for i in (1, 2, 3)] == [True, True, False]
    meta = store.read_metadata(spec, trained[2])
    assert meta["parameters"] == trained[2].parameters  # the spec's trial 2, not another


def test_store_root_parameter_overrides_the_spec(kfp_local, tmp_path):
    other = str(tmp_path / "other")
    prepare_data(study_spec=tiny_spec_dict(str(tmp_path / "unused")), store_root=other)
    assert StudyStore(other).has_dataset("digits")
    assert not (tmp_path / "unused").exists()


def test_aggregate_detects_goals_and_writes_the_report(kfp_local, tmp_path):
    """aggregate alone, on trials written straight into the store (no training): goal
    detection is folded in, so report/goal_steps.csv is among the report files."""
    raw = tiny_spec_dict(str(tmp_path / "store"))
    spec = parse_spec(raw)
    store = StudyStore(spec.store)
    store.register_study(spec)
    errors = {16: [0.9, 0.5, 0.15], 128: [0.9, 0.3, 0.1]}  # goal 0.2: steps 20 and 20
    for trial in plan_trials(spec):
        status = "INFEASIBLE" if trial.trial_id == 2 else "COMPLETE"
        rows = [{"step": 10 * i, "val/classification_error": e, "train/classification_error": e}
                for i, e in enumerate(errors[trial.batch_size][:2 if status == "INFEASIBLE" else 3])]
        store.write_measurements(spec, trial, rows)
        store.write_metadata(spec, TrialSpec(spec.name, trial.batch_size, trial.trial_id, trial.parameters),
                             {"trial_id": trial.trial_id, "status": status, "steps": rows[-1]["step"],
                              "parameters": trial.parameters})
    task = aggregate(study_spec=raw, store_root="")
    assert task.outputs["Output"] == store.url("tiny/report/report.html")
    assert os.path.getsize(task.outputs["report"].path) > 1000  # the HTML handed to the UI

    goals = pd.read_csv(io.StringIO(store.fs.read_text("tiny/report/goal_steps.csv")))
    assert len(goals) == 4 * 2  # trials x splits (one goal)
    val = goals[goals["split"] == "val"].set_index(["batch_size", "trial_id"])
    assert val.loc[(16, 1), "step"] == 20 and val.loc[(128, 1), "step"] == 20
    assert val.loc[(16, 2), "status"] == "INFEASIBLE" and pd.isna(val.loc[(16, 2), "step"])
    steps = pd.read_csv(io.StringIO(store.fs.read_text("tiny/report/steps_to_result.csv")))
    assert steps.query("split == 'val'")["steps_to_result"].tolist() == [20, 20]
