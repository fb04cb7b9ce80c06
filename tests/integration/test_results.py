"""The results API: a study's tables as DataFrames, read from gs:// (GCS emulator, real
client) and from a local copy of the same store, without writing to either."""

import math
import os

import pytest

from batchscale.analysis.results import open_study, split_location
from batchscale.core.spec import SpecError
from batchscale.store.layout import StudyStore


def _objects(root):
    """Every object under a gs:// root with its content (to prove nothing was written)."""
    store = StudyStore(root)
    return {(path, store.fs.read_bytes(path)) for path in store.fs.list_files("", recursive=True)}


@pytest.fixture(scope="module")
def local_copy(gcs_study, tmp_path_factory):
    """The same store copied to a local folder, object by object."""
    source, target = StudyStore(gcs_study), tmp_path_factory.mktemp("copy")
    for path in source.fs.list_files("", recursive=True):
        os.makedirs(os.path.dirname(target / path), exist_ok=True)
        (target / path).write_bytes(source.fs.read_bytes(path))
    return str(target)


def test_tables_from_gcs_are_consistent_with_the_trials(gcs_study):
    before = _objects(gcs_study)
    study = open_study(f"{gcs_study}/tiny/")
    assert study.spec.store == gcs_study and study.name == "tiny"

    trials = study.trials()
    assert len(trials) == len(study.spec.batch_sizes) * study.spec.trials_per_batch_size
    assert sorted(trials["batch_size"].unique()) == [16, 128]
    assert set(trials["status"]) <= {"COMPLETE", "INFEASIBLE"}
    assert trials["learning_rate"].between(0.02, 0.2).all() and (trials["momentum"] == 0.9).all()
    assert list(trials.columns) == ["batch_size", "trial_id", "status", "steps", "evaluations",
                                    "wall_time", "learning_rate", "momentum"]
    assert (trials["wall_time"] > 0).all() and (trials["evaluations"] >= 2).all()
    # wall_time and the like are trial metadata, not metaparameters, for the analysis
    assert study.study.metaparameters == ["learning_rate", "momentum"]

    measurements = study.measurements()
    per_trial = measurements.groupby(["batch_size", "trial_id"]).size()
    assert per_trial.to_dict() == trials.set_index(["batch_size", "trial_id"])["evaluations"].to_dict()
    assert "val/classification_error" in measurements.columns

    summary = study.steps_to_result()
    assert list(summary["batch_size"]) == [16, 128]
    for row in summary.itertuples():
        if math.isnan(row.steps_to_result):
            continue
        # The best trial's curve crosses the goal exactly at steps_to_result, and no
        # trial of that batch size beat it earlier.
        curves = measurements[measurements["batch_size"] == row.batch_size]
        beats = curves[curves["val/classification_error"] < 0.2]
        first = beats.sort_values(["step", "trial_id"]).iloc[0]
        assert (int(first["step"]), int(first["trial_id"])) == (row.steps_to_result, row.best_trial)
        assert row.examples_to_result == row.steps_to_result * row.batch_size
    goal_steps = study.goal_steps()
    assert set(goal_steps["split"]) == {"val", "train"} and len(goal_steps) == 2 * len(trials)
    val = goal_steps[goal_steps["split"] == "val"].set_index("batch_size")
    for row in summary.itertuples():  # steps to result: the earliest COMPLETE goal step
        complete = val.loc[[row.batch_size]].query("status == 'COMPLETE'")["step"]
        assert complete.min() == row.steps_to_result or (complete.isna().all()
                                                         and math.isnan(row.steps_to_result))
    assert _objects(gcs_study) == before  # read-only


def test_local_copy_gives_the_same_tables(gcs_study, local_copy):
    remote, local = open_study(f"{gcs_study}/tiny"), open_study(f"{local_copy}/tiny")
    assert local.spec.store == local_copy
    for table in ("trials", "measurements", "steps_to_result", "goal_steps"):
        assert getattr(remote, table)().equals(getattr(local, table)()), table


def test_bad_locations_get_one_clear_line(gcs_study, tmp_path):
    for bad in ("tiny", "gs://tiny", "/"):
        with pytest.raises(SpecError, match="must be STORE/STUDY"):
            split_location(bad)
    with pytest.raises(SpecError, match="no study 'nope'"):
        open_study(f"{gcs_study}/nope")
    with pytest.raises(SpecError, match="no study 'x'"):
        open_study(str(tmp_path / "x"))
