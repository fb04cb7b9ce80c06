"""The typed record of one study's analysis: what the figures and pages read.

``report.analyse`` fills it (its figures drawn by the figures room); every section of the
pages takes it, so a page reads named, typed fields instead of an untyped ``analysis``.
It lives in the statistics room, below the rooms that read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from batchscale.analysis.reading.completeness import UnfinishedTrial
from batchscale.analysis.reading.study_files import Damage
from batchscale.analysis.reading.study_reader import Study
from batchscale.analysis.statistics.answer import Answer, answer
from batchscale.analysis.statistics.metaparameter_law_fits import MetaparameterLaws
from batchscale.analysis.statistics.regimes import RegimeFit
from batchscale.analysis.statistics.search_rounds import batch_rounds, planned_ids
from batchscale.analysis.statistics.time_to_result import TimeCost
from batchscale.core.protocols import PAPER, StoppingProtocol


@dataclass
class Analysis:
    """Everything the report shows, for one study (what ``analyse`` returns).

    ``steps``: steps to result per goal, split and batch size (``steps.SUMMARY_COLUMNS``);
    ``fits``: goal label -> regime fit on the validation metric; ``optimal``: the best
    trial's metaparameters per batch size with the scaling heuristics (first goal);
    ``warnings``: search-space edge warnings (dicts as summary.json holds them, each with a
    ``message``); ``counts``: trials per batch size; ``budgets``: best validation metric
    under step and example budgets (``censored``: early stopping may hide a better one);
    ``trials``: ``study.trials`` with ``reached`` and ``stopped_early`` flags (first goal,
    validation); ``notes``: caveats of the fits; ``figures``: file name -> (SVG, caption);
    ``goal_steps``: the per-trial goal table (``goal_steps.goal_steps_table``);
    ``unfinished``: the trials the study's spec expects that are missing or not finished
    (``completeness.unfinished_trials``; always empty without a spec: the paper's data);
    ``damaged``: the files the study reader could not use, each with what it left out.
    ``protocol``: the study's stopping protocols, records in table order
    (``censoring.study_protocol``; ``censoring.protocol_label`` names them);
    ``censoring``: what each steps table is based on under it (``censoring_notes``);
    ``rounds``: per batch size and search round, what it searched and found
    (``search_rounds.rounds_table``), ``round_notes``: whether each batch size has the
    non-divergent trials the spec wants; ``cost``: trained steps and examples against what
    protocol full would have trained (``training_cost``). ``time_cost``: time and cost to
    result per batch size with the step-time profile and the fastest, cheapest and device
    limit (``time_to_result.TimeCost``, first goal, validation; None: not computed);
    ``predicted_noise_scale``: plan.json's B_simple beside the fitted B* (None: no plan).
    ``robustness``: per goal (validation) and batch size, the k-th best trial's steps to
    result for k = 1 .. ``robustness_k`` and the share of trials that reached the goal
    (``robustness.all_robustness``; empty: not computed). ``laws``: the best
    metaparameters against batch size, fitted, and the search boxes they propose
    (``metaparameter_law_fits``; None: not computed).
    """

    study: Study
    steps: pd.DataFrame
    fits: dict[str, RegimeFit]
    optimal: pd.DataFrame
    warnings: list[dict]
    counts: pd.DataFrame
    budgets: pd.DataFrame
    trials: pd.DataFrame
    notes: list[str]
    figures: dict[str, tuple[bytes, str]]
    goal_steps: pd.DataFrame
    unfinished: list[UnfinishedTrial] = field(default_factory=list)
    protocol: tuple[StoppingProtocol, ...] = (PAPER,)
    censoring: list[str] = field(default_factory=list)
    rounds: pd.DataFrame = field(default_factory=pd.DataFrame)
    round_notes: list[str] = field(default_factory=list)
    cost: dict = field(default_factory=dict)
    time_cost: TimeCost | None = None
    predicted_noise_scale: dict | None = None
    robustness: pd.DataFrame = field(default_factory=pd.DataFrame)
    robustness_k: int = 3
    laws: MetaparameterLaws | None = None

    @property
    def damaged(self) -> list[Damage]:
        return self.study.damaged

    @property
    def answer(self) -> Answer:
        """What the report says first (``answer.answer``): fewest steps, fastest and
        cheapest, where perfect scaling ends and returns vanish, what the protocol saved."""
        goal = self.study.goals[0].label
        return answer(goal, self.steps, self.fits.get(goal), self.time_cost, self.cost,
                      len(self.damaged), len(self.unfinished), self.expected_trials)

    @property
    def expected_trials(self) -> int | None:
        """How many trials the study's spec and search rounds ask for (None without a
        spec): every id of each batch size's rounds, at least trials_per_batch_size."""
        spec = self.study.spec
        if spec is None:
            return None
        rounds = {b: batch_rounds(self.study.study_json.get(b) or {}, [], spec.trials_per_batch_size)
                  for b in spec.batch_sizes}
        return sum(len(planned_ids(r)) for r in rounds.values())
