"""Reading trials' TensorBoard runs back with TensorBoard's own reader (EventAccumulator,
which purges what a later ``SessionLog.START`` supersedes, as the dashboard does), for
the tests that check them against measurements.csv."""

from __future__ import annotations

import os

import numpy as np

from batchscale.core.spec import TrialSpec
from batchscale.store.event_files import TENSORBOARD_DIR, run_name
from batchscale.training.live_curves import LEARNING_RATE_TAG
from batchscale.training.schedules import learning_rate_at


def read_run(run_dir: str):
    """A run's scalars (tag -> [(step, value)]) and hparams plugin data (tag -> proto)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    accumulator = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    scalars = {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)]
               for tag in accumulator.Tags()["scalars"]}
    plugins = accumulator.Tags()["tensors"] and accumulator.PluginTagToContent("hparams")
    hparams = {tag: plugin_data_pb2.HParamsPluginData.FromString(content)
               for tag, content in (plugins or {}).items()}
    return scalars, hparams


def trial_run_dir(study_dir, batch_size: int, trial_id: int) -> str:
    return os.path.join(str(study_dir), TENSORBOARD_DIR, run_name(batch_size, trial_id))


def check_run_matches(run_dir: str, rows: list[dict], schedule: str, params: dict,
                      status: str | None = None) -> dict:
    """Assert the run holds exactly the rows' metrics (as float32, what TensorBoard stores)
    and the schedule's learning rate at each evaluated step; return its hparams."""
    scalars, hparams = read_run(run_dir)
    columns = [c for c in rows[0] if c not in ("step", "wall_time")]
    assert set(scalars) == {*columns, LEARNING_RATE_TAG}, sorted(scalars)
    steps = [int(r["step"]) for r in rows]
    for column in columns:
        assert [s for s, _ in scalars[column]] == steps, column
        np.testing.assert_array_equal([v for _, v in scalars[column]],
                                      np.float32([r[column] for r in rows]), err_msg=column)
    rates = [learning_rate_at(s, schedule, params) for s in steps]
    np.testing.assert_array_equal([v for _, v in scalars[LEARNING_RATE_TAG]], np.float32(rates))
    start = hparams["_hparams_/session_start_info"].session_start_info
    values = {k: v.number_value or v.string_value for k, v in start.hparams.items()}
    if status is not None:
        end = hparams["_hparams_/session_end_info"].session_end_info
        assert end.status == (1 if status == "COMPLETE" else 2), end  # STATUS_SUCCESS / FAILURE
    return values


def check_study_runs(store_root: str, study: str, scratch) -> int:
    """Every finished trial of ``study`` (in a local or gs:// store) has a TensorBoard run
    that TensorBoard's reader finds equal to its measurements.csv; returns how many. The
    runs are read from a local copy of their files (the reader has no GCS emulator)."""
    from batchscale.store.layout import StudyStore
    from batchscale.training.trainer import resolve_parameters
    from batchscale.validation import parse_spec

    store = StudyStore(store_root)
    spec = parse_spec(store.read_spec_dict(study))
    checked = 0
    for batch_size in spec.batch_sizes:
        rounds = store.read_rounds(spec, batch_size)
        for trial_id in (i for r in rounds for i in r.trial_ids):
            trial = TrialSpec(study, batch_size, trial_id, {})
            meta = store.read_metadata(spec, trial)
            if meta is None or meta["status"] not in ("COMPLETE", "INFEASIBLE"):
                continue
            run = f"{study}/{TENSORBOARD_DIR}/{run_name(batch_size, trial_id)}"
            local = os.path.join(str(scratch), run_name(batch_size, trial_id))
            os.makedirs(local)
            files = store.fs.list_files(run)
            assert files, f"no TensorBoard events for trial {batch_size}/{trial_id}"
            for name in files:
                store.fs.download_to(f"{run}/{name}", os.path.join(local, name))
            params = resolve_parameters(meta["parameters"], meta["max_steps"])
            check_run_matches(local, store.read_measurements(spec, trial), spec.schedule, params,
                              meta["status"])
            checked += 1
    return checked
