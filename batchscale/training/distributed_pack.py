"""The process every pod of a multi-host pack runs:
``python -m batchscale.training.distributed_pack SPEC_JSON PACK_JSON``.

SPEC_JSON: the resolved study spec (a dict, as JSON text); PACK_JSON: the ``PackSpec``
dict. The process's place among the pack's processes comes from the environment
(``distributed.process_env``: ``BATCHSCALE_COORDINATOR``, ``BATCHSCALE_NUM_PROCESSES``,
``BATCHSCALE_PROCESS_ID`` or ``JOB_COMPLETION_INDEX``). Every process re-derives the
pack's trials as a one-pod pack task does (``pack_task``) and trains them one after
another, each trial data-parallel over every device of every process (``trainer`` with a
``distributed.Team``). Process 0 is the pack's one writer: it takes the trials' leases,
decides which to train (finished ones are re-used; one another live writer holds waits),
and writes every file of every trial through its ``TrialLife``; the others follow its
decisions and write nothing.

SIGTERM may reach one pod only (a spot node's notice): the processes combine their stop
flags after every chunk, so all stop at one step; process 0 checkpoints the trial being
trained (the pack's only unfinished trial with progress) and every process exits 143
(``signals.EXIT_TERMINATED``). Exit 0: the pack is done; 2: bad input, one line on stderr,
nothing written.
"""

from __future__ import annotations

import json
import sys
import time

from batchscale.core.errors import InputError
from batchscale.core.spec import PackSpec, StudySpec, TrialSpec
from batchscale.search.packs import pack_trials
from batchscale.store.layout import StudyStore
from batchscale.training.distributed import Team, join, process_env, relayed_stops
from batchscale.training.signals import EXIT_TERMINATED, Stopped, stop_on_sigterm
from batchscale.training.trial_lifecycle import TrialLeases
from batchscale.training.workload_check import check_model_source, check_user_workload

USAGE = "usage: python -m batchscale.training.distributed_pack SPEC_JSON PACK_JSON"
WAIT_POLL_SECONDS = 5.0  # how often the processes look again at trials another writer holds
TRAIN, FINISHED, WAIT = 0, 1, 2  # process 0's verdict on a trial, which all follow


def main(argv: list[str]) -> int:
    try:
        place = process_env()
        if len(argv) != 2:
            raise ValueError(USAGE)
        spec, pack = _inputs(argv[0], argv[1])
    except ValueError as e:
        print(str(e).splitlines()[0] if str(e) else type(e).__name__, file=sys.stderr)
        return 2
    join(place)  # before anything lists JAX's devices
    team = Team.of(place)

    def log(line: str) -> None:
        print(team.label + line, flush=True)

    with stop_on_sigterm() as stop, relayed_stops(stop, team, log):
        try:
            metas = train_pack_together(spec, pack, team, stop, log)
        except Stopped as e:
            log(e.message)
            return EXIT_TERMINATED
        except InputError as e:  # every process refuses alike, before any write
            print(team.label + str(e).splitlines()[0], file=sys.stderr)
            return 2
    if team.writer:
        statuses = [m.get("status", "INCOMPLETE") for m in metas]
        log(f"pack {pack.pack_id}: " + ", ".join(f"{statuses.count(s)} {s}"
                                                  for s in sorted(set(statuses))))
    return 0


def _inputs(spec_json: str, pack_json: str) -> tuple[StudySpec, PackSpec]:
    """The study spec and the pack from their JSON texts; one-line ValueErrors."""
    from batchscale.validation import parse_spec

    raw = {}
    for name, text in (("SPEC_JSON", spec_json), ("PACK_JSON", pack_json)):
        try:
            raw[name] = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{name}: not JSON ({e.msg} at character {e.pos})") from None
        if not isinstance(raw[name], dict):
            raise ValueError(f"{name}: must be a JSON object, not {type(raw[name]).__name__}")
    spec = parse_spec(raw["SPEC_JSON"])
    try:
        pack = PackSpec.from_dict(raw["PACK_JSON"])
    except (KeyError, TypeError) as e:
        raise ValueError(f"PACK_JSON: not a pack ({type(e).__name__}: {e}); it needs "
                         "pack_id, batch_size and trial_ids") from None
    if spec.backend != "jax":
        raise ValueError(f"backend: {spec.backend!r}; a multi-host pack trains on JAX's "
                         "multi-process runtime: backend jax")
    return spec, pack


def train_pack_together(spec: StudySpec, pack: PackSpec, team: Team, stop, log=print,
                        lease_seconds: float | None = None) -> list[dict]:
    """Train (or re-use, or resume) the pack's trials with the other processes of
    ``team``, one trial after another; return each trial's metadata (process 0's as
    written; the others' as they followed). ``stop``: this process's ``StopRequest``."""
    from batchscale.training.keras_setup import check_splits, select_backend
    from batchscale.training.trainer import run_trial

    check_user_workload(spec, files=False)
    store = StudyStore(spec.store)
    rounds = {b: store.read_rounds(spec, b) for b in pack.batch_sizes}
    try:
        trials = pack_trials(spec, pack, rounds)
    except ValueError as e:  # a pack the study does not hold: bad input, before any write
        raise InputError(f"PACK_JSON: {e}") from None
    select_backend(spec.backend)
    for batch_size in pack.batch_sizes:  # refused before anything is written
        check_splits(batch_size)
    check_model_source(spec, store, record=team.writer)
    leases = TrialLeases(store, spec, log, lease_seconds) if team.writer else None
    results: dict[tuple[int, int], dict] = {}
    pending = trials
    try:
        while pending:
            waiting = []
            for trial in pending:
                if team.stop(stop.requested):
                    raise Stopped(f"stopped before trial {trial.batch_size}/{trial.trial_id}")
                meta = leases.claim(store, trial, log) if leases else None
                verdict = team.same_code(_verdict(leases, trial, meta))
                if verdict == TRAIN:
                    try:
                        meta = run_trial(spec, trial, store, log, stop, team)
                    finally:
                        if leases:
                            leases.release(trial)
                elif verdict == FINISHED:
                    meta = meta if team.writer else (store.read_metadata(spec, trial) or {})
                else:
                    waiting.append(trial)
                    continue
                results[trial.batch_size, trial.trial_id] = meta
            pending = waiting
            if pending:
                if team.writer:
                    log(f"lease: trials {', '.join(f'{t.batch_size}/{t.trial_id}' for t in pending)} "
                        "wait on another writer")
                _wait(team, stop, WAIT_POLL_SECONDS)
    finally:
        if leases:
            leases.release_all()  # a stopped pack's trials are free for the next run at once
    return [results[t.batch_size, t.trial_id] for t in trials]


def _verdict(leases: TrialLeases | None, trial: TrialSpec, meta: dict | None) -> int:
    """Process 0's verdict on a trial it has just claimed; the others' is ignored."""
    if leases is None:
        return TRAIN
    if meta is not None:
        return FINISHED
    return TRAIN if leases.holds(trial) else WAIT


def _wait(team: Team, stop, seconds: float) -> None:
    """Wait about ``seconds`` together, agreeing every second whether any process must
    stop (a count of seconds, not a deadline: hosts' clocks differ)."""
    for _ in range(max(1, round(seconds))):
        time.sleep(1.0)
        if team.stop(stop.requested):
            raise Stopped("stopped while waiting for trials of another writer")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
