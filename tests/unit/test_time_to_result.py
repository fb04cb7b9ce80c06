"""Time and cost to result on a hand-made store: the step-time profile from solo trial
timings (packed ones and short ones left out, a probe where trials are few), time = steps x
step time, cost = time x devices x price, the price's precedence (--price > spec > table),
the fastest and the cheapest batch size, the device limit (measured and projected), the
bootstrap interval around the point, and the report's section, files, figures and the
plan's B_simple in the critical batch sizes' section. Expected values are computed below
from the rows written."""

from __future__ import annotations

import json
import math
import statistics

import pandas as pd
import pytest

from batchscale.analysis.reading.study_reader import load_study
from batchscale.analysis.report import REPORT_FILES, analyse, kfp_metrics, summary_json, write_report
from batchscale.analysis.statistics.regimes import Estimate, RegimeFit, fit_regimes
from batchscale.analysis.statistics.step_times import read_probes, read_study_plan, step_time_profile
from batchscale.analysis.statistics.steps import crossings, steps_to_result
from batchscale.analysis.statistics.time_to_result import device_limit, spec_price, time_and_cost
from batchscale.cli.main import main
from batchscale.core.prices import device_price
from batchscale.store.filesystem import open_root
from batchscale.store.profiles import write_plan, write_step_times
from tests.unit.test_censoring import WORKLOAD, write_store

NAME = "timed"
STEPS = 600  # every trial trains to its budget (protocol full)
CORES = 4.0
# batch size -> devices, trial id -> (first step below the goal 0.08, seconds per step,
# metadata beyond the common keys)
SOLO = {"trained_together": 1, "trainer": "vmapped"}
PACKED = {"trained_together": 3, "trainer": "vmapped"}
TRIALS = {
    16: (1, {1: (400, 0.010, SOLO), 2: (480, 0.012, SOLO), 3: (560, 0.020, SOLO),
             4: (None, 5.0, {**SOLO, "steps": 10})}),  # diverged after 10 steps: too short
    32: (1, {1: (200, 0.015, SOLO), 2: (240, 0.016, SOLO), 3: (280, 0.030, SOLO)}),
    64: (1, {1: (120, 0.5, PACKED), 2: (160, 0.5, PACKED), 3: (200, 0.6, PACKED)}),
    # an older store: no train_seconds, trained_together, devices or device_kind
    128: (2, {1: (100, 0.015, {"trainer": "fit", "old": True}),
              2: (140, 0.02, {"trainer": "fit", "old": True})}),
}
PROBE = {"batch_size": 64, "devices": 1, "seconds_per_step": 0.02, "steps": 100,
         "precision": "float32", "device_kind": "cpu", "preset": "local", "cpu_cores": CORES,
         "measured": "2026-01-01T00:00:00+00:00", "source": "probe"}


def _rows(crossing):
    if crossing is None:
        return [(0, 0.9), (10, math.nan)]
    return [(0, 0.9), (crossing // 2, 0.3), (crossing, 0.07), (STEPS, 0.06)]


def build(root: str, probe: bool = True, spec_extra: dict | None = None) -> str:
    """The store: write_store's layout, then each trial's timing keys in its metadata.json."""
    batches = {b: (STEPS, {i: ("COMPLETE" if c else "INFEASIBLE", "budget" if c else "diverged",
                               0.01, _rows(c)) for i, (c, _s, _m) in trials.items()})
               for b, (_d, trials) in TRIALS.items()}
    location = write_store(root, batches, protocol="full", name=NAME, spec_extra=spec_extra)
    fs = open_root(root)
    for b, (devices, trials) in TRIALS.items():
        for i, (_c, seconds, extra) in trials.items():
            path = f"{NAME}/{WORKLOAD}/{b}/{i}/metadata.json"
            meta = json.loads(fs.read_text(path))
            steps = extra.get("steps", meta["steps"])
            meta.update(steps=steps, precision="float32", replicas=devices,
                        trainer=extra["trainer"], pack_size=3)
            if extra.get("old"):
                meta["examples_per_second"] = steps * b / (steps * seconds)
            else:
                meta.update(train_seconds=steps * seconds, examples_per_second=0.0,
                            trained_together=extra["trained_together"], device_kind="cpu",
                            devices=devices, preset="local", cpu_cores=CORES)
            fs.write_text(path, json.dumps(meta))
    if probe:
        write_step_times(fs, NAME, [PROBE])
    return location


@pytest.fixture
def location(tmp_path):
    return build(str(tmp_path / "store"))


def _time_cost(study, price: float = 0.0, resamples: int = 0):
    """What ``analyse`` computes for the report, without its figures (fast)."""
    goal = study.goals[0]
    crossed = crossings(study, goal)
    return time_and_cost(steps_to_result(study, goal), crossed,
                         step_time_profile(study.metadata, read_probes(study)),
                         fit_regimes(crossed, resamples=resamples), spec_price(study), price,
                         resamples=resamples)


def _seconds(b: int) -> list[float]:
    return [s for c, s, m in TRIALS[b][1].values() if m.get("steps", STEPS) >= 20]


def test_step_time_is_the_median_of_solo_timings_and_packed_ones_are_not_used(location):
    study = load_study(location)
    rows = step_time_profile(study.metadata, [PROBE]).table.set_index("batch_size")
    for b in (16, 32):  # 16's 10-step trial is left out: its 5 s/step would move the median
        assert rows.loc[b, "seconds_per_step"] == pytest.approx(statistics.median(_seconds(b)))
        assert (rows.loc[b, "source"], rows.loc[b, "timings"]) == ("trials", len(_seconds(b)))
    assert rows.loc[64, "source"] == "probe" and rows.loc[64, "timings"] == 0
    assert rows.loc[64, "seconds_per_step"] == PROBE["seconds_per_step"]  # not the packs' 0.5
    assert rows.loc[64, "packed_timings"] == 3
    assert rows.loc[64, "shared_seconds_per_trial_step"] == pytest.approx(
        statistics.median(_seconds(64)) / PACKED["trained_together"])
    # the old store's trials: step time from examples_per_second, devices from replicas
    assert (rows.loc[128, "source"], rows.loc[128, "devices"]) == ("trials (few)", 2)
    assert rows.loc[128, "seconds_per_step"] == pytest.approx(statistics.median(_seconds(128)))
    assert rows.loc[128, "preset"] == "local" and rows.loc[128, "cpu_cores"] == 1.0
    without = step_time_profile(study.metadata, []).table.set_index("batch_size")
    assert without.loc[64, "source"] == "packed only (not a solo time)"
    assert math.isnan(without.loc[64, "seconds_per_step"])


def test_time_cost_fastest_cheapest_and_interval(location):
    tc = _time_cost(load_study(location), price=2.0, resamples=200)
    table = tc.table.set_index("batch_size")
    profile = tc.profile.table.set_index("batch_size")
    for b in TRIALS:
        first = min(c for c, _s, _m in TRIALS[b][1].values() if c)
        row = table.loc[b]
        assert row["steps_to_result"] == first
        assert row["time_seconds"] == pytest.approx(first * profile.loc[b, "seconds_per_step"])
        assert row["cost"] == pytest.approx(row["time_seconds"] * TRIALS[b][0] / 3600 * 2.0)
        assert row["time_low"] <= row["time_seconds"] <= row["time_high"]
        assert row["cost_low"] <= row["cost"] <= row["cost_high"]
        assert row["time_low"] < row["time_high"]  # the bootstrap gives a real interval
    assert tc.fastest.batch_size == int(table["time_seconds"].idxmin())
    best = table["time_seconds"].min()  # the batch sizes within 10% are named with it
    assert set(tc.fastest.close) == {int(b) for b, t in table["time_seconds"].items()
                                     if t <= 1.1 * best and int(b) != tc.fastest.batch_size}
    assert tc.cheapest.batch_size == int(table["cost"].idxmin())
    assert tc.fastest.batch_size != tc.cheapest.batch_size  # 2 devices: fast, not cheap
    assert tc.price_origin == "--price" and tc.price_per_device_hour == 2.0
    assert tc.metrics()["cost_to_result"] == pytest.approx(tc.cheapest.value)


def test_price_precedence_flag_then_spec_then_table(tmp_path):
    spec_priced = load_study(build(str(tmp_path / "a"), spec_extra={"price_per_device_hour": 1.5}))
    assert _time_cost(spec_priced, price=2.0).price_per_device_hour == 2.0
    by_spec = _time_cost(spec_priced)
    assert (by_spec.price_per_device_hour, by_spec.price_origin) == (1.5, "study spec")
    by_table = _time_cost(load_study(build(str(tmp_path / "b"))))
    listed, _ = device_price("local", CORES)
    assert by_table.price_origin == "price table"
    assert by_table.price_per_device_hour == pytest.approx(listed)
    row = by_table.table.set_index("batch_size").loc[32]
    assert row["cost"] == pytest.approx(row["time_seconds"] / 3600 * listed)


def _fit(value, low, high, fitted=True):
    est = Estimate(value, low, high, "measured")
    return RegimeFit(fitted, "" if fitted else "too few", est, est, est, est if fitted else None,
                     (), (), 0, 0.95, ())


def test_device_limit_measured_and_projected():
    table = pd.DataFrame({"batch_size": [16, 32, 64, 64, 128], "devices": [1, 1, 1, 2, 4],
                          "time_seconds": [100.0, 60.0, 58.0, 40.0, 38.0]})
    limit = device_limit(table, None)  # 64 on 2 devices: 128 is not more than 10% faster
    assert (limit.basis, limit.batch_size, limit.beyond) == ("measured", 64, False)
    falling = table.assign(time_seconds=[100.0, 60.0, 58.0, 40.0, 30.0])
    assert (device_limit(falling).batch_size, device_limit(falling).beyond) == (128, True)
    one = table[table["devices"] == 1]
    projected = device_limit(one, _fit(800.0, 500.0, 1200.0))
    assert (projected.basis, projected.batch_size, projected.low) == ("projection", 800.0, 500.0)
    assert "ideal weak scaling" in projected.text
    unknown = device_limit(one, _fit(1.0, 1.0, 1.0, fitted=False))
    assert unknown.basis == "unknown" and "cannot be said" in unknown.text


def test_report_section_files_and_predicted_noise_scale(location, tmp_path, capsys):
    study = load_study(location)
    assert read_study_plan(study) is None
    write_plan(open_root(str(tmp_path / "store")), NAME, {"noise_scale": {
        "value": 50.0, "low": 30.0, "high": 90.0, "b_small": 8, "b_big": 512}})
    analysis = analyse(load_study(location), resamples=50)
    out = tmp_path / "out"
    written = write_report(analysis, str(out))
    page, markdown = written["pages"]["html"], written["pages"]["markdown"]
    assert "Time and cost to result" in page and "## Time and cost to result" in markdown
    assert 'alt="time_to_result.svg"' in page and 'alt="cost_to_result.svg"' in page
    assert page.count('alt="time_to_result.svg"') == 1  # in its section, not again in Figures
    assert f"the fastest batch size is {analysis.time_cost.fastest.batch_size}" in page
    assert "Step-time profile" in page and "<td>probe</td>" in page
    assert "B_simple predicted before the sweep: 50 [30, 90] (90%)" in page
    regimes = markdown[markdown.index("## Regimes"):markdown.index("## Critical batch size")]
    assert "B*, the fitted critical batch size: B* of S(B) = S_min (1 + B*/B)" in regimes
    b_star = analysis.fits[analysis.study.goals[0].label].b_star
    two_sided = b_star.status == "measured"  # else no ratio to a B* bounded on one side
    assert (f"B_simple/B* = {50 / b_star.value:.3g}" in markdown) == two_sided
    assert ("no ratio: the fit bounds B* on one side only" in markdown) != two_sided
    assert {"time_to_result.csv", "step_times.csv"} <= set(REPORT_FILES)
    assert {"time_to_result.csv", "step_times.csv", "time_to_result.svg",
            "cost_to_result.svg"} <= {p.name for p in out.iterdir()}
    doc = json.loads((out / "summary.json").read_text())
    assert [r["batch_size"] for r in doc["time_and_cost"]["per_batch_size"]] == sorted(TRIALS)
    assert doc["time_and_cost"]["summary"]["fastest"]["batch_size"] == analysis.time_cost.fastest.batch_size
    assert doc["critical_batch_sizes"]["b_simple"]["value"] == 50.0
    assert doc["critical_batch_sizes"]["b_simple"]["b_star_inside"] == (
        (30.0 <= b_star.value <= 90.0) if two_sided else None)
    assert summary_json(analysis)["time_and_cost"]["summary"]["price_date"]
    metrics = kfp_metrics(analysis)
    assert metrics["fastest_batch_size"] == analysis.time_cost.fastest.batch_size
    assert metrics["cheapest_batch_size"] == analysis.time_cost.cheapest.batch_size
    assert metrics["time_to_result_seconds"] == pytest.approx(analysis.time_cost.fastest.value)
    assert (metrics["cbs_noise_scale"], metrics["cbs_noise_scale_low"]) == (50.0, 30.0)


def test_cli_price_flag(location, tmp_path, capsys):
    assert main(["report", location, "--price", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--price" in err[0] and "greater than 0" in err[0]
    assert main(["report", location, "--resamples", "0", "--price", "3",
                 "--out", str(tmp_path / "cli")]) == 0
    line = [x for x in capsys.readouterr().out.splitlines()
            if x.startswith("  Time and cost to result on cpu (4 cores): ")]  # in the answer
    assert len(line) == 1 and "fastest batch size 128" in line[0] and "cheapest 64" in line[0]
    doc = json.loads((tmp_path / "cli" / "summary.json").read_text())
    assert doc["time_and_cost"]["summary"]["price_per_device_hour"] == 3.0


def test_a_batch_size_probed_on_several_device_counts_uses_its_probes_for_each(location):
    """The profile over device counts: batch 32's trials time themselves on 1 device (3
    solo timings), but once 32 is probed on 1 and 2 devices both rows come from the probes
    (one method across device counts), with the trials' median kept beside."""
    study = load_study(location)
    on = [{**PROBE, "batch_size": 32, "devices": d, "seconds_per_step": t}
          for d, t in ((1, 0.004), (2, 0.003))]
    rows = step_time_profile(study.metadata, [PROBE, *on]).table.set_index(["batch_size", "devices"])
    for d, t in ((1, 0.004), (2, 0.003)):
        assert rows.loc[(32, d), "source"] == "probe (device counts)"
        assert rows.loc[(32, d), "seconds_per_step"] == t
    assert rows.loc[(32, 1), "trials_seconds_per_step"] == pytest.approx(statistics.median(_seconds(32)))
    assert rows.loc[(16, 1), "source"] == "trials"  # one device count only: the trials' own
