"""The vmapped pack loop: train, evaluate, checkpoint and finish a pack's trials together.

Each trial follows exactly the per-trial trainer's protocol (``trainer.run_trial``):
its seed builds its model and data order, it is evaluated at the same geometric grid of
steps, it stops by the same rule (``stop_rule``), and everything it writes (metadata.json,
measurements.csv, checkpoints, live curves, crossings) is written by its own
``trial_lifecycle.TrialLife``, as under the fit engine; this module never imports the store.
A finished trial's slot is trained on and ignored until the pack ends (see
``_Loop._finish_some``): a pack's width never changes while it trains. Under a protocol
that trains in ``lockstep`` (one that races) a pack's groups (``pack_groups``: one trial
each where the pack takes turns, ``pack_mode``; trials of a user's model whose model
parameters differ in groups apart, ``_model_groups``) train interleaved, evaluation by
evaluation, so the earliest goal crossing is known before any trial trains past it;
otherwise one group after another.

Checkpoints hold, per unfinished trial, its variables, optimizer state, step, data-order
position, measurement rows so far, and its pack's width, its position in it and the
trials at every position (so that trials killed before their first checkpoint go back
to their places too: ``pack_groups._place_named``).
They are written at the end of a chunk of steps, every ``spec.checkpoint_seconds`` and
when a stop is requested, and removed when the trial finishes, except for a trial that
stopped at its budget: it keeps its last one, from which a larger budget continues it.
A trial resumed from one continues with the same compiled step and the same data order,
so its measurements equal those of an uninterrupted run.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass

from batchscale.core.names import SCHEDULE_OPTIONAL_PARAMETERS, SCHEDULE_PARAMETERS
from batchscale.core.spec import StudySpec, TrialSpec
from batchscale.training.evaluation_grid import evaluation_steps
from batchscale.training.mixed_step import batch_counts, member_sizes, pad_rows, padded_batch
from batchscale.training.pack_groups import in_lockstep, pack_groups
from batchscale.training.pack_mode import TURNS, PackMode, choose_pack_mode, mode_metadata, probe_rates
from batchscale.training.signals import Stopped
from batchscale.training.task_losses import loss_targets
from batchscale.training.trainer import resolve_parameters, trial_seed
from batchscale.training.trial_lifecycle import FLUSH_SECONDS, TrialLife, crossing_board, trial_metadata
from batchscale.workloads.data_order import EpochPermutations
from batchscale.workloads.models.user_model import model_parameters

CHUNK_SECONDS = 1.0  # target wall time of one compiled chunk: how soon a stop is noticed


@dataclass
class TrialRun:
    """One trial's host-side state inside a pack."""

    trial: TrialSpec
    params: dict  # resolved (decay_fraction -> decay_steps)
    order: EpochPermutations
    life: TrialLife | None  # its progress and writes; None: a filler slot
    width: int | None = None  # from a checkpoint: the pack's width and this trial's position
    position: int | None = None
    members: list | None = None  # from a checkpoint: the trial id at each position (None: filler)
    member_sizes: list | None = None  # ... and each one's batch size (a mixed-batch group)
    padded: int | None = None  # from a mixed-batch group's checkpoint: its padded batch size
    done: bool = False

    @property
    def step(self) -> int:
        return self.life.step


def train_together(spec: StudySpec, trials: list[TrialSpec], store, pipeline, log,
                   stop, width: int | None = None) -> list[dict]:
    """Train ``trials`` (none finished), ``width`` of them vmapped at once (default: the
    mode ``pack_mode.choose_pack_mode`` chooses, by the study's profile or a probe through
    this pack's own step); return their metadata. ``store``: the study's store, handed to
    each trial's ``TrialLife``. Trials of several batch sizes (``mixed_step``: the caller
    checked ``mixable``, gives ``width`` and orders them into groups) share groups, each
    trial at its own budget and evaluation grid."""
    import jax.numpy as jnp

    from batchscale.training.evaluator import Evaluator
    from batchscale.training.keras_setup import seed_keras, training_scope
    from batchscale.training.mixed_step import MixedStep
    from batchscale.training.optimizer_rules import SLOTS
    from batchscale.training.vmapped_step import PackStep, initial_arrays
    from batchscale.workloads import build_model

    x, y = pipeline.arrays("train")
    x_all = jnp.asarray(x)
    y_all = jnp.asarray(loss_targets(pipeline.task, y, pipeline.num_outputs))
    slots = SLOTS[spec.workload.optimizer]

    runs, arrays, evaluators = [], [], []
    models: dict[str, object] = {}  # per model (``_model_key``): the one its PackStep calls
    started = time.time()
    # one board per batch size for the whole pack: a crossing one group publishes, every
    # group sees at once
    boards = {b: crossing_board(store, spec, b) for b in dict.fromkeys(t.batch_size for t in trials)}
    with training_scope(spec.backend, spec.workload.precision, max(boards), log):
        for trial in trials:
            seed = trial_seed(spec, trial)
            seed_keras(seed, spec.backend)
            model = build_model(spec.workload.model, pipeline.input_shape, pipeline.num_outputs,
                                task=pipeline.task, parameters=trial.parameters)
            models.setdefault(_model_key(trial), model)
            run = _new_run(store, spec, trial, pipeline, seed, spec.max_steps[trial.batch_size],
                           len(trials), log, boards[trial.batch_size])
            values = initial_arrays(model, slots)
            checkpoint = run.life.start()
            if checkpoint is not None:
                values = _resume(run, checkpoint, values)
            runs.append(run)
            arrays.append(values)
            evaluators.append(Evaluator(None, pipeline, spec.evaluation.train_examples, seed))
        l2 = any(r.params.get("l2_penalty", 0.0) for r in runs)
        # per (model, padded batch): its step; None: no padding (one batch size per group)
        steps: dict[tuple, PackStep] = {
            (key, None): PackStep(m, spec.schedule, spec.workload.optimizer, l2,
                                  pipeline.num_outputs, pipeline.task) for key, m in models.items()}

        def probe(wide: int) -> dict:  # the first model's trials, through the pack's own step
            key = _model_key(trials[0])
            alike = [i for i, r in enumerate(runs) if _model_key(r.trial) == key] * wide
            return probe_rates(spec, steps[key, None], [arrays[i] for i in alike[:wide]],
                               [runs[i].params for i in alike[:wide]],
                               [evaluators[i] for i in alike[:wide]], x_all, y_all,
                               trials[0].batch_size, wide)

        if width is None and all(run.width is not None for run in runs):
            mode = PackMode(TURNS, 1, "checkpoint")  # every trial resumes at its own width
        else:
            mode = choose_pack_mode(spec, store, trials, probe, log, width)

    def group(key: str, members: list[int], slots: list[int | None]):
        for i in members:  # until now: data loading, model builds, the probe (and earlier groups)
            runs[i].life.metadata["pack_setup_seconds"] = time.time() - started
            runs[i].life.metadata.update(mode_metadata(mode, len(slots), runs[i].width is not None))
        padded = padded_batch([runs[i] for i in members])
        if (key, padded) not in steps:  # a mixed-batch group's step masks its padding
            steps[key, padded] = MixedStep(models[key], spec.schedule, spec.workload.optimizer, l2,
                                           pipeline.num_outputs, pipeline.task)
        return _Loop(spec, steps[key, padded],
                     [runs[members[i]] if i is not None else None for i in slots],
                     [arrays[members[i if i is not None else 0]] for i in slots],
                     [evaluators[members[i if i is not None else 0]] for i in slots],
                     x_all, y_all, time.time(), log, stop, padded)

    groups = _model_groups(runs, mode.width)  # a checkpoint's width wins (pack_groups)
    if spec.protocol.lockstep:  # every group at once, evaluation by evaluation
        in_lockstep([group(*g) for g in groups], FLUSH_SECONDS)
    else:  # one group after another: one group's arrays on the device at a time
        for g in groups:
            in_lockstep([group(*g)], FLUSH_SECONDS)
    return [run.life.metadata for run in runs]


def _model_key(trial: TrialSpec) -> str:
    """What a trial's model is built from besides its seed: its model parameters (a
    user's model function; none for a registry model)."""
    return json.dumps(model_parameters(trial.parameters), sort_keys=True)


def _model_groups(runs: list[TrialRun], width: int) -> list[tuple[str, list[int], list]]:
    """``pack_groups`` of the runs of each model (``_model_key``), in order of first
    appearance: trials whose models differ (a user's model function searching its own
    parameters) cannot share one vmapped step, so each model's trials are grouped apart;
    a registry model's pack is one model, grouped as before."""
    by_model: dict[str, list[int]] = {}
    for i, run in enumerate(runs):
        by_model.setdefault(_model_key(run.trial), []).append(i)
    return [(key, [members[m] for m in group], slots)
            for key, members in by_model.items()
            for group, slots in pack_groups([runs[i] for i in members], width)]


def _new_run(store, spec, trial, pipeline, seed, max_steps, pack_size, log, board) -> TrialRun:
    params = resolve_parameters(trial.parameters, max_steps, spec.workload.optimizer)
    metadata = {**trial_metadata(spec, trial, params, max_steps, 1, "vmapped"),
                "pack_size": pack_size}
    order = EpochPermutations(pipeline.num_train_examples, trial.batch_size, seed)
    return TrialRun(trial, params, order, TrialLife(store, spec, trial, params, metadata, log, board))


def _resume(run: TrialRun, checkpoint, values: dict) -> dict:
    """The pack's own part of a checkpoint (its life restored the rest): the trial's place
    in its pack, its data order, its arrays."""
    state = checkpoint.state
    run.width, run.position = int(state["pack_width"]), int(state["pack_position"])
    run.members = state.get("pack_members")  # absent from checkpoints before it was recorded
    run.member_sizes, run.padded = state.get("pack_batch_sizes"), state.get("pack_padded")
    run.order.restore(state["order"], checkpoint.arrays["order"])
    return {k: v for k, v in checkpoint.arrays.items() if k != "order"} or values


def _filler(like: TrialRun) -> TrialRun:
    """A slot that keeps a resumed pack as wide as it was: trained, never reported."""
    order = EpochPermutations(len(like.order.order), like.trial.batch_size, 0)
    return TrialRun(like.trial, like.params, order, None, done=True)


class _Loop:
    """The evaluation-to-evaluation loop of one group of trials at the same step."""

    def __init__(self, spec, step_fn, runs, arrays, evaluators, x_all, y_all, started, log, stop,
                 padded: int | None = None):
        from batchscale.training.optimizer_rules import SLOTS
        from batchscale.training.vmapped_step import stack_hyper, stack_trials

        self.spec, self.step_fn, self.log, self.stop = spec, step_fn, log, stop
        real = next(r for r in runs if r is not None)
        # the trial id at each position: a filler's position keeps the trial a checkpoint
        # names there (the group's record stays whole whichever of its trials resumed)
        named = next((r.members for r in runs if r is not None and r.members), None) or []
        self.members = [r.trial.trial_id if r is not None
                        else (named[p] if p < len(named) else None) for p, r in enumerate(runs)]
        self.member_sizes = member_sizes(runs)
        runs = [r if r is not None else _filler(real) for r in runs]
        for run in runs:  # trials sharing each compiled step: its time is not theirs alone
            if run.life is not None:
                run.life.metadata["vmap_width"] = run.life.metadata["trained_together"] = len(runs)
                if padded is not None:  # a mixed-batch group's: its batch padded to this
                    run.life.metadata["padded_batch"] = padded
        self.runs, self.evaluators = runs, evaluators
        self.x_all, self.y_all, self.started = x_all, y_all, started
        self.state = stack_trials(arrays, SLOTS[spec.workload.optimizer])
        keys = (*SCHEDULE_PARAMETERS[spec.schedule], *SCHEDULE_OPTIONAL_PARAMETERS[spec.schedule])
        self.hyper = stack_hyper([r.params for r in runs], keys, spec.workload.optimizer)
        self.padded = padded  # a mixed-batch group: every batch padded to this many rows
        if padded is not None:  # ... each trial's loss over its own (``mixed_step``)
            self.hyper["batch_size"] = batch_counts(runs)
        # each trial's own evaluation grid (its batch size's budget); the group's is their union
        self.grids = [set(evaluation_steps(spec.max_steps[r.trial.batch_size],
                                           spec.evaluation.resolution)) for r in runs]
        self.last_checkpoint = self.last_flush = time.time()
        self.chunk_steps = 1
        self.eval_seconds = 0.0
        self.step = real.step  # where the group stands (in_lockstep runs the one behind)
        self.flush_seconds = FLUSH_SECONDS
        self.begun = self.stop_checkpointed = False  # begun: evaluations() has run

    # ---- the loop -------------------------------------------------------------------
    def evaluations(self):
        """Train the group evaluation by evaluation, yielding after each (``in_lockstep``)."""
        deadline = self.stop.on_deadline(self._write_held)  # a stop that cannot wait (signals)
        try:
            yield from self._evaluations()
        finally:
            self.stop.forget(deadline)

    def _evaluations(self):
        first = self.live()[0]
        step = first.step
        grid = sorted(set().union(*(self.grids[p] for p, r in enumerate(self.runs) if not r.done)))
        self.begun = True
        if not first.life.rows:
            self._evaluate(0)  # as the per-trial trainer: no goal is checked at step 0
        elif any(self._due(p, step) and not r.life.evaluated() for p, r in enumerate(self.runs)):
            self._evaluate(step)  # checkpointed after training up to an evaluation step
            self._finish_some(step)
        self._hold()
        yield step
        for target in grid:
            if not self.live():
                break
            if target <= step:
                continue
            while step < target:
                n = min(target - step, self.chunk_steps)
                step = self.step = self._train(step, n)
                if self.stop.requested:
                    self._stop(step)
                if time.time() - self.last_checkpoint >= self.spec.checkpoint_seconds:
                    self.checkpoint(step)
            if self.stop.requested:  # an evaluation may outlast the notice: resume evaluates
                self._stop(step)
            self._evaluate(step)
            self._finish_some(step)
            self._hold()
            if time.time() - self.last_flush > self.flush_seconds:
                self._flush(step)
            yield step
        self._finish_some(step, final=True)  # e.g. resumed at its budget, evaluated

    def _stop(self, step: int) -> None:
        """A requested stop: checkpoint every unfinished trial here, then raise ``Stopped``."""
        with self.stop.final_checkpoint():
            self.checkpoint(step)
        self.stop_checkpointed = True
        message = (f"stopped at step {step}: {len(self.live())} trial(s) "
                   "checkpointed; run the pack again to resume")
        self.log(message)
        raise Stopped(message)

    def _hold(self) -> None:
        """Each unfinished trial, just evaluated, kept in memory (``TrialLife.hold``)."""
        for position, run in enumerate(self.runs):
            if not run.done:
                run.life.hold(self._snapshot(position))

    def _write_held(self) -> None:
        for run in self.live():
            run.life.write_held()

    def live(self) -> list[TrialRun]:
        return [r for r in self.runs if not r.done]

    def _train(self, step: int, n: int) -> int:
        """Train ``n`` steps; each trial's batch indices are written straight into the
        int32 buffer sized to the chunk that the compiled call receives (``index_buffer``),
        in a mixed-batch group padded with the trial's own rows (``pad_rows``), which its
        masked loss ignores."""
        from batchscale.training.chunk_buffers import index_buffer

        indices = index_buffer(n, len(self.runs), self.padded or self.runs[0].trial.batch_size)
        for position, run in enumerate(self.runs):
            indices[:n, position] = pad_rows(run.order.take(n).reshape(n, -1), self.padded)
        tick = time.perf_counter()
        compile_before = self.step_fn.compile_seconds
        self.state, finite = self.step_fn.run_chunk(self.state, self.hyper, indices, step,
                                                    self.x_all, self.y_all, steps=n)
        seconds = time.perf_counter() - tick - (self.step_fn.compile_seconds - compile_before)
        per_step = seconds / n
        self.chunk_steps = int(max(1, min(4 * n, CHUNK_SECONDS / max(per_step, 1e-6))))
        for position, run in enumerate(self.runs):  # the slots of finished trials: ignored
            if not run.done:
                run.life.trained(step + n, seconds, bool(finite[position]))
        return step + n

    def _evaluate(self, step: int) -> None:
        """Every trial's row at ``step``, on the device (``evaluator.PackEvaluation``: its
        batches moved there at the first evaluation, whose time it counts)."""
        from batchscale.training.evaluator import PackEvaluation

        tick = time.perf_counter()
        if getattr(self, "_evaluation", None) is None:
            self._evaluation = PackEvaluation(self.evaluators, self.step_fn, self.x_all)
        rows = self._evaluation(self.state, step, self.started)
        self.eval_seconds += time.perf_counter() - tick
        for position, (run, row) in enumerate(zip(self.runs, rows)):
            # a resumed trial already evaluated here (its group checkpointed after its
            # evaluation, another's before) keeps its one row at this step
            if self._due(position, step) and not run.life.evaluated():
                run.life.record(row)

    def _due(self, position: int, step: int) -> bool:
        """Whether the trial at ``position`` is live and evaluated at ``step`` (its grid)."""
        return not self.runs[position].done and step in self.grids[position]

    def _finish_some(self, step: int, final: bool = False) -> None:
        """Finish every live trial whose latest evaluation ends it (``final``: the grid is
        done, so every one must end: ``TrialLife.outcome``). Its slot keeps being
        trained (and ignored) until the pack ends: narrowing the stacked arrays would change
        the width of the vmapped step, and with it XLA's rounding for the trials still
        training, which a resumed pack could not reproduce step for step."""
        for position, run in enumerate(self.runs):
            if not self._due(position, step) and not (final and not run.done):
                continue  # done, or evaluated at another step (a mixed-batch group)
            outcome = run.life.outcome(final)
            if outcome is not None:
                with self.stop.committing():  # a deadline waits for the commit
                    run.done = True
                    run.life.finish(outcome, len(run.order.order), time.time() - self.started,
                                    self._snapshot(position),
                                    compile_seconds=self.step_fn.compile_seconds,
                                    evaluation_seconds=self.eval_seconds)

    # ---- durability -----------------------------------------------------------------
    def _flush(self, step: int) -> None:
        watched = f"val/{self.spec.goals[0].metric}"
        for run in self.live():
            run.life.flush()
        best = min((r.life.rows[-1][watched] for r in self.live()), default=math.nan)
        self.log(f"pack of {len(self.live())} at batch size {self.runs[0].trial.batch_size}: "
                 f"step {step}, best {watched} {best:.4f}")
        self.last_flush = time.time()

    def checkpoint(self, step: int) -> None:
        """Checkpoint every unfinished trial of the group (at ``step``, where they all are)."""
        for position, run in enumerate(self.runs):
            if not run.done:
                run.life.checkpoint(self._snapshot(position))
        self.last_checkpoint = time.time()

    def _snapshot(self, position: int):
        """What the trial at ``position`` saves beside its life's progress: its arrays,
        data order and place in the pack (``TrialLife``'s ``Snapshot``)."""
        def snapshot() -> tuple[dict, dict]:
            order_state, order = self.runs[position].order.state()
            return ({**self.state.trial(position), "order": order},
                    {"order": order_state, "pack_width": len(self.runs), "pack_position": position,
                     "pack_members": self.members,
                     **({} if self.padded is None else {"pack_batch_sizes": self.member_sizes,
                                                        "pack_padded": self.padded})})
        return snapshot
