"""``batchscale calibrate STORE``: every predictor against every finished study of a store.

For each study of the store (a study folder at its root, or one of an experiment's), in
name order:

- the sweep's side: the fitted B* for the study's first goal (``statistics.regimes``) and
  the examples the sweep trained (``statistics.training_cost``); a study with unfinished
  trials, or whose B* could not be fitted, is left out with one line saying why;
- the predictors' side: what a ``batchscale plan`` wrote for the study before its sweep
  (plan.json's ``critical_batch_sizes``), else the probes run now, on this machine, at the
  study's smallest batch size, exactly as ``plan`` runs them (``planning.predictions``;
  the branches within the same share of the sweep's trained examples as ``plan`` allows
  them of its estimate).
  Probes run here are kept in ``<store>/calibration/probes/`` and re-used by the next
  calibration (``rerun`` probes again), so a calibration interrupted part-way loses at
  most the study it was probing, and one that grows by a study probes only that one. A
  study the probes refuse (another backend, a streamed data set, too few gradient
  measurements) is left out with that line; the other studies are still calibrated.

Nothing of a study is written or changed; the calibration goes to
``<store>/calibration/`` (``calibration_pages``).
"""

from __future__ import annotations

import json
import math
import time

from batchscale.core.critical_batch_size import CbsEstimate
from batchscale.core.errors import InputError
from batchscale.planning.calibration import (
    CALIBRATION_FOLDER,
    PREDICTORS,
    Calibration,
    CalibrationRow,
)
from batchscale.store.json_files import read_json_object

PROBES_FOLDER = f"{CALIBRATION_FOLDER}/probes"
NOT_STUDIES = ("datasets", CALIBRATION_FOLDER)


def study_folders(fs) -> list[str]:
    """The store's studies, as paths under its root: ``quickstart``, ``figure4_local/sgd``."""
    out = []
    for name in fs.list_dirs(""):
        if name in NOT_STUDIES:
            continue
        if fs.exists(f"{name}/study_spec.json"):
            out.append(name)
        elif fs.exists(f"{name}/experiment.json"):
            out += [f"{name}/{child}" for child in fs.list_dirs(name)
                    if fs.exists(f"{name}/{child}/study_spec.json")]
    return out


def sweep_side(location: str):
    """(study, fitted B* as a CbsEstimate, the sweep's trained examples, goal label), or a
    str saying why the study cannot be calibrated against."""
    from batchscale.analysis.reading.completeness import unfinished_trials
    from batchscale.analysis.reading.study_reader import load_study
    from batchscale.analysis.statistics.critical_batch_sizes import critical_batch_sizes
    from batchscale.analysis.statistics.regimes import fit_regimes
    from batchscale.analysis.statistics.steps import crossings
    from batchscale.analysis.statistics.training_cost import training_cost
    from batchscale.store.layout import StudyStore

    study = load_study(location)
    if study.spec is None:
        return "not one of batchscale's studies (no study_spec.json): no probe can run on it"
    unfinished = unfinished_trials(study.spec, StudyStore(study.spec.store))
    if unfinished:
        return f"unfinished: {len(unfinished)} trial(s) still to train"
    goal = study.goals[0]
    fit = fit_regimes(crossings(study, goal, "val"))
    fitted = critical_batch_sizes(fit, None, goal.label).get("b_star_fit")
    if fitted is None or not math.isfinite(fitted.value):
        return f"no fitted B* for {goal.label}: {fit.reason or 'the fit did not resolve it'}"
    return study, fitted, int(training_cost(study)["trained_examples"]), goal.label


def _planned(fs, folder: str) -> list[CbsEstimate]:
    """The predictions a plan.json of the study holds (before its sweep)."""
    from batchscale.analysis.statistics.critical_batch_sizes import plan_estimates
    from batchscale.store.profiles import read_plan

    return [e for name, e in plan_estimates(read_plan(fs, folder)).items() if name in PREDICTORS]


def _cached(fs, folder: str) -> list[CbsEstimate] | None:
    raw, _ = read_json_object(fs, f"{PROBES_FOLDER}/{_key(folder)}.json")
    try:
        return [CbsEstimate.from_dict(e) for e in raw["estimates"]] if raw else None
    except (KeyError, TypeError, ValueError):
        return None  # a damaged cache is probed again, never believed


def _key(folder: str) -> str:
    return folder.replace("/", "__")


def calibrate_store(root: str, *, probe_seconds: float, branch_rule: str, branch_tolerance: float,
                    branch_seconds: float, rerun: bool = False, log=print) -> Calibration:
    """The calibration of every study under ``root`` (module docstring)."""
    from batchscale.analysis.statistics.critical_batch_sizes import estimate_text
    from batchscale.planning.predictions import branch_cap, probe_predictions
    from batchscale.store.filesystem import open_root
    from batchscale.training.step_timing import now_iso

    started = time.time()
    fs = open_root(root)
    folders = study_folders(fs)
    rows, skipped = [], []
    for i, folder in enumerate(folders, start=1):
        log(f"[{i}/{len(folders)}] {folder}")
        side = sweep_side(fs.url(folder))
        if isinstance(side, str):
            log(f"  left out: {side}")
            skipped.append((folder, side))
            continue
        study, fitted, examples, goal = side
        predictions, source = _planned(fs, folder), "plan.json, written before the sweep"
        if {e.name for e in predictions} != set(PREDICTORS):
            cached = None if rerun else _cached(fs, folder)
            predictions, source = cached or [], "probed by calibrate (re-used)"
            if cached is None:
                try:
                    predictions = probe_predictions(
                        study.spec, probe_seconds=probe_seconds, rule=branch_rule,
                        tolerance=branch_tolerance, branch_seconds=branch_seconds,
                        log=lambda line: log(f"  {line}"), max_examples=branch_cap(examples))
                except InputError as err:  # this study only: the others are still calibrated
                    why = f"the probes cannot run on it: {err}"
                    log(f"  left out: {why}")
                    skipped.append((folder, why))
                    continue
                source = "probed by calibrate"
                fs.write_text(f"{PROBES_FOLDER}/{_key(folder)}.json", json.dumps(
                    {"study": folder, "created": now_iso(),
                     "estimates": [e.to_dict() for e in predictions]}, indent=2))
        label = f"{study.dataset} / {study.model} / {study.optimizer}"
        for estimate in predictions:
            row = CalibrationRow(folder, label, goal, estimate, fitted, examples, source)
            rows.append(row)
            ratio = f"ratio {row.ratio:.3g}" if row.scored else "not scored (B* one-sided)"
            log(f"  {estimate.definition.symbol} = {estimate_text(estimate)} against fitted "
                f"B* {estimate_text(fitted)}: {ratio}, {100 * row.share:.2g}% of the sweep's examples")
    return Calibration(rows, skipped, now_iso(), time.time() - started)
