"""The typed record of an experiment's comparison (``analysis.experiment.compare_experiment``
fills it; ``pages.experiment_pages`` reads it), and the one dispatch from an axis to its
findings (``findings``, ``b_star_exponent``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from batchscale.analysis.statistics.b_star_exponent import ExponentFit, fit_exponent
from batchscale.analysis.statistics.comparison import Comparison
from batchscale.analysis.statistics.findings import (
    PAIRWISE_TESTS,
    Curve,
    Finding,
    pairwise_findings,
)
from batchscale.analysis.statistics.goal_ladder import goal_findings
from batchscale.core.experiment import ExperimentSpec


@dataclass
class ExperimentComparison:
    """``experiment``: the spec; ``comparison``: ``compare_studies`` of its studies (fit,
    normalised at ``experiment.normalize_at``; a goal ladder: its one study once per goal);
    ``curves``: one per compared curve, in the axis's order, each with its steps table and
    regime fit; ``findings``: the sentences; ``exponent``: B*(D) on a data_size axis;
    ``figures``: file name -> SVG bytes (the overlays and B*(D)); ``robustness``: study ->
    a robustness table (``statistics.robustness.robustness_table``), shown when given."""

    experiment: ExperimentSpec
    comparison: Comparison
    curves: list[Curve]
    findings: list[Finding]
    exponent: ExponentFit | None = None
    figures: dict[str, bytes] = field(default_factory=dict)
    robustness: dict[str, pd.DataFrame] = field(default_factory=dict)

    @property
    def fits(self) -> dict:
        """curve name -> its RegimeFit (None: not fitted)."""
        return {c.name: c.fit for c in self.curves}

    @property
    def resolved(self) -> int:
        return sum(f.resolved for f in self.findings)


def curves_of(comparison: Comparison) -> list[Curve]:
    """One Curve per compared study (or goal), in the comparison's order."""
    table = comparison.table
    return [Curve(entry.study, table[table["study"] == entry.study].reset_index(drop=True), entry.fit)
            for entry in comparison.studies]


def experiment_findings(experiment: ExperimentSpec,
                        curves: list[Curve]) -> tuple[list[Finding], ExponentFit | None]:
    """The findings of the experiment's axis (``findings`` module docstring)."""
    axis = experiment.axis
    if axis.kind == "goal":
        return goal_findings(curves), None
    if axis.kind == "data_size":
        values = [s.value for s in experiment.studies]
        exponent = fit_exponent(values, [c.fit for c in curves], [c.name for c in curves])
        return [exponent.finding], exponent
    if axis.kind in PAIRWISE_TESTS:
        return pairwise_findings(axis.kind, axis.label, curves), None
    raise ValueError(f"axis: unknown kind {axis.kind!r}")
