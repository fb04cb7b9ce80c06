"""The branched probe of ``batchscale plan`` (JAX backend, in-memory data): the local
critical batch size of Merrill et al. 2025, measured before a sweep where the noise probe
runs (its arithmetic and result type: ``branched_estimate``).

A base run at batch size b with the caller's metaparameters and a constant learning rate
(as the noise probe trains) runs T steps, one model through the pack engine
(``vmapped_step.PackStep``, built by ``step_timing.probe_pack``). At each branch point t_j
(``branched_estimate.branch_points``: the last at T - D, each earlier one half the next)
it keeps a step-exact copy of its state in memory (variables, optimizer slots; the step
counter is t_j), and D steps later it measures its training loss on a fixed evaluation
sample: the spec's training-metric subset (``Evaluator``'s, seed ``spec.seed``; every
example when it has none), the same examples for every run. From each copy, per factor
k = 1, 2, 4, ... one pack of R replicates (the copy stacked R times, each with its own data
order) trains D/k steps at k x b with the learning rate rescaled by the rule, and is
measured on the same sample; k = 1 (the base run continued with other data orders) joins
the base run's own loss in the reference the branches must keep up with
(``BranchPoint.reference``). The last branch point is measured first (its estimate is the
probe's), then the earlier ones; at a point, factors stop rising once every replicate has
failed one (k* cannot rise after that). The base run stops at half of ``max_seconds`` (the
points it reached are measured); no new pack starts after ``max_seconds``, nor one that
would take the examples spent past ``max_examples`` (``plan``: 10% of the study's estimated
trained examples); what was not tried is recorded as such. A diverged branch is a branch that did not keep up.
"""

from __future__ import annotations

import math
import time

import numpy as np

from batchscale.core.errors import InputError
from batchscale.core.names import TASK_LOSS_METRIC
from batchscale.core.spec import StudySpec
from batchscale.planning.branched_estimate import (
    DEFAULT_RULE,
    POINTS,
    REPLICATES,
    TOLERANCE,
    BranchedProbe,
    BranchPoint,
    branch_examples,
    branch_factors,
    branch_length,
    branch_points,
    check_rule,
    check_tolerance,
    keeps_up,
    scaled_learning_rate,
)
from batchscale.planning.probe import check_probeable
from batchscale.training.step_timing import device_arrays, probe_pack


def branched_probe(spec: StudySpec, pipeline, parameters: dict, batch_size: int, *,
                   rule: str = DEFAULT_RULE, tolerance: float = TOLERANCE,
                   max_seconds: float = 60.0, log=print, steps: int | None = None,
                   replicates: int = REPLICATES, points: int = POINTS,
                   max_examples: int | None = None) -> BranchedProbe:
    """The branched probe (see the module docstring) of a base run at ``batch_size`` with
    ``parameters`` (a trial's resolved metaparameters) for ``steps`` steps (T: the last
    comparison's step; default the spec's step budget at ``batch_size``); the branches
    stop before ``max_examples`` training examples (None: no cap; the base run is never cut)."""
    from batchscale.training.keras_setup import training_scope
    from batchscale.training.optimizer_rules import SLOTS
    from batchscale.training.vmapped_step import stack_hyper, stack_trials
    from batchscale.workloads.data_order import EpochPermutations

    check_probeable(spec, pipeline)
    check_rule(rule, "rule")
    check_tolerance(tolerance, "tolerance")
    if replicates < 1:
        raise InputError(f"replicates: {replicates} is not allowed; allowed: 1 or more")
    if steps is None and batch_size not in spec.max_steps:
        raise InputError(f"the branched probe at batch size {batch_size}: the spec has no step "
                         f"budget there; pass steps, or one of {sorted(spec.max_steps)}")
    total = int(steps if steps is not None else spec.max_steps[batch_size])
    length = branch_length(total)
    starts = branch_points(total, length, points)
    n = pipeline.num_train_examples
    factors = branch_factors(batch_size, n, length)
    if not factors:
        raise InputError(f"the branched probe needs 2 x batch size {batch_size} <= the "
                         f"{n} training examples: use a smaller batch size")
    x_all, y_all = device_arrays(pipeline)
    sample, labels = _evaluation_sample(spec, pipeline)
    slots = SLOTS[spec.workload.optimizer]
    started = time.time()
    with training_scope(spec.backend, spec.workload.precision, 1, log):
        _, step_fn, state, hyper = probe_pack(spec, pipeline, [parameters])

        def losses(state, width):
            return _sample_losses(step_fn, state, width, sample, labels, pipeline, x_all)

        # the base run: copies at the branch points, its loss D steps after each
        order, step = EpochPermutations(n, batch_size, spec.seed), 0
        copies, base = {}, {}
        for target in sorted(set(starts) | {t + length for t in starts}):
            count = target - step
            indices = order.take(count).reshape(count, 1, batch_size)
            state, finite = step_fn.run_chunk(state, hyper, indices, step, x_all, y_all)
            step = target
            if target in starts:
                copies[target] = {k: np.array(v) for k, v in state.trial(0).items()}
            if target - length in starts:
                loss = losses(state, 1)[0]
                base[target - length] = loss if bool(finite[0]) else math.nan
            if time.time() - started > max_seconds / 2:
                break
        examples = step * batch_size

        def branch(t, k, learning_rate):
            """R replicates from the copy at ``t``, D/k steps at k x b: their losses."""
            params = {**parameters, "learning_rate": learning_rate}
            state = stack_trials([copies[t]] * replicates, slots)
            count = length // k
            orders = [EpochPermutations(n, k * batch_size, _seed(spec.seed, t, k, r))
                      for r in range(replicates)]
            indices = np.stack([o.take(count).reshape(count, k * batch_size) for o in orders], 1)
            state, finite = step_fn.run_chunk(
                state, stack_hyper([params] * replicates, (), spec.workload.optimizer), indices,
                t, x_all, y_all)
            return [x if ok else math.nan for x, ok in zip(losses(state, replicates), finite)]

        def affordable(k):
            return time.time() - started <= max_seconds and (
                max_examples is None or examples + branch_examples(
                    batch_size, k, length // k, replicates) <= max_examples)

        measured = []
        for t in sorted(base, reverse=True):  # the last point first: the probe's estimate
            point = BranchPoint(t, base[t], planned=tuple(factors))
            measured.insert(0, point)
            if not affordable(1):
                continue  # out of time or examples: recorded, nothing tried
            if math.isfinite(base[t]):  # else the base run diverged: nothing to keep up with
                point.continued = branch(t, 1, parameters["learning_rate"])
                examples += branch_examples(batch_size, 1, length, replicates)
            for k in factors:
                stars = point.stars()
                if not math.isfinite(point.reference) or not affordable(k) \
                        or (stars and max(stars) < max(point.accepted)):
                    break  # nothing to keep up with, out of time or examples, or all failed
                found = branch(t, k, scaled_learning_rate(parameters["learning_rate"], k, rule))
                point.losses[k] = found
                point.accepted[k] = [keeps_up(x, point.reference, tolerance) for x in found]
                examples += branch_examples(batch_size, k, length // k, replicates)
            value, low, high = point.interval(batch_size)
            log(f"branched probe at step {t:,}: reference loss {point.reference:.4g} "
                f"(spread {point.spread:.1%}); "
                + "; ".join(f"k={k}: {sum(a)}/{len(a)} kept up" for k, a in point.accepted.items())
                + f"; B_branch {value:.4g} [{low:.4g}, {high:.4g}]")
    seconds = time.time() - started
    return BranchedProbe(batch_size, rule, float(tolerance), replicates, step, length, measured,
                         seconds, int(examples), dict(parameters), max_examples)


def _seed(*parts: int) -> int:
    """One data order's seed from the spec's seed, the branch point, k and the replicate."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0])


def _evaluation_sample(spec: StudySpec, pipeline) -> tuple[np.ndarray, np.ndarray]:
    """The fixed evaluation sample: the spec's training-metric subset (the ``Evaluator``'s,
    seed ``spec.seed``), or every training example; its indices and labels."""
    from batchscale.training.evaluator import Evaluator

    subset = Evaluator(None, pipeline, spec.evaluation.train_examples, spec.seed).subset
    indices = subset if subset is not None else np.arange(pipeline.num_train_examples)
    return indices, np.asarray(pipeline.arrays("train")[1])[indices]


def _sample_losses(step_fn, state, width: int, sample, labels, pipeline, x_all) -> list[float]:
    """Each trial's task loss (``TASK_LOSS_METRIC``: the goal's metrics' loss, no label
    smoothing) on the evaluation sample, in evaluation-sized batches."""
    from batchscale.training.evaluator import eval_batch_size
    from batchscale.training.metrics import MetricAccumulator

    accumulators = [MetricAccumulator(pipeline.task) for _ in range(width)]
    size = eval_batch_size(pipeline)
    for first in range(0, len(sample), size):
        logits = step_fn.predict(state, x_all[sample[first:first + size]], True)
        for accumulator, one in zip(accumulators, logits):
            accumulator.update(one, labels[first:first + size])
    metric = TASK_LOSS_METRIC[pipeline.task]
    return [float(a.result()[metric]) for a in accumulators]
