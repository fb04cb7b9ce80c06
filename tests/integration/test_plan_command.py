"""``batchscale plan`` end to end on the digits workload: the noise probe, the timing
probes, the proposed grid and the estimate, printed and written to the store."""

from __future__ import annotations

import json

import yaml

from batchscale.cli.main import main
from batchscale.store.filesystem import open_root
from batchscale.store.profiles import read_plan, read_step_times
from tests.conftest import tiny_spec_dict


def _spec_file(tmp_path, **changes):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_spec_dict(str(tmp_path / "store"), **changes)))
    return str(path)


def test_plan_on_digits_prints_and_writes_the_plan(tmp_path, capsys):
    spec = _spec_file(tmp_path, batch_sizes=[16, 64], max_steps=400, protocol="race")
    assert main(["plan", spec, "--probe-seconds", "60"]) == 0
    out = capsys.readouterr().out
    fs = open_root(str(tmp_path / "store"))
    plan = read_plan(fs, "tiny")
    noise = plan["noise_scale"]
    assert 0 < noise["low"] <= noise["value"] <= noise["high"]
    assert noise["b_small"] == 16 and noise["b_big"] > 16 and noise["measurements"] >= 8
    assert f"B_simple = {noise['value']:.3g} [{noise['low']:.3g}, {noise['high']:.3g}]" in out
    assert [r["source"] for r in read_step_times(fs, "tiny")] == ["probe", "probe"]
    assert {r["batch_size"] for r in plan["step_times"]} == {16, 64}
    grid = plan["grid"]
    assert grid == sorted(grid) and len(grid) >= 5 and max(grid) <= 1297  # digits' training split
    assert "proposed batch sizes" in out and " ".join(map(str, grid)) in out
    estimate = plan["estimate"]
    assert estimate["protocol"] == "race" and estimate["trials"] == 4
    assert 0 < estimate["trained_steps"] <= estimate["full_steps"] == 2 * 400 * 2
    assert estimate["device_hours"] > 0 and estimate["cost"] > 0 and estimate["wall_seconds"] > 0
    assert [r["crossing"] is not None or r["diverged"] or r["steps"] > 0 for r in plan["probe"]["runs"]]
    assert "estimate for the spec's study (2 batch sizes x 2 trials, protocol race)" in out
    # what a pack task pays besides steps, measured on a fresh process and a real pack of one
    costs = plan["pack_costs"]
    assert costs["startup_seconds"] > costs["light_task_seconds"] > 0
    assert 0 < costs["evaluation_seconds"] < 1 and costs["trial_seconds"] >= 0
    assert "2 pack task(s) at once, longest first" in out
    # both predictions of the critical batch size, each under its definition's name, with
    # the examples its probe spent; the branched one from the noise probe's best run
    cbs = plan["critical_batch_sizes"]
    assert set(cbs) == {"b_simple", "b_branched"}
    assert cbs["b_simple"]["value"] == noise["value"] and cbs["b_simple"]["examples"] > 0
    branched = plan["branched"]
    assert cbs["b_branched"] == branched["estimate"] and branched["rule"] == "sqrt"
    assert branched["batch_size"] == 16 and branched["tolerance"] == 0.01
    first = min((r for r in plan["probe"]["runs"] if r["crossing"] is not None),
                key=lambda r: r["crossing"], default=None)
    if first is not None:  # the first run to reach the goal; its crossing is the base run's end
        assert branched["parameters"] == first["parameters"] and branched["steps"] == first["crossing"]
    assert branched["examples"] >= branched["steps"] * 16 and branched["points"]
    assert cbs["b_branched"]["examples"] == branched["examples"]
    for name in ("b_simple", "b_branched"):
        assert cbs[name]["definition"] in out
    assert "branched trajectory (base batch size 16" in out
    assert json.loads(json.dumps(plan)) == plan  # plain JSON
    # nothing of the study was registered or trained
    assert not fs.exists("tiny/study_spec.json")


def test_plan_refuses_bad_input_in_one_line(tmp_path, capsys):
    spec = _spec_file(tmp_path)
    assert main(["plan", spec, "--probe-seconds", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("batchscale: error: --probe-seconds: 0") and "\n" not in err
    for flags, start in ((["--branch-rule", "cubic"], "--branch-rule: 'cubic' is not allowed"),
                         (["--branch-tolerance", "-1"], "--branch-tolerance: -1 is not allowed"),
                         (["--branch-seconds", "0"], "--branch-seconds: 0 is not allowed")):
        assert main(["plan", spec, *flags]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"batchscale: error: {start}") and "\n" not in err
    spec = _spec_file(tmp_path, backend="tensorflow")
    assert main(["plan", spec]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("batchscale: error: the probes need the JAX backend") and "\n" not in err
    assert not (tmp_path / "store").exists()  # refused before anything was written
