"""The critical batch size predicted before a sweep: the probes ``plan`` and ``calibrate``
both run, the same way, and the choice of the one the plan goes by.

Two predictors (``core.critical_batch_size``): the gradient noise scale B_simple from the
noise probe (``probe``, ``noise_scale``) and the branched local estimate B_branch from
short branches of the noise probe's best run (``branched_probe``). ``calibrate`` runs both
on finished studies and records how far each has been from the fitted B*
(``calibration``); ``chosen_prediction`` then lets the plan of a new study in that store go
by the best-calibrated one, and say how far it has been right before. Without a
calibration (or without a predictor with a record), the plan goes by B_simple, as it did
before there was a choice.
"""

from __future__ import annotations

import math

from batchscale.core.critical_batch_size import DEFINITIONS, CbsEstimate
from batchscale.core.errors import InputError
from batchscale.core.spec import StudySpec
from batchscale.planning.branched_estimate import BranchedProbe
from batchscale.planning.calibration import Calibration
from batchscale.planning.noise_scale import NoiseScale
from batchscale.planning.probe import NoiseProbe

DEFAULT_PREDICTOR = "b_simple"
BRANCH_SHARE = 0.1  # the branched probe's branches stop at this share of the study's trained
# examples (issue 29: at most 10% of the sweep's): ``plan``'s estimate, ``calibrate``'s count
NOISE_NOTE = ("bootstrap interval over the probe's final window of measurements; examples: the "
              "probe runs' training and the gradient measurements")


def prediction_estimates(probe: NoiseProbe, noise: NoiseScale,
                         branched: BranchedProbe | None) -> dict[str, CbsEstimate]:
    """The predictions, by definition name (B_branch only where the branched probe ran)."""
    out = {"b_simple": CbsEstimate("b_simple", noise.value, noise.low, noise.high, noise.level,
                                   probe.examples, NOISE_NOTE)}
    if branched is not None:
        out["b_branched"] = branched.estimate
    return out


def branched_prediction(spec: StudySpec, pipeline, probe: NoiseProbe, rule: str, tolerance: float,
                        seconds: float, max_examples: int | None,
                        log) -> tuple[BranchedProbe | None, str]:
    """The branched probe from the noise probe's best run (``NoiseProbe.best_run``), its
    base run as long as that run took to its goal (else as far as it trained), its
    branches within ``max_examples``; or None and why not (every run diverged; a base run
    too short to branch)."""
    from batchscale.planning.branched_probe import branched_probe

    best = probe.best_run()
    if best is None:
        reason = "every noise probe run diverged"
    else:
        steps = best.crossing if best.crossing is not None else int(best.rows[-1]["step"])
        try:
            return branched_probe(spec, pipeline, best.parameters, probe.batch_size, rule=rule,
                                  tolerance=tolerance, max_seconds=seconds, log=log,
                                  steps=steps, max_examples=max_examples), ""
        except InputError as err:
            reason = str(err)
    log(f"branched probe skipped: {reason}")
    return None, reason


def probe_data(spec: StudySpec, store, log):
    """The study's data set, prepared and opened for the probes (refused in one line where
    they cannot run), with the spec's backend selected."""
    from batchscale.planning.probe import check_backend, check_probeable
    from batchscale.training.keras_setup import select_backend
    from batchscale.workloads.dataset_registry import dataset_for, open_pipeline
    from batchscale.workloads.prepare import prepare_dataset

    check_backend(spec)
    prepare_dataset(store, dataset_for(spec.workload), log)
    pipeline = open_pipeline(store, dataset_for(spec.workload), spec.workload.options)
    check_probeable(spec, pipeline)  # before Keras is imported for a backend
    select_backend(spec.backend)
    return pipeline


def probe_predictions(spec: StudySpec, *, probe_seconds: float, rule: str, tolerance: float,
                      branch_seconds: float, log=print,
                      max_examples: int | None = None) -> list[CbsEstimate]:
    """Both predictions for a study, as ``plan`` makes them (at the spec's smallest batch
    size, from nothing of its sweep; the branches within ``max_examples``: ``calibrate``,
    which runs this on finished studies, passes ``branch_cap`` of the sweep's examples as
    ``plan`` passes it of its estimate of them)."""
    from batchscale.planning.noise_scale import estimate_noise_scale
    from batchscale.planning.probe import noise_probe
    from batchscale.store.layout import StudyStore

    pipeline = probe_data(spec, StudyStore(spec.store), log)
    small = min(spec.batch_sizes)
    probe = noise_probe(spec, pipeline, small, spec.max_steps[small], probe_seconds, log)
    noise = estimate_noise_scale(probe.measurements)
    branched, _ = branched_prediction(spec, pipeline, probe, rule, tolerance, branch_seconds,
                                      max_examples, log)
    return list(prediction_estimates(probe, noise, branched).values())


def branch_cap(trained_examples: float) -> int:
    """The most training examples the branched probe may spend for a study that trains
    ``trained_examples`` (``BRANCH_SHARE`` of them)."""
    return int(BRANCH_SHARE * trained_examples)


def chosen_prediction(estimates: dict[str, CbsEstimate], calibration: Calibration | None,
                      why_none: str | None = None) -> tuple[CbsEstimate, str]:
    """(the prediction the plan goes by, one line saying which and how far it has been
    right before): the calibration's best-calibrated predictor where this plan measured it
    (a finite value), else ``DEFAULT_PREDICTOR``."""
    best = calibration.best if calibration is not None else None
    measured = best is not None and best.name in estimates and math.isfinite(
        estimates[best.name].value)  # a probe that ran but measured nothing (NaN) is no guide
    if measured:
        return estimates[best.name], (
            f"the plan goes by {best.symbol}, the best-calibrated predictor in this store: "
            f"{best.sentence()}")
    default = estimates[DEFAULT_PREDICTOR]
    symbol = DEFINITIONS[DEFAULT_PREDICTOR].symbol
    if best is not None:
        why = (f"this store's best-calibrated predictor, {best.symbol}, "
               + ("measured nothing here" if best.name in estimates else "was not measured here"))
    elif calibration is not None:
        records = calibration.records
        why = ("no predictor in this store's calibration has a record on 2 or more studies"
               + (f" ({'; '.join(r.sentence() for r in records)})" if records else ""))
    else:
        why = f"no calibration in this store ({why_none or 'none found'})"
    return default, (f"the plan goes by {symbol}: {why}; `batchscale calibrate STORE` on "
                     "finished studies says which predictor has been right")
