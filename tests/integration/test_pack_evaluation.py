"""A vmapped pack's chunks and evaluations on the device change no number.

- however a run is cut into chunks, and whatever index buffer carries them
  (``chunk_buffers.buffer_steps``), the trained arrays are equal to the bit;
- ``evaluator.PackEvaluation`` (one compiled call and one fetch per split, errors counted
  on the device) gives the rows ``evaluate_pack`` gives, to the bit, for a pack of trials
  with their own training subsets or one shared, a diverged trial among them, and
  splits cut into several calls.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from batchscale.training import chunk_buffers, vmapped_step
from batchscale.training import evaluator as evaluator_module

STEPS = 40


@pytest.fixture(scope="module")
def digits(digits_store):
    """The digits pipeline and its training arrays on the device (the pack's x_all, y_all)."""
    import jax.numpy as jnp

    from batchscale.store.layout import StudyStore
    from batchscale.training.task_losses import loss_targets
    from batchscale.workloads import get_dataset
    from batchscale.workloads.dataset_registry import open_pipeline

    pipeline = open_pipeline(StudyStore(digits_store), get_dataset("digits"))
    x, y = pipeline.arrays("train")
    return pipeline, jnp.asarray(x), jnp.asarray(loss_targets("classification", y, 10))


def _pack(pipeline, width: int, rates=(0.05, 0.2, 0.5)):
    """A PackStep for fc_32 and the stacked state of ``width`` trials (seeds 0, 1, ...)."""
    from batchscale.training.keras_setup import seed_keras
    from batchscale.workloads import build_model

    slots, arrays = ("velocity",), []
    for seed in range(width):
        seed_keras(seed, "jax")  # as a pack seeds a trial (keras' own seeding keeps a
        # global seed generator that earlier tests in the process have advanced)
        model = build_model("fc_32", pipeline.input_shape, pipeline.num_outputs)
        arrays.append(vmapped_step.initial_arrays(model, slots))
    step = vmapped_step.PackStep(model, "constant", "nesterov_momentum", False, 10)
    hyper = vmapped_step.stack_hyper(
        [{"learning_rate": rates[i % len(rates)], "momentum": 0.9} for i in range(width)], (),
        "nesterov_momentum")
    return step, vmapped_step.stack_trials(arrays, slots), hyper


def _indices(width: int, batch: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(7)
    return rng.integers(0, n, (STEPS, width, batch)).astype(np.int64)


def _train(pipeline, x_all, y_all, width, indices, lengths, buffers: bool):
    step_fn, state, hyper = _pack(pipeline, width)
    done = 0
    for n in lengths:
        piece = indices[done:done + n]
        if buffers:  # as the pack loop does: written into an index_buffer, sent as it is
            buffer = chunk_buffers.index_buffer(n, width, indices.shape[2])
            buffer[:n] = piece
            state, finite = step_fn.run_chunk(state, hyper, buffer, done, x_all, y_all, steps=n)
        else:
            state, finite = step_fn.run_chunk(state, hyper, piece, done, x_all, y_all)
        done += n
    assert done == STEPS and finite.all()
    return [state.trial(p) for p in range(width)], step_fn


def test_how_a_run_is_cut_into_chunks_changes_no_bit(digits, monkeypatch):
    """A pack of two trained 40 steps in one call (the default buffer: 512 steps) and in
    chunks of 8 and 32 steps written into ``index_buffer``s of 32 steps (MIN_BUFFER set to
    32 steps): two compiled loops, two buffer sizes, a padded buffer."""
    pipeline, x_all, y_all = digits
    width, batch = 2, 16
    indices = _indices(width, batch, len(pipeline.arrays("train")[0]))
    whole, step_fn = _train(pipeline, x_all, y_all, width, indices, [STEPS], buffers=False)
    assert [key[-1] for key in step_fn._compiled] == [512]
    monkeypatch.setattr(chunk_buffers, "MIN_BUFFER", 32 * width * batch)
    cut, step_fn = _train(pipeline, x_all, y_all, width, indices, [8, 32], buffers=True)
    assert [key[-1] for key in step_fn._compiled] == [32]
    for one, other in zip(whole, cut):
        assert one.keys() == other.keys()
        for name in one:
            assert np.array_equal(one[name], other[name]), name


def _rows_equal(old: list[dict], new: list[dict]) -> None:
    assert len(old) == len(new)
    for a, b in zip(old, new):
        assert a.keys() == b.keys()
        for name in a:
            if name == "wall_time":
                continue
            same = (math.isnan(a[name]) and math.isnan(b[name])) or a[name] == b[name]
            assert same, (name, a[name], b[name])


def test_device_evaluation_gives_the_rows_of_evaluate_pack_to_the_bit(digits, monkeypatch):
    """Four trials (seeds 0-3: their own weights and 500-example training subsets; the
    validation split shared), batches of 128 (ragged last ones), the fourth trial diverged
    (NaN weights); then the logits budget cut to one batch a call."""
    pipeline, x_all, _ = digits
    width = 4
    step_fn, state, _ = _pack(pipeline, width)
    arrays = [state.trial(p) for p in range(width)]
    arrays[3] = {k: np.full_like(v, np.nan) if k.startswith("trainable") else v
                 for k, v in arrays[3].items()}
    state = vmapped_step.stack_trials(arrays, ("velocity",))
    evaluators = [evaluator_module.Evaluator(None, pipeline, 500, seed) for seed in range(width)]
    for e in evaluators:
        e.batch_size = 128
    old = evaluator_module.evaluate_pack(
        evaluators, lambda x, shared: step_fn.predict(state, x, shared, x_all), 40, 0.0)
    assert math.isnan(old[3]["val/cross_entropy_error"]) and old[0]["val/classification_error"] > 0
    assert len({row["train/cross_entropy_error"] for row in old[:3]}) == 3
    _rows_equal(old, evaluator_module.PackEvaluation(evaluators, step_fn, x_all)(state, 40, 0.0))
    monkeypatch.setattr(evaluator_module, "LOGITS_BUDGET", width * 128 * 10)
    split_up = evaluator_module.PackEvaluation(evaluators, step_fn, x_all)
    assert [len(s[-1]) for s in split_up.splits] == [4, 2]  # train: 3 x 128 + 116; val: 128 + 122
    _rows_equal(old, split_up(state, 40, 0.0))
