"""The paper's protocol on real training (digits, shipped offline): the three stopping
protocols give the same steps to result while ``race`` trains fewer steps than ``goal``
and ``goal`` fewer than ``full``; a too-narrow learning-rate range is re-searched until
the best trial lies inside what was searched; a range where trials diverge is topped up
to N non-divergent trials (or the cap). Stages run as the pipeline runs them, through
``plan_stage`` and ``run_pack`` (the pipeline itself, rounds included, is run by
tests/e2e/test_local_run.py)."""

from __future__ import annotations

import pandas as pd

from batchscale.analysis.reading.study_reader import load_study
from batchscale.analysis.statistics.metaparameters import edge_warnings
from batchscale.analysis.statistics.steps import steps_to_result
from batchscale.core.rounds import searched_configs
from batchscale.rounds.planner import plan_stage, planned_trials
from batchscale.search.packs import pack_trials
from batchscale.store.layout import StudyStore
from batchscale.training.evaluation_grid import evaluation_steps
from batchscale.training.packs import run_pack
from batchscale.validation import parse_spec
from tests.conftest import share_datasets, tiny_spec_dict


def quiet(*_):
    pass


def run_study(root: str, digits_store: str, pack_size: int = 4, **changes):
    """Every stage of the study, each stage's packs one after another (as kfp.local)."""
    share_datasets(digits_store, root)
    spec = parse_spec(tiny_spec_dict(root, **changes))
    store = StudyStore(root)
    for stage in range(1, spec.max_rounds + 1):
        for pack in plan_stage(spec, store, stage, pack_size=pack_size, log=quiet):
            rounds = store.read_rounds(spec, pack.batch_size)
            run_pack(spec, pack_trials(spec, pack, rounds), store, log=quiet)
    return spec, store


def trained_steps(spec, store) -> int:
    return sum(store.read_metadata(spec, t)["steps"] for t in planned_trials(spec, store))


def steps_table(spec, store) -> pd.DataFrame:
    study = load_study(f"{store.root}/{spec.name}")
    table = steps_to_result(study, spec.goals[0])
    return table[["batch_size", "steps_to_result", "best_trial"]].reset_index(drop=True)


def test_full_goal_and_race_give_the_same_steps_to_result_for_fewer_steps(tmp_path, digits_store):
    study = dict(batch_sizes=[16, 64], trials_per_batch_size=6, max_steps=300, max_rounds=1,
                 search_space={"learning_rate": {"scale": "log", "min": 0.01, "max": 0.3}},
                 goals=[{"metric": "classification_error", "value": 0.15}])
    runs = {p: run_study(str(tmp_path / p), digits_store, pack_size=6, protocol=p, **study)
            for p in ("full", "goal", "race")}
    tables = {p: steps_table(*run) for p, run in runs.items()}
    assert tables["full"]["steps_to_result"].notna().all(), tables["full"]
    pd.testing.assert_frame_equal(tables["goal"], tables["full"])
    pd.testing.assert_frame_equal(tables["race"], tables["full"])
    steps = {p: trained_steps(*run) for p, run in runs.items()}
    assert steps["race"] < steps["goal"] < steps["full"], steps
    reasons = {p: {store.read_metadata(spec, t)["stop_reason"] for t in planned_trials(spec, store)}
               for p, (spec, store) in runs.items()}
    assert "race" in reasons["race"] and "goal" not in reasons["full"], reasons
    # one pack per batch size, its trials in lockstep: no race-stopped trial trained past
    # the first evaluation after its batch size's best crossing
    spec, store = runs["race"]
    best = tables["race"].set_index("batch_size")["steps_to_result"]
    for trial in planned_trials(spec, store):
        meta = store.read_metadata(spec, trial)
        if meta["stop_reason"] == "race":
            grid = evaluation_steps(spec.max_steps[trial.batch_size], spec.evaluation.resolution)
            crossing = best[trial.batch_size]
            assert crossing <= meta["steps"] <= min(s for s in grid if s > crossing), meta


def test_a_too_narrow_range_is_re_searched_until_the_best_trial_is_inside(tmp_path, digits_store):
    spec, store = run_study(str(tmp_path / "narrow"), digits_store, batch_sizes=[16, 64],
                            trials_per_batch_size=4, max_steps=400, max_rounds=3,
                            protocol="race", search_space={"learning_rate": {"scale": "log", "min": 0.002,
                                                            "max": 0.006}})
    study = load_study(f"{store.root}/{spec.name}")
    table = steps_to_result(study, spec.goals[0])
    assert table["steps_to_result"].notna().all()
    assert edge_warnings(study.trials, table, study.search_space) == []
    for batch_size in spec.batch_sizes:
        rounds = store.read_rounds(spec, batch_size)
        assert len(rounds) >= 2 and rounds[1].reason.startswith("re-search"), rounds
        first = searched_configs(rounds[:1])["learning_rate"]
        assert searched_configs(rounds)["learning_rate"]["max_value"] > first["max_value"]
        best = table.set_index("batch_size").loc[batch_size, "learning_rate"]
        assert best > 0.006  # the best trial came from a later round, above the first range


def test_divergent_trials_are_topped_up_to_n_non_divergent(tmp_path, digits_store):
    spec, store = run_study(str(tmp_path / "diverging"), digits_store, batch_sizes=[16, 64],
                            trials_per_batch_size=4, max_steps=60, max_rounds=3, protocol="race",
                            search_space={"learning_rate": {"scale": "log", "min": 0.3,
                                                            "max": 30.0}},
                            goals=[{"metric": "classification_error", "value": 0.5}])
    for batch_size in spec.batch_sizes:
        rounds = store.read_rounds(spec, batch_size)
        trials = [t for t in planned_trials(spec, store) if t.batch_size == batch_size]
        statuses = [store.read_metadata(spec, t)["status"] for t in trials]
        alive = sum(s != "INFEASIBLE" for s in statuses)
        assert "INFEASIBLE" in statuses and len(rounds) >= 2, (batch_size, statuses)
        assert alive >= spec.trials_per_batch_size or len(trials) == spec.trial_cap, statuses
