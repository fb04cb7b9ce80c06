"""``batchscale calibrate STORE`` on a real (tiny) finished digits study: both predictors
probed for real and set against the sweep's fitted B*, an unfinished study left out with its
reason, the branched probe capped as ``plan`` caps it (10% of the sweep's examples), nothing
of either study touched, a second calibration re-using the probes, and a study the probes
cannot run on (another backend) left out with its reason, not the whole calibration refused."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from batchscale.cli.main import main
from batchscale.search.trials import make_trials
from batchscale.store.layout import StudyStore
from batchscale.training.trainer import run_trial
from batchscale.validation import parse_spec
from tests.conftest import share_datasets, tiny_spec_dict


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_calibrate_sets_each_predictor_against_the_fitted_b_star(digits_store, tmp_path, capsys):
    root = str(tmp_path / "store")
    share_datasets(digits_store, root)
    spec = parse_spec(tiny_spec_dict(root, batch_sizes=[16, 64, 256], max_steps=200,
                                     goals=[{"metric": "classification_error", "value": 0.3}],
                                     search_space={"learning_rate": {"scale": "log", "min": 0.05,
                                                                     "max": 0.5}}))
    store = StudyStore(root)
    store.register_study(spec)
    for trial in make_trials(spec):
        run_trial(spec, trial, store, log=lambda *_: None)
    store.register_study(parse_spec(tiny_spec_dict(root, name="waiting")))  # nothing trained
    before = {name: _files(tmp_path / "store" / name) for name in ("tiny", "waiting")}

    assert main(["calibrate", root, "--probe-seconds", "8", "--branch-seconds", "8"]) == 0
    out = capsys.readouterr().out
    raw = json.loads((tmp_path / "store/calibration/calibration.json").read_text())
    assert raw["skipped"] == [{"study": "waiting", "why": "unfinished: 4 trial(s) still to train"}]
    rows = {r["predictor"]: r for r in raw["rows"]}
    assert "b_simple" in rows  # B_branch too unless its base run was too short to branch
    swept = rows["b_simple"]["sweep_examples"]
    for r in rows.values():
        assert r["study"] == "tiny" and r["source"] == "probed by calibrate"
        assert r["fitted"]["name"] == "b_star_fit" and r["fitted"]["value"] > 0
        assert 0 < r["predicted"]["examples"] and r["sweep_examples"] == swept
        assert abs(r["share_of_sweep"] - r["predicted"]["examples"] / swept) < 1e-12
        if r["ratio"] is not None:
            assert abs(r["ratio"] - r["predicted"]["value"] / r["fitted"]["value"]) < 1e-9
    if "b_branched" in rows:  # its branches stop at plan's share of the sweep's examples
        assert f"branches within {int(0.1 * swept):,} examples" in rows["b_branched"]["predicted"]["note"]
    assert "waiting: unfinished" in out and "B_simple:" in out
    assert (tmp_path / "store/calibration/calibration.html").exists()
    assert before == {name: _files(tmp_path / "store" / name) for name in ("tiny", "waiting")}

    assert main(["calibrate", root]) == 0  # the probes are re-used, not run again
    again = json.loads((tmp_path / "store/calibration/calibration.json").read_text())
    assert {r["source"] for r in again["rows"]} == {"probed by calibrate (re-used)"}
    assert [r["predicted"] for r in again["rows"]] == [r["predicted"] for r in raw["rows"]]

    spec_file = tmp_path / "store/tiny/study_spec.json"  # as if trained on another backend
    spec_file.write_text(json.dumps({**json.loads(spec_file.read_text()), "backend": "tensorflow"}))
    capsys.readouterr()
    assert main(["calibrate", root, "--rerun"]) == 0  # that study left out, not the calibration
    third = json.loads((tmp_path / "store/calibration/calibration.json").read_text())
    why = dict((s["study"], s["why"]) for s in third["skipped"])
    assert third["rows"] == [] and why["tiny"].startswith("the probes cannot run on it: the "
                                                          "probes need the JAX backend")
