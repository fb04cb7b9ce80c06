"""A study's results as pandas DataFrames, from a local folder or a gs:// store.

    from batchscale.analysis.results import open_study

    study = open_study("gs://my-bucket/studies/my-study")   # STORE/STUDY
    study.steps_to_result()   # one row per goal and batch size (validation split)
    study.trials()            # one row per trial: status, steps run, metaparameters
    study.measurements()      # every evaluation: batch_size, trial_id, step, metrics
    study.goal_steps()        # per trial, goal and split: the first step that beats it
    study.study               # the analysis' view (batchscale.analysis.reading.study_reader.Study)

Read-only: nothing is written to the store (``batchscale report STORE/STUDY`` rebuilds
the report files). Tables are computed from the trials themselves, through the one study
reader (``study_reader.load_study``), so they are current even while a study is still running.
"""

from __future__ import annotations

from functools import cached_property

import pandas as pd

from batchscale.analysis.reading.study_reader import KEYS, TRIAL_COLUMNS, Study, load_study
from batchscale.analysis.statistics.goal_steps import goal_steps_table
from batchscale.analysis.statistics.steps import all_steps_to_result
from batchscale.core.spec import SpecError, StudySpec
from batchscale.store.layout import StudyStore
from batchscale.validation import parse_spec


def split_location(location: str) -> tuple[str, str]:
    """``STORE/STUDY`` -> (store root, study name); local folders and gs:// alike."""
    root, _, study = location.rstrip("/").rpartition("/")
    if not study or not root or root in ("gs:", "gs:/"):
        raise SpecError(f"study: {location!r} must be STORE/STUDY, e.g. ./batchscale-store/quickstart "
                        "or gs://bucket/prefix/study")
    return root, study


class StudyResults:
    """One study in a store. Trials are read once, on first use."""

    def __init__(self, location: str):
        self.root, self.name = split_location(location)
        self.store = StudyStore(self.root)
        if not self.store.fs.exists(f"{self.name}/study_spec.json"):
            raise SpecError(f"study: no study {self.name!r} in {self.store.url()} "
                            "(no study_spec.json there)")

    @cached_property
    def spec(self) -> StudySpec:
        """The study's spec as registered in the store, with the store it was read from."""
        return parse_spec({**self.store.read_spec_dict(self.name), "store": self.root})

    @cached_property
    def study(self) -> Study:
        """The study as the analysis loads it (batchscale.analysis.reading.study_reader)."""
        return load_study(f"{self.root}/{self.name}")

    def trials(self) -> pd.DataFrame:
        """One row per trial: batch_size, trial_id, status, steps, evaluations, wall_time,
        then its metaparameters as columns (learning_rate, momentum, ...)."""
        study = self.study
        counts = study.measurements.groupby(KEYS).size().rename("evaluations").reset_index()
        table = study.trials.merge(counts, on=KEYS, how="left")
        table["evaluations"] = table["evaluations"].fillna(0).astype("int64")
        wall_time = study.metadata.reindex(columns=[*KEYS, "wall_time"])
        table = table.merge(wall_time, on=KEYS, how="left")
        return table[TRIAL_COLUMNS + ["evaluations", "wall_time"] + study.metaparameters]

    def measurements(self) -> pd.DataFrame:
        """Every evaluation of every trial (long format): batch_size, trial_id, step and one
        column per split/metric as the trials recorded them."""
        return self.study.measurements.copy()

    def goal_steps(self) -> pd.DataFrame:
        """Per trial, goal and split (val, train): the first step that beats the goal, why
        the trial stopped and whether it stopped early before it could (``censored``)."""
        return goal_steps_table(self.study)

    def steps_to_result(self, split: str = "val") -> pd.DataFrame:
        """Per goal and batch size: steps and examples to result, the best trial and its
        metaparameters, how many trials completed, diverged and reached the goal, and what
        early stopping leaves unknown (``censored``: "" exact, "upper bound", "stopped
        early"; ``stopped_early``: the trials behind it; see ``censoring``)."""
        return all_steps_to_result(self.study, splits=(split,))


def open_study(location: str) -> StudyResults:
    """The study at ``location`` (a local path or gs://bucket/prefix/study)."""
    return StudyResults(location)
