"""A batch size added to a grown study, starting from the box the metaparameter laws fit.

``new_batch_sizes: {search: fitted_box}`` (``core.new_batch_sizes``): the planner records a
round 1 of its own for a batch size none of whose trials has started, once three other
batch sizes are settled (``rounds.fitted_round``); the derivation recomputes it from the
sources it records, heals an edited record and refuses one its trials were trained from;
its later rounds count to its own trials. No training: trials are written through the
trainer's ``finish_trial``.
"""

from __future__ import annotations

import json
import math

import pytest

from batchscale.analysis.reading.study_reader import load_study
from batchscale.analysis.statistics.search_rounds import batch_rounds, trial_cap_notes
from batchscale.core.new_batch_sizes import FITTED_BOX, NewBatchSizes
from batchscale.core.rounds import FittedFrom, FittedSource, SearchRound, read_rounds, wanted_trials
from batchscale.core.spec import Parameter
from batchscale.pipelines.progress import ProgressTracker
from batchscale.rounds.derivation import DamagedRoundsError
from batchscale.rounds.planner import plan_stage
from batchscale.search.next_round import TrialResult, next_round
from batchscale.search.trials import batch_trials
from batchscale.store.compatibility import check_same_study
from batchscale.store.layout import StudyStore
from batchscale.training.trial_lifecycle import finish_trial
from batchscale.validation import default_spec_dict, parse_spec

pytestmark = pytest.mark.timeout(60)
SETTLED = (8, 16, 32)
NEW = 64
SPACE = {"learning_rate": {"scale": "log", "min": 0.001, "max": 1.0}}


def _spec(root: str, batch_sizes, fitted: bool = True, max_rounds: int = 1, trials: int = 6):
    raw = {**default_spec_dict(), "store": root, "batch_sizes": list(batch_sizes),
           "trials_per_batch_size": trials, "max_steps": 400, "max_rounds": max_rounds,
           "search_space": SPACE, "fixed": {"momentum": 0.9}}
    if fitted:
        raw["new_batch_sizes"] = {"search": "fitted_box"}
    return parse_spec(raw)


def _finish(store, spec, trial, diverged: bool = False):
    """Finish ``trial``: it beats the goal sooner the nearer its learning rate is to
    0.01 * sqrt(B) (a square-root law), or diverges."""
    step = _steps(trial.parameters["learning_rate"], trial.batch_size)
    rows = ([{"step": 0, "val/classification_error": 0.9, "wall_time": 0.0},
             {"step": 10, "val/classification_error": float("nan"), "wall_time": 0.1}] if diverged
            else [{"step": 0, "val/classification_error": 0.9, "wall_time": 0.0},
                  {"step": step, "val/classification_error": 0.05, "wall_time": step / 100}])
    metadata = {"trial_id": trial.trial_id, "batch_size": trial.batch_size,
                "parameters": trial.parameters, "status": "INCOMPLETE",
                "max_steps": spec.max_steps[trial.batch_size]}
    outcome = ("INFEASIBLE", "diverged") if diverged else ("COMPLETE", "goal")
    finish_trial(store, spec, trial, metadata, rows, outcome, rows[-1]["step"], 4000, 1.0, 1.0,
                 log=lambda *_: None)


def _steps(learning_rate: float, batch_size: int) -> int:
    return 100 + int(20 * abs(math.log(learning_rate / (0.01 * math.sqrt(batch_size)))))


def _grown(root: str, **kwargs):
    """A study of SETTLED batch sizes, every trial finished, grown by NEW."""
    store = StudyStore(root)
    first = _spec(root, SETTLED, **kwargs)
    plan_stage(first, store, 1, 8, log=lambda *_: None)
    for b in SETTLED:
        for trial in batch_trials(first, b, store.read_rounds(first, b)):
            _finish(store, first, trial)
    return _spec(root, (*SETTLED, NEW), **kwargs), store


def _study_json(store, spec, batch_size=NEW) -> dict:
    return json.loads(store.fs.read_text(f"{store.batch_dir(spec, batch_size)}/study.json"))


def _write_rounds(store, spec, rounds: list[dict], batch_size=NEW) -> None:
    """An edit of study.json's rounds, written in both of its forms."""
    store.write_rounds(spec, batch_size, [SearchRound.from_dict(r) for r in rounds])


def test_a_new_batch_size_starts_from_the_fitted_box_recorded_as_its_own_round(tmp_path):
    spec, store = _grown(str(tmp_path))
    lines = []
    packs = plan_stage(spec, store, 1, 8, log=lines.append)
    [pack] = [p for p in packs if p.batch_size == NEW]
    assert pack.trial_ids == (1, 2, 3)  # half of trials_per_batch_size
    assert all(p.batch_size == NEW for p in packs)  # the settled batch sizes train nothing
    [raw] = _study_json(store, spec)["search_rounds"]
    assert raw["round"] == 1 and raw["trial_ids"] == [1, 3]
    assert raw["reason"].startswith("fitted box for batch size 64")
    assert raw["fitted_from"] == {"sources": [_best_and_near(spec, b) for b in SETTLED],
                                  "trials": 3}
    assert any(source["near_best"] for source in raw["fitted_from"]["sources"])
    box = raw["search_space"]["learning_rate"]
    assert (box["min"], box["max"]) != (0.001, 1.0)
    assert _study_json(store, spec)["parameter_configs"]["learning_rate"]["min_value"] == box["min"]
    assert any("round 1 samples trials 1-3 in a box fitted from batch sizes 8, 16, 32" in line
               for line in lines)
    # trials take their parameters from the box; re-planning derives the same round
    for trial in batch_trials(spec, NEW, store.read_rounds(spec, NEW)):
        assert box["min"] <= trial.parameters["learning_rate"] <= box["max"]
    again = []
    assert plan_stage(spec, store, 1, 8, log=again.append) == packs and again == []
    assert _study_json(store, spec)["search_rounds"] == [raw]


def _best_and_near(spec, batch_size) -> dict:
    """The source record of a settled batch size: its best trial (fewest steps, ties to the
    lower id) and those within 10% of its steps."""
    steps = {t.trial_id: _steps(t.parameters["learning_rate"], batch_size)
             for t in batch_trials(spec, batch_size, [SearchRound(1, 1, 6, spec.search_space)])}
    best = min(steps, key=lambda i: (steps[i], i))
    near = [i for i in steps if i != best and steps[i] <= steps[best] * 1.1]
    return {"batch_size": batch_size, "trial_id": best, "near_best": near}


def test_an_edited_box_is_healed_while_no_trial_used_it(tmp_path):
    spec, store = _grown(str(tmp_path))
    plan_stage(spec, store, 1, 8, log=lambda *_: None)
    derived = _study_json(store, spec)["search_rounds"]
    edited = json.loads(json.dumps(derived))
    edited[0]["search_space"]["learning_rate"]["max"] = 0.9
    edited[0]["trial_ids"] = [1, 6]
    _write_rounds(store, spec, edited)
    lines = []
    plan_stage(spec, store, 1, 8, log=lines.append)
    assert _study_json(store, spec)["search_rounds"] == derived
    assert any("search round 1: search_space (learning_rate)" in line
               and "study.json rewritten with the derived rounds" in line for line in lines)
    assert any("trial_ids [1, 6] where" in line for line in lines)


def test_a_box_off_by_floating_point_noise_is_kept_as_recorded(tmp_path):
    """The fit's last digits differ between machines and numpy versions: a recorded bound
    within 1e-6 (relative) of the recomputed one is the record, trained trials and all."""
    spec, store = _grown(str(tmp_path))
    plan_stage(spec, store, 1, 8, log=lambda *_: None)
    noisy = _study_json(store, spec)["search_rounds"]
    noisy[0]["search_space"]["learning_rate"]["max"] *= 1 + 1e-9
    _write_rounds(store, spec, noisy)
    recorded = _study_json(store, spec)["search_rounds"]
    _finish(store, spec, batch_trials(spec, NEW, store.read_rounds(spec, NEW), [1])[0])
    lines = []
    plan_stage(spec, store, 1, 8, log=lines.append)
    assert lines == [] and _study_json(store, spec)["search_rounds"] == recorded


def test_a_box_its_trials_were_trained_from_is_refused_in_one_line(tmp_path):
    spec, store = _grown(str(tmp_path))
    plan_stage(spec, store, 1, 8, log=lambda *_: None)
    edited = _study_json(store, spec)["search_rounds"]
    edited[0]["search_space"]["learning_rate"]["max"] = 0.9
    _write_rounds(store, spec, edited)
    trial = batch_trials(spec, NEW, read_rounds(_study_json(store, spec), spec), [1])[0]
    _finish(store, spec, trial)  # trained from the edited box
    before = _study_json(store, spec)
    with pytest.raises(DamagedRoundsError) as refused:
        plan_stage(spec, store, 1, 8, log=lambda *_: None)
    message = str(refused.value)
    assert "search round 1: search_space (learning_rate) is not the derived's" in message
    assert "trial 1 was already trained from it" in message and "\n" not in message
    assert _study_json(store, spec) == before


def test_a_source_no_round_holds_falls_back_and_is_fitted_again(tmp_path):
    """A record naming a trial its batch size does not hold cannot be derived: while no
    trial used it, the spec's round 1 replaces it and the planner fits the box anew."""
    spec, store = _grown(str(tmp_path))
    plan_stage(spec, store, 1, 8, log=lambda *_: None)
    derived = _study_json(store, spec)["search_rounds"]
    forged = json.loads(json.dumps(derived))
    forged[0]["fitted_from"]["sources"][0]["trial_id"] = 99
    _write_rounds(store, spec, forged)
    lines = []
    plan_stage(spec, store, 1, 8, log=lines.append)
    assert any("its fitted box cannot be derived from what it records (source trial 8/99 is not "
               "one of the trials" in line for line in lines)
    assert _study_json(store, spec)["search_rounds"] == derived


def test_too_few_settled_batch_sizes_search_the_spec_space(tmp_path):
    """A source whose search goes on (a top-up is due: a trial diverged) is not settled:
    two are left, and the laws need three."""
    root = str(tmp_path)
    store = StudyStore(root)
    first = _spec(root, SETTLED, max_rounds=2)
    plan_stage(first, store, 1, 8, log=lambda *_: None)
    for b in SETTLED:
        for trial in batch_trials(first, b, store.read_rounds(first, b)):
            _finish(store, first, trial, diverged=(b, trial.trial_id) == (16, 1))
    spec = _spec(root, (*SETTLED, NEW), max_rounds=2)
    lines = []
    plan_stage(spec, store, 1, 8, log=lines.append)
    [raw] = _study_json(store, spec)["search_rounds"]
    assert "fitted_from" not in raw and raw["trial_ids"] == [1, 6]
    assert any(line.startswith("batch size 64: searches the spec's search space, not a fitted "
                               "box (") for line in lines)


def test_the_option_off_searches_the_spec_space(tmp_path):
    spec, store = _grown(str(tmp_path), fitted=False)
    packs = plan_stage(spec, store, 1, 8, log=lambda *_: None)
    assert [p.trial_ids for p in packs] == [(1, 2, 3, 4, 5, 6)]
    assert "fitted_from" not in _study_json(store, spec)["search_rounds"][0]


def test_a_fitted_batch_size_wants_its_own_count_in_later_rounds():
    """Top-ups and re-searches count to the fitted round's trials, not trials_per_batch_size,
    and the lone fitted round 1 does not grow with trials_per_batch_size."""
    spec = _spec("/tmp/unused", SETTLED, max_rounds=3)
    box = (Parameter("learning_rate", "log", 0.01, 0.1),)
    fitted = SearchRound(1, 1, 3, box, "fitted box", None, FittedFrom((FittedSource(8, 2),), 3))
    assert wanted_trials(spec, [fitted]) == 3 and wanted_trials(spec, []) == 6
    assert read_rounds({"search_rounds": [fitted.to_dict()]}, spec) == [fitted]
    results = [TrialResult(1, {"learning_rate": 0.03}, True, None, None),
               TrialResult(2, {"learning_rate": 0.03}, False, 50, 0.05),
               TrialResult(3, {"learning_rate": 0.04}, False, 40, 0.05)]
    added = next_round(spec, [fitted], results, 2)
    assert added.reason == "top-up: 2 of 3 trials non-divergent" and added.first == 4
    assert added.space == box and added.fitted_from is None
    results[0] = TrialResult(1, {"learning_rate": 0.03}, False, 60, 0.05)
    assert next_round(spec, [fitted], results, 2) is None
    edge = [*results[:2], TrialResult(3, {"learning_rate": 0.0999}, False, 10, 0.05)]
    research = next_round(spec, [fitted], edge, 2)
    assert research.reason.startswith("re-search: best trial 3's learning_rate")
    assert len(research.trial_ids) == 3  # the fitted count, not 6


def test_the_option_parses_round_trips_and_may_change_between_runs():
    """Left out: the spec's space. Its count defaults to half the trials (KFP's floats read
    as integers), it survives the dict that crosses KFP, and turning it on for a grown
    study is no change of the study (the fingerprint and the compatibility check)."""
    off = _spec("/tmp/unused", SETTLED, fitted=False)
    assert not off.new_batch_sizes.fitted and off.new_batch_sizes.fitted_trials(6) == 3
    on = parse_spec({**off.to_dict(), "new_batch_sizes": {"search": "fitted_box", "trials": 6.0}})
    assert on.new_batch_sizes.fitted and on.new_batch_sizes.trials == 6
    assert parse_spec(on.to_dict()) == on and on.fingerprint() == off.fingerprint()
    check_same_study(off.to_dict(), on, "S")
    legacy = {k: v for k, v in off.to_dict().items() if k != "new_batch_sizes"}
    check_same_study(legacy, on, "S")  # registered before the field existed
    assert NewBatchSizes(FITTED_BOX, 0).fitted_trials(1) == 1


def test_the_report_names_the_fitted_batch_size_and_counts_to_its_own_trials(tmp_path):
    spec, store = _grown(str(tmp_path))
    plan_stage(spec, store, 1, 8, log=lambda *_: None)
    for trial in batch_trials(spec, NEW, store.read_rounds(spec, NEW)):
        _finish(store, spec, trial, diverged=trial.trial_id == 1)
    study = load_study(f"{tmp_path}/{spec.name}")
    notes = [n for n in trial_cap_notes(study) if n.startswith(f"batch size {NEW}")]
    assert notes[0].startswith(f"batch size {NEW} started from a fitted box: round 1's 3 trials "
                               "searched the box the metaparameter laws fit to the best trials 8/")
    assert notes[0].endswith("and it wants 3 non-divergent trials where the others want 6")
    assert notes[1] == (f"batch size {NEW}: 2 of 3 non-divergent: the round limit (1) was reached "
                        "(3 of at most 24 trials)")
    fitted = batch_rounds(study.study_json[NEW], [], 6)
    assert [(r["first"], r["last"]) for r in fitted] == [(1, 3)]  # not grown to 6


def test_a_top_up_of_a_fitted_batch_size_counts_to_its_own_trials(tmp_path):
    """One of the fitted round's 3 trials diverged: round 2 tops up to 3 non-divergent (not
    to trials_per_batch_size), and the run console counts its trials as added."""
    spec, store = _grown(str(tmp_path), max_rounds=2)
    plan_stage(spec, store, 1, 8, log=lambda *_: None)
    assert _study_json(store, spec)["search_rounds"][0]["trial_ids"] == [1, 3]
    for trial in batch_trials(spec, NEW, store.read_rounds(spec, NEW)):
        _finish(store, spec, trial, diverged=trial.trial_id == 1)
    [pack] = plan_stage(spec, store, 2, 8, log=lambda *_: None)
    [_, added] = _study_json(store, spec)["search_rounds"]
    assert added["reason"] == "top-up: 2 of 3 trials non-divergent"
    assert pack.trial_ids == tuple(range(4, added["trial_ids"][1] + 1))
    assert ProgressTracker(spec, store).poll().added == len(pack.trial_ids)


def test_a_run_listing_only_the_new_batch_size_keeps_its_fitted_round(tmp_path):
    """A study may run a subset of its batch sizes: the sources are read from the store."""
    spec, store = _grown(str(tmp_path))
    plan_stage(spec, store, 1, 8, log=lambda *_: None)
    recorded = _study_json(store, spec)["search_rounds"]
    _finish(store, spec, batch_trials(spec, NEW, store.read_rounds(spec, NEW), [1])[0])
    alone = _spec(str(tmp_path), (NEW,))
    lines = []
    [pack] = plan_stage(alone, store, 1, 8, log=lines.append)
    assert lines == [] and pack.trial_ids == (2, 3)
    assert _study_json(store, alone)["search_rounds"] == recorded
