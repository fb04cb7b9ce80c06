"""The noise probe of ``batchscale plan`` (JAX backend, in-memory data): the gradient
statistics that the noise scale is estimated from (step times: ``training.step_timing``).

``noise_probe``: a few short training runs at one small batch size ``b`` (the learning
rate at the 1/4, 1/2 and 3/4 points of its searched range, in its own scale; every other
searched parameter at its midpoint; a constant learning rate), vmapped together and
evaluated on the study's evaluation grid. They say how far an untuned run gets and when
it reaches the study's first goal. At every evaluation until the first run reaches the
goal, the run with the lowest training loss gives one gradient measurement (the noise
scale that matters is the one on the way to the goal: it grows as training goes on, and a
run trained on past the goal, or one that never gets there, would overstate it): the
mean squared norm of ``m`` gradients over ``b`` examples each, and the squared norm of
their mean (``m * b`` examples), from which
``noise_scale.estimate_noise_scale`` estimates B_simple (McCandlish et al. 2018).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from batchscale.core.errors import InputError
from batchscale.core.goals import first_step_reaching
from batchscale.core.names import TASK_LOSS_METRIC
from batchscale.core.spec import StudySpec
from batchscale.training.step_timing import device_arrays, probe_pack, probe_parameters
from batchscale.training.task_losses import VMAPPED_TASKS, stateless_loss

MICROBATCHES = 64  # gradients per noise measurement: B_big = MICROBATCHES x b
PROBE_QUANTILES = (0.25, 0.5, 0.75)  # learning rates of the probe runs, in their range


@dataclass
class ProbeRun:
    """One probe run: its metaparameters, the step it first reached the study's first
    goal (None: not within the probe), whether it diverged, and its measurements rows."""

    parameters: dict
    crossing: int | None = None
    diverged: bool = False
    rows: list = field(default_factory=list)

    def to_dict(self) -> dict:
        last = self.rows[-1] if self.rows else {}
        return {"parameters": self.parameters, "crossing": self.crossing,
                "diverged": self.diverged, "steps": int(last.get("step", 0))}


@dataclass
class NoiseProbe:
    batch_size: int
    big_batch_size: int
    runs: list[ProbeRun]
    measurements: list[dict]  # step, b_small, b_big, small_sq, big_sq
    steps: int
    seconds: float
    evaluation_seconds: float = 0.0  # one evaluation of one run (the first evaluations
    # include compiling the prediction: an upper estimate)
    compile_seconds: float = 0.0  # compiling the training step
    loss_column: str = ""  # the rows' training loss, "train/<task loss>"

    @property
    def examples(self) -> int:
        """Training examples the probe spent: every run trains every step (one vmapped
        pack), and each gradient measurement takes ``big_batch_size`` examples' gradients."""
        return int(len(self.runs) * self.steps * self.batch_size
                   + len(self.measurements) * self.big_batch_size)

    def best_run(self) -> ProbeRun | None:
        """The run a later probe starts from: the first to reach the goal, else the one
        with the lowest training loss at its last evaluation; never a diverged one (None:
        every run diverged)."""
        live = [r for r in self.runs if not r.diverged and r.rows]
        reached = [r for r in live if r.crossing is not None]
        if reached:
            return min(reached, key=lambda r: r.crossing)
        finite = [r for r in live if np.isfinite(r.rows[-1].get(self.loss_column, np.nan))]
        return min(finite, key=lambda r: r.rows[-1][self.loss_column]) if finite else None


def check_backend(spec: StudySpec) -> None:
    """Refuse, in one line, a study on a backend the probes do not run on."""
    if spec.backend != "jax":
        raise InputError(f"the probes need the JAX backend; this study uses {spec.backend} "
                         "(set backend: jax, or time it from its trials' own timings)")


def check_probeable(spec: StudySpec, pipeline) -> None:
    """Refuse, in one line, a study the probes cannot measure."""
    check_backend(spec)
    if not pipeline.in_memory or pipeline.task not in VMAPPED_TASKS:
        raise InputError(
            f"the probes need an in-memory classification or regression data set; "
            f"{spec.workload.dataset} "
            f"({pipeline.task}, {'in memory' if pipeline.in_memory else 'streamed'}) is not: "
            "its trials' own timings give its step-time profile")


def _gradient_stats(step_fn):
    """jitted (trainable, non_trainable, xs (m, b, ...), ys) -> (mean_i |g_i|^2, |mean_i g_i|^2):
    the m gradients are summed in a scan, so memory stays one gradient, not m. The loss
    is the task's (``task_losses.stateless_loss``, no label smoothing)."""
    import jax
    import jax.numpy as jnp

    model = step_fn.model

    def loss(trainable, non_trainable, x, y):
        outputs, _ = model.stateless_call(trainable, non_trainable, x, training=True)
        return stateless_loss(step_fn.task, outputs, y, 0.0, step_fn.num_classes)

    grad = jax.grad(loss)

    def squared(tree):
        return sum(jnp.sum(jnp.square(leaf.astype(jnp.float32))) for leaf in jax.tree.leaves(tree))

    def stats(trainable, non_trainable, xs, ys):
        def body(carry, xy):
            total, sq = carry
            g = grad(trainable, non_trainable, *xy)
            return (jax.tree.map(jnp.add, total, g), sq + squared(g)), None

        zeros = jax.tree.map(jnp.zeros_like, trainable)
        (total, sq), _ = jax.lax.scan(body, (zeros, jnp.float32(0.0)), (xs, ys))
        m = xs.shape[0]
        return sq / m, squared(jax.tree.map(lambda t: t / m, total))

    return jax.jit(stats)


def noise_probe(spec: StudySpec, pipeline, batch_size: int, max_steps: int,
                max_seconds: float, log=print) -> NoiseProbe:
    """Train the probe runs at ``batch_size`` up to ``max_steps`` (or ``max_seconds``),
    measuring gradients at every evaluation (see the module docstring)."""
    from batchscale.training.evaluation_grid import evaluation_steps
    from batchscale.training.evaluator import Evaluator, evaluate_pack
    from batchscale.training.keras_setup import training_scope
    from batchscale.workloads.data_order import EpochPermutations

    check_probeable(spec, pipeline)
    n = pipeline.num_train_examples
    micro = max(2, min(MICROBATCHES, n // batch_size))
    if n // batch_size < 2:
        raise InputError(f"batch size {batch_size} leaves fewer than 2 batches in the "
                         f"{n} training examples: the noise probe needs a smaller batch size")
    goal = spec.goals[0]
    loss_column = f"train/{TASK_LOSS_METRIC[pipeline.task]}"  # what divergence is judged on
    runs = [ProbeRun(probe_parameters(spec, q)) for q in PROBE_QUANTILES]
    x_all, y_all = device_arrays(pipeline)
    rng = np.random.default_rng(spec.seed)
    started = time.time()
    with training_scope(spec.backend, spec.workload.precision, 1, log):
        _, step_fn, state, hyper = probe_pack(spec, pipeline, [r.parameters for r in runs])
        stats = _gradient_stats(step_fn)
        evaluators = [Evaluator(None, pipeline, spec.evaluation.train_examples, spec.seed + i)
                      for i in range(len(runs))]
        orders = [EpochPermutations(n, batch_size, spec.seed + i) for i in range(len(runs))]
        measurements, step, evaluations, eval_seconds = [], 0, 0, 0.0
        for target in evaluation_steps(max_steps, spec.evaluation.resolution):
            if target > step:
                k = target - step
                indices = np.stack([o.take(k).reshape(k, -1) for o in orders], 1)
                state, finite = step_fn.run_chunk(state, hyper, indices, step, x_all, y_all)
                step = target
            tick = time.perf_counter()
            rows = evaluate_pack(evaluators, lambda x, shared, state=state: step_fn.predict(
                state, x, shared, x_all), step, started)
            evaluations, eval_seconds = evaluations + 1, eval_seconds + time.perf_counter() - tick
            live, goal_seen = [], any(r.crossing is not None for r in runs)
            for i, (run, row) in enumerate(zip(runs, rows)):
                if run.diverged or run.crossing is not None:
                    continue
                run.rows.append(row)
                loss, initial = row[loss_column], run.rows[0][loss_column]
                if step and (not np.isfinite(loss) or loss > spec.evaluation.divergence_factor * initial
                             or not bool(finite[i])):
                    run.diverged = True
                    continue
                run.crossing = first_step_reaching(run.rows, goal)
                live.append((loss, i))
            if live and not goal_seen:  # up to (and at) the first crossing
                best = min(live)[1]
                pick = rng.choice(n, size=micro * batch_size, replace=False).reshape(micro, batch_size)
                small, big = stats([v[best] for v in state.trainable],
                                   [v[best] for v in state.non_trainable], x_all[pick], y_all[pick])
                measurements.append({"step": step, "b_small": batch_size,
                                     "b_big": micro * batch_size,
                                     "small_sq": float(small), "big_sq": float(big)})
            training = [r for r in runs if not r.diverged and r.crossing is None]
            if not training or time.time() - started > max_seconds:
                break
    seconds = time.time() - started
    log(f"noise probe: {len(measurements)} gradient measurements over {step:,} steps at batch "
        f"size {batch_size} (big batch {micro * batch_size}), {seconds:.0f}s")
    per_evaluation = eval_seconds / max(1, evaluations * len(runs))
    return NoiseProbe(batch_size, micro * batch_size, runs, measurements, step, seconds,
                      per_evaluation, step_fn.compile_seconds, loss_column)
