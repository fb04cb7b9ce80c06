"""Load one workload's trials into pandas, from our studies or the paper's released database.

Both use the paper's layout (``<dataset>/<model>/<optimizer>/<batch_size>/study.json`` and
``.../<trial_id>/metadata.json + measurements.csv``), so one loader reads:

- one of our studies, ``STORE/STUDY`` (it has ``study_spec.json``: goals, search space and
  the data set come from the spec);
- the paper's database or a copy of part of it, at any folder that holds exactly one
  workload (``.../fashion_mnist/simple_cnn_base/momentum``, or a parent with only that one
  below it). Its goals default to the workload registry's (the paper's Figure 1 goals,
  ``batchscale.workloads.defaults.default_goal``) unless given.

This is the one reader of a study's folders: the report, compare, the results API
(``batchscale.analysis.results``) and the pipeline's aggregate step all load through it.

Conventions are the paper's released analysis code's: only COMPLETE trials count by
default; ``num_trials=N`` keeps the N lowest trial ids among the counted statuses at each
batch size (an error if a batch size has fewer); INCOMPLETE and INFEASIBLE trials are kept
in ``Study.trials`` so they can be counted, but never reach a goal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pandas as pd

from batchscale.core.goals import Goal, check_goal, parse_goal
from batchscale.core.names import STATUSES
from batchscale.core.spec import SpecError, StudySpec
from batchscale.store.checkpoints import CHECKPOINTS_DIR
from batchscale.store.filesystem import Storage, open_root
from batchscale.store.layout import parse_measurements
from batchscale.validation import parse_spec
from batchscale.workloads.defaults import default_goal, paper_workloads

MAX_WORKLOAD_DEPTH = 5  # how far below a location to look for batch-size folders
# A study's own folders beside its workload: never a data set's (report/: aggregate's output;
# checkpoints/<batch_size>/<trial_id>.npz: unfinished trials' checkpoints).
NOT_DATA = ("report", CHECKPOINTS_DIR)
KEYS = ["batch_size", "trial_id"]
TRIAL_COLUMNS = [*KEYS, "status", "steps"]  # then one column per metaparameter


@dataclass
class Study:
    """One workload's trials as tables. ``trials`` holds every loaded trial (all statuses:
    batch_size, trial_id, status, steps, then one column per metaparameter);
    ``measurements`` every evaluation of those trials (batch_size, trial_id, step, then
    ``<split>/<metric>`` columns); ``metadata`` each trial's metadata.json fields that are
    plain values (batch_size, trial_id, then status, steps, wall_time, stop_reason, ...;
    dicts such as parameters left out), kept apart so that only metaparameters are extra
    columns of ``trials``. ``counted`` are the statuses that can reach a goal."""

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
    registry's goal (the paper's Figure 1 goal) for the paper's data.
    """
    bad = sorted(set(statuses) - set(STATUSES))
    if bad or not statuses:
        raise SpecError(f"statuses: {bad or '[]'} not allowed; choose from {', '.join(STATUSES)}")
    if num_trials is not None and num_trials < 1:
        raise SpecError(f"num_trials: {num_trials} must be a positive integer")
    location = location.rstrip("/")
    fs = open_root(location)
    spec = _our_spec(fs, location)
    if spec is not None:
        w = spec.workload
        workload_path = f"{w.dataset}/{w.model}/{w.optimizer}"
        name = spec.name
    else:
        workload_path = _single_workload(fs, location)
        name = "/".join(fs.url(workload_path).rstrip("/").split("/")[-3:])
    batch_dirs = _batch_dirs(fs, workload_path)
    if not batch_dirs:
        raise SpecError(f"study: no batch-size folders with study.json under {fs.url(workload_path)}")
    study_json, trials, measurements, metadata = _read_workload(fs, batch_dirs)
    first = next(iter(study_json.values()))
    dataset, model, optimizer = (first.get(k, "?") for k in ("dataset", "model", "optimizer"))
    trials = _first_trials(trials, num_trials, statuses, fs.url(workload_path))
    measurements = measurements.merge(trials[KEYS], on=KEYS)
    metadata = metadata.merge(trials[KEYS], on=KEYS)
    goal_list = _resolve_goals(goals, spec, dataset, model, measurements)
    return Study(name=name, location=fs.url(workload_path) if workload_path else location,
                 dataset=dataset, model=model, optimizer=optimizer,
                 layout="batchscale" if spec else "paper", goals=goal_list, trials=trials,
                 measurements=measurements, metadata=metadata, study_json=study_json, spec=spec,
                 counted=tuple(statuses), train_examples=_train_examples(fs, location, spec))


def _our_spec(fs: Storage, location: str) -> StudySpec | None:
    if not fs.exists("study_spec.json"):
        return None
    # Parsed once, with the store it was read from (a copied store keeps its old root).
    return parse_spec({**json.loads(fs.read_text("study_spec.json")), "store": location.rpartition("/")[0]})


def _is_batch_dir(fs: Storage, path: str) -> bool:
    name = path.rpartition("/")[2]
    return name.isdigit() and fs.exists(f"{path}/study.json")


def _join(base: str, name: str) -> str:
    return f"{base}/{name}" if base else name


def _batch_dirs(fs: Storage, workload: str) -> list[str]:
    dirs = [_join(workload, d) for d in fs.list_dirs(workload) if d.isdigit()]
    return sorted((d for d in dirs if fs.exists(f"{d}/study.json")),
                  key=lambda d: int(d.rpartition("/")[2]))


def _single_workload(fs: Storage, location: str) -> str:
    """The one folder (relative to ``location``) whose children are batch-size folders."""
    found, frontier = [], [""]
    for _ in range(MAX_WORKLOAD_DEPTH + 1):
        nxt = []
        for path in frontier:
            children = [_join(path, d) for d in fs.list_dirs(path) if d not in NOT_DATA]
            if any(_is_batch_dir(fs, c) for c in children if c.rpartition("/")[2].isdigit()):
                found.append(path)
            else:
                nxt += children
        frontier = nxt
    if len(found) == 1:
        return found[0]
    if not found and not fs.list_dirs("") and not fs.list_files(""):
        raise SpecError(f"study: {location} is empty or does not exist; give STORE/STUDY "
                        "(e.g. ./batchscale-store/quickstart) or a folder of the paper's layout")
    if not found:
        raise SpecError(f"study: {location} holds no study (no <batch_size>/study.json within "
                        f"{MAX_WORKLOAD_DEPTH} folders, and no study_spec.json)")
    shown = ", ".join(f"{location}/{f}" for f in found[:8])
    more = f" and {len(found) - 8} more" if len(found) > 8 else ""
    raise SpecError(f"study: {location} holds {len(found)} workloads; name one: {shown}{more}")


def _read_workload(fs: Storage, batch_dirs: list[str]):
    study_json, trial_rows, meta_rows, tables = {}, [], [], []
    for batch_dir in batch_dirs:
        meta = json.loads(fs.read_text(f"{batch_dir}/study.json"))
        batch_size = int(meta.get("batch_size", batch_dir.rpartition("/")[2]))
        study_json[batch_size] = meta
        for trial_dir in sorted((d for d in fs.list_dirs(batch_dir) if d.isdigit()), key=int):
            base = f"{batch_dir}/{trial_dir}"
            if not fs.exists(f"{base}/metadata.json"):
                continue  # not started yet
            trial = json.loads(fs.read_text(f"{base}/metadata.json"))
            trial_id = int(trial.get("trial_id", trial_dir))
            trial_rows.append({"batch_size": batch_size, "trial_id": trial_id,
                               "status": trial.get("status", "INCOMPLETE"),
                               "steps": trial.get("steps"), **(trial.get("parameters") or {})})
            meta_rows.append({"batch_size": batch_size, "trial_id": trial_id, **{
                k: v for k, v in trial.items()
                if k not in KEYS and not isinstance(v, (dict, list))}})
            if fs.exists(f"{base}/measurements.csv"):
                table = parse_measurements(fs.read_text(f"{base}/measurements.csv"))
                tables.append(table.assign(batch_size=batch_size, trial_id=trial_id))
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


def _resolve_goals(goals, spec, dataset, model, measurements) -> tuple[Goal, ...]:
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
    default = default_goal(dataset, model)
    if default is not None:
        return (default,)
    raise SpecError(f"goal: no default goal for {dataset}/{model}; pass one (e.g. --goal "
                    f"classification_error<0.3); defaults exist for {', '.join(paper_workloads())}")


def _train_examples(fs: Storage, location: str, spec: StudySpec | None) -> int | None:
    """Training-set size of our study's prepared data set (epochs in budget figures)."""
    if spec is None:
        return None
    root = open_root(location.rpartition("/")[0])
    path = f"datasets/{spec.workload.dataset}/info.json"
    if not root.exists(path):
        return None
    info = json.loads(root.read_text(path))
    count = (info.get("examples") or {}).get("train") or (info.get("split_sizes") or {}).get("train")
    return int(count) if count else None
