"""One jitted training step vmapped over the trials of a pack (JAX backend only).

Every trial of a pack has the same model (architecture), data set and batch size, and its own
parameters, optimizer state, metaparameters and data order. ``PackStep`` stacks them
on a leading trial axis and trains them all in one compiled call: Keras 3's stateless
API (``model.stateless_call``) gives the forward pass as a pure function of the
variables, ``jax.vmap`` maps it over the trials, and the optimizer's update rule
(``optimizer_rules.apply_rule``, the one the fit engine's Keras optimizer calls) and the
schedule (``schedules.rate_at``) take each trial's learning rate, optimizer metaparameters
(momentum; beta_1, beta_2, epsilon, weight decay), label smoothing, L2 penalty and schedule
parameters as traced values, so one executable serves every trial of the pack. The
optimizer's state is its slots (``optimizer_rules.SLOTS``: the velocity, Adam's m and v,
Lion's m), one array per trainable variable and slot; the bias corrections read the step.

The steps between two evaluations run inside that call (``lax.fori_loop`` over batch
indices gathered on the host, one row per step and trial), with a dynamic trip count:
one executable per pack width serves chunks of any length, and because every step runs
the same compiled loop body, how a run is cut into chunks (by time, by a checkpoint, by
a restart) never changes a number it computes. The chunk's batch indices travel in a
buffer of a few sizes only (``chunk_buffers.buffer_steps``: the chunk's steps rounded up to a power of
two, never below ``MIN_BUFFER`` indices and never above ``chunk_capacity``), so a 3-step
chunk at batch 4,000 sends 16 steps of indices, not 512 (8 MiB), while a pack compiles a
few loops at most; the loop body, and with it every number, is the same whichever buffer
carries the steps. Convolutional models on a CPU run one compiled step per call instead
(``steps_in_graph``: XLA:CPU is slow at convolutions inside a loop), which is just as
independent of the chunking.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from batchscale.core.names import OPTIMIZER_DEFAULTS, OPTIMIZER_PARAMETERS
from batchscale.training.chunk_buffers import buffer_steps, call_buffer, chunk_capacity
from batchscale.training.optimizer_rules import SLOTS, apply_rule, is_penalised, reads_weight_decay
from batchscale.training.schedules import rate_at
from batchscale.training.task_losses import stateless_loss


@dataclass
class StackedState:
    """The variables of a pack's trials, each stacked on a leading trial axis; ``slots``:
    the optimizer's state, slot name -> one array per trainable variable (``{}`` for SGD)."""

    trainable: list
    non_trainable: list
    slots: dict[str, list]

    def trial(self, position: int) -> dict[str, np.ndarray]:
        """One trial's arrays, named for a checkpoint (``<group>/<i>``, a slot's group its
        name: ``velocity/<i>`` for momentum, as in checkpoints before the Adam family)."""
        out = {}
        for group, values in (("trainable", self.trainable), ("non_trainable", self.non_trainable),
                              *self.slots.items()):
            for i, value in enumerate(values):
                out[f"{group}/{i}"] = np.asarray(value[position])
        return out


def stack_trials(per_trial: list[dict[str, np.ndarray]], slots: tuple[str, ...]) -> StackedState:
    """Stack trials' arrays (``StackedState.trial`` form) into one state with the
    optimizer's ``slots`` (``optimizer_rules.SLOTS``)."""
    import jax.numpy as jnp

    def group(name):
        count = sum(1 for key in per_trial[0] if key.startswith(f"{name}/"))
        return [jnp.asarray(np.stack([t[f"{name}/{i}"] for t in per_trial])) for i in range(count)]

    return StackedState(group("trainable"), group("non_trainable"),
                        {name: group(name) for name in slots})


def initial_arrays(model, slots: tuple[str, ...]) -> dict[str, np.ndarray]:
    """A freshly built model's variables in ``StackedState.trial`` form, every slot 0."""
    out = {f"trainable/{i}": np.asarray(v.value) for i, v in enumerate(model.trainable_variables)}
    out.update({f"non_trainable/{i}": np.asarray(v.value)
                for i, v in enumerate(model.non_trainable_variables)})
    for name in slots:
        out.update({f"{name}/{i}": np.zeros(v.shape, v.dtype)
                    for i, v in enumerate(model.trainable_variables)})
    return out


class PackStep:
    """Compiled training chunks and predictions for a pack of one model's trials.

    ``schedule``, ``optimizer`` (its rule and slots), ``l2`` (whether any trial has a
    penalty) and ``task`` (its loss: ``task_losses.stateless_loss``; ``num_classes`` is its
    outputs) are static; everything per trial is traced.
    """

    def __init__(self, model, schedule: str, optimizer: str, l2: bool, num_classes: int,
                 task: str = "classification"):
        self.model, self.schedule, self.task = model, schedule, task
        self.optimizer = optimizer
        self.slots = SLOTS[optimizer]
        self.decay = reads_weight_decay(optimizer)
        self.l2 = l2
        self.num_classes = num_classes
        self.penalised = [is_penalised(v) for v in model.trainable_variables]
        self._compiled: dict[tuple, object] = {}
        self.compile_seconds = 0.0
        self._predict = None
        self._predict_batches = None
        self.steps_in_graph = steps_in_graph(model)

    # ---- training -----------------------------------------------------------------
    def _one_trial(self, trainable, non_trainable, slots, hyper, x, y, step):
        import jax

        def loss_fn(trainable, non_trainable):
            outputs, non_trainable = self.model.stateless_call(trainable, non_trainable, x,
                                                               training=True)
            return self._loss(outputs, y, hyper), non_trainable

        (loss, non_trainable), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            trainable, non_trainable)
        trainable, slots = self._update(trainable, grads, slots, hyper, step)
        return trainable, non_trainable, slots, loss

    def _loss(self, outputs, y, hyper):
        """The batch's training loss (``mixed_step.MixedStep``: of its unpadded rows)."""
        return stateless_loss(self.task, outputs, y, hyper["label_smoothing"], self.num_classes)

    def _update(self, trainable, grads, slots, hyper, step):
        """Every trainable variable's update by the optimizer's rule (``apply_rule``):
        the new variables and slots."""
        rate = rate_at(self.schedule, step, hyper)
        new_trainable, new_slots = [], {name: [] for name in self.slots}
        for i, (value, grad) in enumerate(zip(trainable, grads)):
            penalty = hyper["l2_penalty"] if self.l2 and self.penalised[i] else None
            value, state = apply_rule(self.optimizer, value, grad,
                                      tuple(slots[name][i] for name in self.slots), rate, hyper,
                                      step, penalty, decay=self.decay and self.penalised[i])
            new_trainable.append(value)
            for name, array in zip(self.slots, state):
                new_slots[name].append(array)
        return new_trainable, new_slots

    def _step(self, carry, hyper, batch, step, x_all, y_all):
        """One step of every trial: batch (trials, batch size) indices into the data."""
        import jax
        import jax.numpy as jnp

        if batch.shape[0] == 1:  # a pack of one: no trial axis inside (measured faster on CPU)
            out = self._step_alone(_squeeze(carry), _squeeze(hyper), batch[0], step, x_all, y_all)
            return _expand(out)
        trainable, non_trainable, slots, finite = carry
        step_all = jax.vmap(self._one_trial, in_axes=(0, 0, 0, 0, 0, 0, None))
        trainable, non_trainable, slots, loss = step_all(
            trainable, non_trainable, slots, hyper, x_all[batch], y_all[batch], step)
        return trainable, non_trainable, slots, finite & jnp.isfinite(loss)

    def _step_alone(self, carry, hyper, batch, step, x_all, y_all):
        """One step of one trial, without a trial axis: batch (batch size,) indices."""
        import jax.numpy as jnp

        trainable, non_trainable, slots, finite = carry
        trainable, non_trainable, slots, loss = self._one_trial(
            trainable, non_trainable, slots, hyper, x_all[batch], y_all[batch], step)
        return trainable, non_trainable, slots, finite & jnp.isfinite(loss)

    def _chunk(self, carry, hyper, indices, steps, first_step, x_all, y_all):
        import jax

        if indices.shape[1] == 1:
            # A pack of one drops its trial axis once per chunk, not once per step: inside
            # the loop the squeeze made XLA copy every weight each step (fc_128_128 at
            # batch 32 trained 1.4x faster without it, bit for bit the same).
            hyper = _squeeze(hyper)

            def alone(i, carry):
                return self._step_alone(carry, hyper, indices[i, 0], first_step + i, x_all, y_all)

            return _expand(jax.lax.fori_loop(0, steps, alone, _squeeze(carry)))

        def body(i, carry):
            return self._step(carry, hyper, indices[i], first_step + i, x_all, y_all)

        return jax.lax.fori_loop(0, steps, body, carry)

    def run_chunk(self, state: StackedState, hyper: dict, indices: np.ndarray, first_step: int,
                  x_all, y_all, steps: int | None = None) -> tuple[StackedState, np.ndarray]:
        """Train ``steps`` steps (default: all of ``indices``, (steps, trials, batch)) from
        ``first_step``; returns the new state and, per trial, whether every loss was finite.
        ``indices`` may be an ``index_buffer`` whose first ``steps`` rows are filled.

        In one compiled call (``lax.fori_loop``) per ``chunk_capacity`` steps where that
        pays, each sending a ``buffer_steps`` buffer, else one compiled call per step,
        dispatched without waiting (``steps_in_graph``)."""
        _, width, batch = indices.shape
        steps = indices.shape[0] if steps is None else steps
        # host arrays and numpy scalars go to the compiled call as they are: a jnp.int32 or
        # jnp.ones made on the host first is a dispatch of its own (measured 2026-11-26:
        # about 0.3 ms less per call, a step of batch 8 being about 0.1 ms)
        carry = (state.trainable, state.non_trainable, state.slots, np.ones((width,), bool))
        if self.steps_in_graph:
            capacity = chunk_capacity(width, batch)
            for start in range(0, steps, capacity):  # one compiled call per buffer of steps
                length = min(capacity, steps - start)
                rows = buffer_steps(length, width, batch)
                args = (carry, hyper, call_buffer(indices, start, length, rows),
                        np.int32(length), np.int32(first_step + start), x_all, y_all)
                carry = self._compiled_call("chunk", self._chunk, args, (width, batch, rows))(*args)
        else:
            host_indices = indices[:steps].astype(np.int32, copy=False)
            for i in range(steps):
                args = (carry, hyper, host_indices[i], np.int32(first_step + i), x_all, y_all)
                carry = self._compiled_call("step", self._step, args, (width, batch))(*args)
        trainable, non_trainable, slots, finite = carry
        finite = np.asarray(finite)  # waits for the chunk to finish
        return StackedState(list(trainable), list(non_trainable),
                            {name: list(values) for name, values in slots.items()}), finite

    def _compiled_call(self, kind: str, function, args, shape: tuple):
        """``function`` compiled ahead of time for these argument shapes, once (its compile
        time counted in ``compile_seconds``); the state is donated. Dropout's threefry is
        compiled without its CPU loop (same bits, faster: ``unrolled_threefry``)."""
        import jax

        from batchscale.training.unrolled_threefry import unrolled_threefry

        key = (kind, *shape)
        if key not in self._compiled:
            tick = time.perf_counter()
            with unrolled_threefry():
                lowered = jax.jit(function, donate_argnums=(0,)).lower(*args)
            self._compiled[key] = lowered.compile()
            self.compile_seconds += time.perf_counter() - tick
        return self._compiled[key]

    # ---- evaluation ---------------------------------------------------------------
    def predict(self, state: StackedState, x, shared: bool, x_all=None) -> np.ndarray:
        """Logits (trials, examples, outputs): of the same inputs ``x`` for every trial
        when ``shared``, else of each trial's own training examples, ``x`` holding their
        indices into ``x_all`` (trials, n), gathered on the device."""
        import jax

        if self._predict is None:
            self._predict = {True: jax.jit(jax.vmap(self._forward, in_axes=(0, 0, None))),
                             False: jax.jit(jax.vmap(self._gathered, in_axes=(0, 0, 0, None)))}
        if shared:
            logits = self._predict[True](state.trainable, state.non_trainable, x)
        else:
            logits = self._predict[False](state.trainable, state.non_trainable, x, x_all)
        return np.asarray(logits, dtype=np.float32)


    def predict_batches(self, state: StackedState, batches: tuple, shared: tuple, x_all) -> list:
        """Several evaluation batches in one compiled call and one fetch: batch i's logits
        (trials, n, outputs), float32, the same bits ``predict(state, batches[i],
        shared[i], x_all)`` gives (the same vmapped forward pass on the same shapes)."""
        import jax

        if self._predict_batches is None:
            forward = {True: jax.vmap(self._forward, in_axes=(0, 0, None)),
                       False: jax.vmap(self._gathered, in_axes=(0, 0, 0, None))}

            def many(trainable, non_trainable, batches, x_all, shared):
                return [forward[alike](trainable, non_trainable, *((inputs,) if alike else (inputs, x_all)))
                        for inputs, alike in zip(batches, shared)]

            self._predict_batches = jax.jit(many, static_argnums=(4,))
        logits = jax.device_get(self._predict_batches(
            state.trainable, state.non_trainable, tuple(batches), x_all, tuple(shared)))
        return [np.asarray(a, dtype=np.float32) for a in logits]

    def _forward(self, trainable, non_trainable, x):
        return self.model.stateless_call(trainable, non_trainable, x, training=False)[0]

    def _gathered(self, trainable, non_trainable, indices, x_all):
        return self._forward(trainable, non_trainable, x_all[indices])


def _squeeze(tree):
    """Drop the leading trial axis (of length 1) of every array in ``tree``."""
    import jax

    return jax.tree.map(lambda a: a[0], tree)


def _expand(tree):
    """Put a leading trial axis of length 1 back on every array in ``tree``."""
    import jax

    return jax.tree.map(lambda a: a[None], tree)


def steps_in_graph(model) -> bool:
    """Whether a chunk's steps run inside one compiled loop (``lax.fori_loop``) or as one
    compiled call per step. Measured (benchmarks/pack_throughput.py, 2026-11-23): on a CPU
    the in-graph loop trains fc_128_128 1.3-2.5x faster than a call per step, but a
    convolutional model 4-6x slower (XLA:CPU runs convolutions inside a loop body far
    slower than outside, jax-ml/jax#12868); accelerators keep the loop in the graph."""
    from batchscale.training.keras_setup import on_cpu

    convolutional = any("Conv" in type(layer).__name__ for layer in _layers(model))
    return not (on_cpu() and convolutional)


def _layers(model):
    for layer in getattr(model, "layers", []):
        yield layer
        yield from _layers(layer)


def stack_hyper(resolved: list[dict], schedule_keys: tuple[str, ...], optimizer: str = "sgd") -> dict:
    """Per-trial metaparameters as float32 arrays on the trial axis (traced in the step):
    the learning rate, momentum (0 where absent), the metaparameters ``optimizer`` reads
    (a missing one at its default, ``OPTIMIZER_DEFAULTS``), label smoothing, the L2
    penalty and ``schedule_keys``."""
    import jax.numpy as jnp

    defaults = OPTIMIZER_DEFAULTS.get(optimizer, {})
    keys = ("learning_rate", "momentum", "label_smoothing", "l2_penalty",
            *OPTIMIZER_PARAMETERS[optimizer], *schedule_keys)
    values = {key: np.array([float(p.get(key, defaults.get(key, 0.0))) for p in resolved])
              for key in dict.fromkeys(keys)}
    for beta in ("beta_1", "beta_2"):  # 1 - beta from float64 (optimizer_rules.complement)
        if beta in values:
            values[f"one_minus_{beta}"] = 1.0 - values[beta]
    return {key: jnp.asarray(value.astype(np.float32)) for key, value in values.items()}
