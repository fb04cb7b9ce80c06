"""How good each critical-batch-size predictor has been: predicted against fitted, per study.

A predictor (the noise scale B_simple, the branched estimate B_branch: the probe rows of
``core.critical_batch_size.DEFINITIONS``) is cheap and runs before a sweep; the fitted B*
of a finished, re-tuned sweep is what it tries to predict. ``batchscale calibrate STORE``
(``planning.calibrate_store``) sets the two side by side for every finished study of a
store; this module holds the typed result, the per-predictor summary, the choice of the
best-calibrated predictor that ``batchscale plan`` then uses, and calibration.json.

The summary of a predictor over its studies: the median ratio predicted / fitted, the
median |log2 ratio| (how many doublings off, either way: the score the choice uses), how
often it lands within 2x, how often the fitted B* lies inside its interval, and its
compute as a share of each sweep's trained examples. The best-calibrated predictor is the
one with the smallest median |log2 ratio| over at least ``MIN_STUDIES`` studies (ties: the
cheaper); with fewer studies there is no choice to make and ``plan`` says so.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np

from batchscale.core.critical_batch_size import DEFINITIONS, PROBE, CbsEstimate
from batchscale.store.json_files import read_json_object

CALIBRATION_FOLDER = "calibration"  # under the store root
CALIBRATION_FILE = f"{CALIBRATION_FOLDER}/calibration.json"
CALIBRATION_FORMAT = 1
MIN_STUDIES = 2  # a predictor's record is a record from this many studies on
PREDICTORS = tuple(name for name, d in DEFINITIONS.items() if d.source == PROBE)


@dataclass(frozen=True)
class CalibrationRow:
    """One predictor on one finished study: ``predicted`` against the sweep's ``fitted`` B*
    (both ``CbsEstimate``), the sweep's trained examples, and where the prediction came
    from (a plan.json written before the sweep, or a probe run by ``calibrate``)."""

    study: str
    workload: str
    goal: str
    predicted: CbsEstimate
    fitted: CbsEstimate
    sweep_examples: int
    source: str

    @property
    def scored(self) -> bool:
        """The sweep pins B* down on both sides (a B* the fit bounds on one side only,
        ``≥ 715``, has no ratio to score: the row is shown, not counted)."""
        f = self.fitted
        return bool(f.low > 0 and math.isfinite(f.high) and math.isfinite(f.value) and f.value > 0)

    @property
    def ratio(self) -> float:
        p, f = self.predicted.value, self.fitted.value
        return p / f if self.scored and math.isfinite(p) else math.nan

    @property
    def covered(self) -> bool:
        """The fitted B* lies inside the predicted interval."""
        return bool(self.predicted.low <= self.fitted.value <= self.predicted.high)

    @property
    def overlap(self) -> bool:
        """The two intervals overlap."""
        return bool(self.predicted.low <= self.fitted.high and self.fitted.low <= self.predicted.high)

    @property
    def share(self) -> float:
        """The predictor's training examples as a share of the sweep's."""
        spent = self.predicted.examples
        return spent / self.sweep_examples if spent is not None and self.sweep_examples else math.nan

    def to_dict(self) -> dict:
        def num(x):
            return float(x) if math.isfinite(x) else None
        return {"study": self.study, "workload": self.workload, "goal": self.goal,
                "predictor": self.predicted.name, "predicted": self.predicted.to_dict(),
                "fitted": self.fitted.to_dict(), "sweep_examples": self.sweep_examples,
                "source": self.source, "ratio": num(self.ratio), "covered": self.covered,
                "overlap": self.overlap, "share_of_sweep": num(self.share)}

    @classmethod
    def from_dict(cls, raw: dict) -> CalibrationRow:
        return cls(str(raw["study"]), str(raw.get("workload", "")), str(raw.get("goal", "")),
                   CbsEstimate.from_dict(raw["predicted"]), CbsEstimate.from_dict(raw["fitted"]),
                   int(raw["sweep_examples"]), str(raw.get("source", "")))


@dataclass(frozen=True)
class PredictorRecord:
    """A predictor over its studies (module docstring)."""

    name: str
    studies: int
    median_ratio: float
    median_log2_error: float
    within_2x: int
    covered: int
    median_share: float
    max_share: float

    @property
    def symbol(self) -> str:
        return DEFINITIONS[self.name].symbol

    def sentence(self) -> str:
        """'B_branch has been within 2x of the fitted B* on 4 of 5 studies (median
        predicted/fitted 0.81, 0.42 doublings off; B* inside its interval on 3; it spent a
        median 1.2% of a sweep's examples)'."""
        return (f"{self.symbol} has been within 2x of the fitted B* on {self.within_2x} of "
                f"{self.studies} {'study' if self.studies == 1 else 'studies'} (median "
                f"predicted/fitted {self.median_ratio:.2g}, {self.median_log2_error:.2g} "
                f"doublings off; B* inside its interval on {self.covered}; it spent a median "
                f"{_percent(self.median_share)} of a sweep's training examples)")

    def to_dict(self) -> dict:
        def num(x):
            return float(x) if math.isfinite(x) else None
        return {"predictor": self.name, "symbol": self.symbol, "studies": self.studies,
                "median_ratio": num(self.median_ratio),
                "median_log2_error": num(self.median_log2_error), "within_2x": self.within_2x,
                "covered": self.covered, "median_share_of_sweep": num(self.median_share),
                "max_share_of_sweep": num(self.max_share), "sentence": self.sentence()}


def _percent(share: float) -> str:
    if not math.isfinite(share):
        return "an unknown share"
    return f"{100 * share:.2g}%"


def summarize(rows: list[CalibrationRow]) -> list[PredictorRecord]:
    """One record per predictor that has a ratio on some study, in PREDICTORS order."""
    out = []
    for name in PREDICTORS:  # rows without a ratio (B* one-sided, no prediction) not counted
        mine = [r for r in rows if r.predicted.name == name and math.isfinite(r.ratio) and r.ratio > 0]
        if not mine:
            continue
        ratios = np.array([r.ratio for r in mine])
        shares = np.array([r.share for r in mine], dtype=float)
        shares = shares[np.isfinite(shares)]
        out.append(PredictorRecord(
            name, len(mine), float(np.median(ratios)), float(np.median(np.abs(np.log2(ratios)))),
            int(np.sum(np.abs(np.log2(ratios)) <= 1.0)), sum(r.covered for r in mine),
            float(np.median(shares)) if len(shares) else math.nan,
            float(np.max(shares)) if len(shares) else math.nan))
    return out


def best_predictor(records: list[PredictorRecord]) -> PredictorRecord | None:
    """The best-calibrated predictor (module docstring), or None."""
    eligible = [r for r in records if r.studies >= MIN_STUDIES]
    if not eligible:
        return None
    return min(eligible, key=lambda r: (r.median_log2_error,
                                        r.median_share if math.isfinite(r.median_share) else math.inf))


@dataclass
class Calibration:
    """Every row, the studies left out (study, why) and the per-predictor records."""

    rows: list[CalibrationRow]
    skipped: list[tuple[str, str]] = field(default_factory=list)
    created: str = ""
    seconds: float = 0.0

    @property
    def records(self) -> list[PredictorRecord]:
        return summarize(self.rows)

    @property
    def best(self) -> PredictorRecord | None:
        return best_predictor(self.records)

    def to_dict(self) -> dict:
        best = self.best
        return {"format": CALIBRATION_FORMAT, "created": self.created,
                "seconds": round(self.seconds, 1),
                "definitions": {n: DEFINITIONS[n].definition for n in ("b_star_fit", *PREDICTORS)},
                "rows": [r.to_dict() for r in self.rows],
                "skipped": [{"study": s, "why": w} for s, w in self.skipped],
                "predictors": [r.to_dict() for r in self.records],
                "best": best.name if best else None}

    @classmethod
    def from_dict(cls, raw: dict) -> Calibration:
        return cls([CalibrationRow.from_dict(r) for r in raw.get("rows", [])],
                   [(str(s["study"]), str(s["why"])) for s in raw.get("skipped", [])],
                   str(raw.get("created", "")), float(raw.get("seconds", 0.0)))


def read_calibration(fs) -> tuple[Calibration | None, str | None]:
    """(the store's calibration, None) or (None, why not: missing or unreadable)."""
    raw, problem = read_json_object(fs, CALIBRATION_FILE)
    if raw is None:
        return None, f"{fs.url(CALIBRATION_FILE)} {problem or 'is missing'}"
    try:
        if raw.get("format") != CALIBRATION_FORMAT:
            raise ValueError(f"format {raw.get('format')!r}, not {CALIBRATION_FORMAT}")
        return Calibration.from_dict(raw), None
    except (KeyError, TypeError, ValueError) as err:
        return None, f"{fs.url(CALIBRATION_FILE)} is not a calibration ({err})"


def write_calibration(fs, calibration: Calibration) -> str:
    fs.write_text(CALIBRATION_FILE, json.dumps(calibration.to_dict(), indent=2))
    return fs.url(CALIBRATION_FILE)
