"""Load one workload's trials into pandas, from our studies or the paper's released database.

Both use the paper's layout (``<dataset>/<model>/<optimizer>/<batch_size>/study.json`` and
``.../<trial_id>/metadata.json + measurements.csv``), so one loader reads:

- one of our studies, ``STORE/STUDY`` (it has ``study_spec.json``: goals, search space and
  the data set come from the spec);
- the paper's database or a copy of part of it, at any folder that holds exactly one
  workload (``.../fashion_mnist/simple_cnn_base/momentum``, or a parent with only that one
  below it). Its goals default to those its study.json files carry (ours do), else the
  workload registry's (the paper's Figure 1 goals,
  ``batchscale.workloads.defaults.default_goal``) unless given.

This is the one reader of a study's folders: the report, compare, the results API
(``batchscale.analysis.results``) and the pipeline's aggregate step all load through it.

Damaged files are never believed (``batchscale.analysis.reading.study_files``): a trial whose
metadata.json or measurements.csv is missing, unreadable or not what was written, a
batch-size folder without a readable study.json, and for our studies a listed batch size
without one, are left out and listed in ``Study.damaged``, each naming its file. So are
step times outside physical bounds (``batchscale.core.step_time_bounds``): a trial's
timings in its metadata.json (only the timing is left out) and our study's step-time
probe files (``Study.step_times`` holds the believed ones).

Conventions are the paper's released analysis code's: only COMPLETE trials count by
default; ``num_trials=N`` keeps the N lowest trial ids among the counted statuses at each
batch size (an error if a batch size has fewer); INCOMPLETE and INFEASIBLE trials are kept
in ``Study.trials`` so they can be counted, but never reach a goal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from batchscale.analysis.reading.censoring import refuse_unmeasurable, study_json_goals
from batchscale.analysis.reading.completeness import round_trial_ids, unplanned
from batchscale.analysis.reading.study_files import (
    Damage,
    believed_timing,
    find_workload,
    join,
    list_workload,
    read_probes,
    read_spec,
    read_trial,
)
from batchscale.core.goals import Goal, check_goal, parse_goal
from batchscale.core.names import STATUSES
from batchscale.core.spec import SpecError, StudySpec
from batchscale.store.filesystem import Storage, open_root
from batchscale.store.json_files import read_json_object
from batchscale.workloads.defaults import default_goal, paper_workloads

KEYS = ["batch_size", "trial_id"]
TRIAL_COLUMNS = [*KEYS, "status", "steps"]  # then one column per metaparameter


class UnreadableStudy(SpecError):
    """Nothing could be analysed: every batch-size folder is damaged (``damaged`` says how)."""

    def __init__(self, message: str, damaged: list[Damage]):
        super().__init__(message)
        self.damaged = damaged


@dataclass
class Study:
    """One workload's trials as tables. ``trials`` holds every loaded trial (all statuses:
    batch_size, trial_id, status, steps, then one column per metaparameter);
    ``measurements`` every evaluation of those trials (batch_size, trial_id, step, then
    ``<split>/<metric>`` columns); ``metadata`` each trial's metadata.json fields that are
    plain values (batch_size, trial_id, then status, steps, wall_time, stop_reason, ...;
    dicts such as parameters left out), kept apart so that only metaparameters are extra
    columns of ``trials``. ``counted`` are the statuses that can reach a goal.
    ``damaged``: the files that could not be read or believed, and what was left out.
    ``step_times``: our study's step-time probe records that can be believed
    (``batchscale.store.profiles``; None: not read, the paper's layout)."""

    name: str
    location: str
    dataset: str
    model: str
    optimizer: str
    layout: str  # "batchscale" (one of our studies) or "paper"
    goals: tuple[Goal, ...]
    trials: pd.DataFrame
    measurements: pd.DataFrame
    metadata: pd.DataFrame
    study_json: dict[int, dict] = field(default_factory=dict)
    spec: StudySpec | None = None
    counted: tuple[str, ...] = ("COMPLETE",)
    train_examples: int | None = None
    damaged: list[Damage] = field(default_factory=list)
    step_times: list[dict] | None = None

    @property
    def title(self) -> str:
        workload = f"{self.dataset}/{self.model}/{self.optimizer}"
        return self.name if self.name == workload else f"{self.name}: {workload.replace('/', ' / ')}"

    @property
    def batch_sizes(self) -> list[int]:
        return sorted(int(b) for b in self.trials["batch_size"].unique())

    @property
    def metaparameters(self) -> list[str]:
        """The metaparameter columns of ``trials`` (learning_rate, momentum, ...)."""
        return [c for c in self.trials.columns if c not in TRIAL_COLUMNS]

    @property
    def search_space(self) -> dict[int, dict]:
        """batch size -> the study.json ``parameter_configs`` (the searched ranges)."""
        return {b: s.get("parameter_configs") or {} for b, s in self.study_json.items()}

    def counted_trials(self) -> pd.DataFrame:
        return self.trials[self.trials["status"].isin(self.counted)]

    def counted_measurements(self) -> pd.DataFrame:
        keys = self.counted_trials()[["batch_size", "trial_id"]]
        return self.measurements.merge(keys, on=["batch_size", "trial_id"])


def load_study(location: str, goals=None, num_trials: int | None = None,
               statuses: tuple[str, ...] = ("COMPLETE",)) -> Study:
    """The workload at ``location`` (local path or gs://), see the module docstring.

    ``goals``: Goals or goal strings (``batchscale.core.goals.parse_goal``), each checked
    against the metrics the trials measured; default: the study spec's, or the workload
    registry's goal (the paper's Figure 1 goal) for the paper's data. A given goal that
    the study's early stopping made unmeasurable (stricter than the goals its trials
    stopped at, and no trial ran to its budget) is refused with one line
    (``censoring.refuse_unmeasurable``). Raises ``UnreadableStudy`` when no batch size
    could be read.
    """
    bad = sorted(set(statuses) - set(STATUSES))
    if bad or not statuses:
        raise SpecError(f"statuses: {bad or '[]'} not allowed; choose from {', '.join(STATUSES)}")
    if num_trials is not None and num_trials < 1:
        raise SpecError(f"num_trials: {num_trials} must be a positive integer")
    fs = open_root(location.rstrip("/") or location)
    location = fs.root  # absolute: a bare relative "quickstart" is ./quickstart
    damaged: list[Damage] = []
    spec = read_spec(fs, location, damaged)
    if spec is not None:
        workload_path = spec.workload.path
        name = spec.name
    else:
        workload_path = find_workload(fs, location)
        name = "/".join(fs.url(workload_path).rstrip("/").split("/")[-3:])
    study_json, trials, measurements, metadata = _read_workload(fs, workload_path, spec, damaged)
    probes = read_probes(fs, damaged) if spec is not None else None
    if not study_json:
        where = fs.url(workload_path)
        if damaged:
            raise UnreadableStudy(f"study: no readable batch-size folder under {where}", damaged)
        raise SpecError(f"study: no batch-size folders with study.json under {where}")
    spec_url = fs.url("study_spec.json")
    if (spec is None and workload_path.count("/") == 2 and _ours(study_json)
            and all(d.file != spec_url for d in damaged)):
        damaged.append(Damage(spec_url, "is missing (the study.json files "
                              "are batchscale's)", "read as the paper's layout: goals from "
                              "study.json, no check of the trials the study expects"))
    first = next(iter(study_json.values()))
    dataset, model, optimizer = (first.get(k, "?") for k in ("dataset", "model", "optimizer"))
    trials = _first_trials(trials, num_trials, statuses, fs.url(workload_path))
    measurements = measurements.merge(trials[KEYS], on=KEYS)
    metadata = metadata.merge(trials[KEYS], on=KEYS)
    goal_list = _resolve_goals(goals, spec, dataset, model, measurements, study_json)
    study = Study(name=name, location=fs.url(workload_path) if workload_path else location,
                 dataset=dataset, model=model, optimizer=optimizer,
                 layout="batchscale" if spec else "paper", goals=goal_list, trials=trials,
                 measurements=measurements, metadata=metadata, study_json=study_json, spec=spec,
                 counted=tuple(statuses), train_examples=_train_examples(spec),
                 damaged=damaged, step_times=probes)
    if goals:  # a goal the protocol stopped the trials short of is refused, not "not reached"
        refuse_unmeasurable(study)
    return study


def _ours(study_json: dict[int, dict]) -> bool:
    """Whether the study.json files were written by batchscale (they carry our goals)."""
    return any(isinstance(s.get("goals"), list) for s in study_json.values())


def _read_workload(fs: Storage, workload: str, spec: StudySpec | None, damaged: list[Damage]):
    """Every readable batch size's study.json and trials; what cannot be read goes to
    ``damaged`` (a listed batch size of our study without a study.json included)."""
    study_json, trial_rows, meta_rows, tables = {}, [], [], []
    listed = list_workload(fs, workload)
    for batch_size in sorted(set(listed) | set(spec.batch_sizes if spec else ())):
        folder = listed.get(batch_size, {})
        batch_dir = join(workload, str(batch_size))
        trial_dirs = sorted((t for t in folder if t), key=int)
        has_json = "study.json" in folder.get("", set())
        if not has_json and not trial_dirs and not (spec and batch_size in spec.batch_sizes):
            continue  # a stray folder, not a batch size
        meta, problem = (read_json_object(fs, f"{batch_dir}/study.json") if has_json
                         else (None, "is missing"))
        if meta is not None:
            try:
                key = int(meta.get("batch_size", batch_size))
            except (TypeError, ValueError):
                problem = f"has batch_size {str(meta.get('batch_size'))[:40]!r}, not an integer"
        if problem:
            damaged.append(Damage(fs.url(f"{batch_dir}/study.json"), problem,
                                  f"batch size {batch_size} left out ({len(trial_dirs)} trial "
                                  "folders)", batch_size))
            continue
        study_json[key] = meta
        planned = round_trial_ids(meta, spec) if spec is not None else None
        for trial_dir in trial_dirs:
            present = {f"{batch_dir}/{trial_dir}/{name}" for name in folder[trial_dir]}
            read = read_trial(fs, f"{batch_dir}/{trial_dir}", present, key, int(trial_dir))
            if isinstance(read, Damage):
                damaged.append(read)
            if not isinstance(read, tuple):
                continue  # damaged, or not started yet
            trial, table = read
            trial_id = int(trial.get("trial_id", trial_dir))
            problem = unplanned(planned, trial_id) if planned is not None else None
            if problem:
                damaged.append(Damage(fs.url(f"{batch_dir}/{trial_dir}/metadata.json"), problem,
                                      f"trial {key}/{trial_id} left out", key, trial_id))
                continue
            trial = believed_timing(fs, f"{batch_dir}/{trial_dir}", trial, key, trial_id, damaged)
            trial_rows.append({"batch_size": key, "trial_id": trial_id,
                               "status": trial.get("status", "INCOMPLETE"),
                               "steps": trial.get("steps"), **(trial.get("parameters") or {})})
            meta_rows.append({"batch_size": key, "trial_id": trial_id, **{
                k: v for k, v in trial.items()
                if k not in KEYS and not isinstance(v, (dict, list))}})
            if table is not None:
                tables.append(table.assign(batch_size=key, trial_id=trial_id))
    measurements = (pd.concat(tables, ignore_index=True) if tables
                    else pd.DataFrame(columns=[*KEYS, "step"]).astype("int64"))
    measurements = measurements[[*KEYS, "step"] + [c for c in measurements.columns
                                                   if c not in (*KEYS, "step")]]
    return (study_json, _table(trial_rows, TRIAL_COLUMNS), measurements,
            _table(meta_rows, KEYS))


def _table(records: list[dict], head: list[str]) -> pd.DataFrame:
    """One row per trial, sorted by batch size and id: ``head`` first, then the other keys."""
    table = pd.DataFrame.from_records(records) if records else pd.DataFrame(columns=head)
    table = table[head + sorted(c for c in table.columns if c not in head)]
    return table.astype({k: "int64" for k in KEYS}).sort_values(KEYS, ignore_index=True)


def _first_trials(trials: pd.DataFrame, num_trials, statuses, where: str) -> pd.DataFrame:
    """Apply "first N trials": the N lowest ids among counted statuses per batch size; other
    statuses are kept up to the last id taken (they were spent on the way there)."""
    if num_trials is None:
        return trials
    kept = []
    for batch_size, group in trials.groupby("batch_size", sort=True):
        counted = group[group["status"].isin(statuses)]
        if len(counted) < num_trials:
            raise SpecError(f"num_trials: {num_trials} requested but batch size {batch_size} has "
                            f"only {len(counted)} trials with status {'/'.join(statuses)} in {where}")
        last = counted["trial_id"].iloc[num_trials - 1]
        kept.append(group[(group["trial_id"] <= last)
                          & (~group["status"].isin(statuses) | group["trial_id"].isin(
                              counted["trial_id"].iloc[:num_trials]))])
    return pd.concat(kept, ignore_index=True)


def _resolve_goals(goals, spec, dataset, model, measurements, study_json) -> tuple[Goal, ...]:
    if goals:
        measured = sorted({c.split("/", 1)[1] for c in measurements.columns if "/" in c})
        resolved = []
        for g in goals:
            if isinstance(g, Goal):
                resolved.append(check_goal(g, measured))
                continue
            goal, split = parse_goal(g, measured)
            if split and f"{split}/{goal.metric}" not in measurements.columns:
                raise SpecError(f"goal: {g!r}: the trials measured no {split}/{goal.metric}")
            resolved.append(goal)
        return tuple(resolved)
    if spec is not None:
        return tuple(spec.goals)
    ours = study_json_goals(study_json)
    if ours:
        return ours
    default = default_goal(dataset, model)
    if default is not None:
        return (default,)
    raise SpecError(f"goal: no default goal for {dataset}/{model}; pass one (e.g. --goal "
                    f"classification_error<0.3); defaults exist for {', '.join(paper_workloads())}")


def _train_examples(spec: StudySpec | None) -> int | None:
    """Training-set size of our study's prepared data set (epochs in budget figures)."""
    if spec is None:
        return None
    root = open_root(spec.store)
    path = f"datasets/{spec.workload.dataset}/info.json"
    info, problem = read_json_object(root, path)
    if problem:
        return None
    count = (info.get("examples") or {}).get("train") or (info.get("split_sizes") or {}).get("train")
    return int(count) if count else None
