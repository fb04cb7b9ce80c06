"""The Adam family on both engines equals Keras' own optimizers, step by step.

For each of adam, adamw, lamb and lion, a pack of three trials with different
metaparameters (learning rate, betas, epsilon, weight decay, and the trainer's coupled L2
penalty on one of them) trains a tiny two-layer Dense model through the pack engine's
vmapped step (``PackStep``, one compiled executable for all three) under a linear-decay
schedule; each trial is also trained by the fit engine's Keras optimizer
(``make_optimizer``) and by Keras' ``keras.optimizers.Adam``/``AdamW``/``Lamb``/``Lion``
with the same settings (decoupled weight decay excluded from the biases with
``exclude_from_weight_decay``, as batchscale decays only weight matrices; the L2 penalty
as a ``kernel_regularizer`` of l2/2). After every step the three agree within float32
tolerance. A trial with momentum-style settings still steps as before is checked by
tests/integration/test_optimizer_backends.py and test_pack_equivalence.py.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from batchscale.core.names import ADAM_FAMILY, SCHEDULE_OPTIONAL_PARAMETERS, SCHEDULE_PARAMETERS
from batchscale.training.keras_setup import seed_keras
from batchscale.training.optimizer import make_optimizer
from batchscale.training.optimizer_rules import SLOTS, optimizer_settings
from batchscale.training.schedules import make_keras_schedule
from batchscale.training.vmapped_step import PackStep, initial_arrays, stack_hyper, stack_trials

STEPS, BATCH, FEATURES, CLASSES = 6, 8, 4, 3
SCHEDULE = {"decay_steps": 4, "end_learning_rate_factor": 0.2}
# Three trials per optimizer: every metaparameter different; the last one also L2-penalised.
TRIALS = {
    "adam": [
        {"learning_rate": 0.01, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7},
        {"learning_rate": 0.003, "beta_1": 0.8, "beta_2": 0.99, "epsilon": 1e-4},
        {"learning_rate": 0.02, "beta_1": 0.95, "beta_2": 0.9999, "epsilon": 1e-8, "l2_penalty": 0.01},
    ],
    "adamw": [
        {"learning_rate": 0.01, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7, "weight_decay": 0.01},
        {"learning_rate": 0.003, "beta_1": 0.8, "beta_2": 0.99, "epsilon": 1e-4, "weight_decay": 0.3},
        {"learning_rate": 0.02, "beta_1": 0.95, "beta_2": 0.9999, "epsilon": 1e-8,
         "weight_decay": 0.1, "l2_penalty": 0.01},
    ],
    "lamb": [
        {"learning_rate": 0.01, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-6, "weight_decay": 0.01},
        {"learning_rate": 0.05, "beta_1": 0.8, "beta_2": 0.99, "epsilon": 1e-4, "weight_decay": 0.3},
        {"learning_rate": 0.02, "beta_1": 0.95, "beta_2": 0.9999, "epsilon": 1e-8,
         "weight_decay": 0.1, "l2_penalty": 0.01},
    ],
    "lion": [
        {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.99, "weight_decay": 0.1},
        {"learning_rate": 0.0003, "beta_1": 0.8, "beta_2": 0.98, "weight_decay": 1.0},
        {"learning_rate": 0.002, "beta_1": 0.95, "beta_2": 0.999, "weight_decay": 0.3,
         "l2_penalty": 0.01},
    ],
}
KERAS = {"adam": keras.optimizers.Adam, "adamw": keras.optimizers.AdamW,
         "lamb": keras.optimizers.Lamb, "lion": keras.optimizers.Lion}


def _model(l2: float = 0.0):
    regularizer = keras.regularizers.L2(l2 / 2) if l2 else None  # (l2/2)||W||^2: gradient l2 W
    # seed_keras, not keras.utils.set_random_seed: an earlier test in this process may have
    # given Keras a private seed stream (keras_setup._private_default_seeds)
    seed_keras(7, keras.backend.backend())
    return keras.Sequential([
        keras.Input((FEATURES,)),
        keras.layers.Dense(5, activation="tanh", kernel_regularizer=regularizer),
        keras.layers.Dense(CLASSES, kernel_regularizer=regularizer),
    ])


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4 * BATCH, FEATURES)).astype(np.float32)
    y = np.eye(CLASSES, dtype=np.float32)[rng.integers(0, CLASSES, 4 * BATCH)]
    order = np.stack([rng.permutation(len(x))[:BATCH] for _ in range(STEPS)])  # (steps, batch)
    return x, y, order


def _params(params: dict) -> dict:
    return {**params, **SCHEDULE}


def _keras_reference(optimizer: str, params: dict):
    """A model compiled with Keras' own optimizer of that name and the same settings."""
    model = _model(params.get("l2_penalty", 0.0))
    settings = optimizer_settings(optimizer, params)
    reference = KERAS[optimizer](learning_rate=make_keras_schedule("linear", _params(params)),
                                 **settings)
    if "weight_decay" in settings:
        reference.exclude_from_weight_decay(
            var_list=[v for v in model.trainable_variables if len(v.shape) < 2])
    model.compile(optimizer=reference, loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    return model


def _ours(optimizer: str, params: dict):
    """A model compiled with the fit engine's optimizer (``make_optimizer``)."""
    model = _model()
    settings = {k: v for k, v in optimizer_settings(optimizer, params).items()}
    ours = make_optimizer(optimizer, make_keras_schedule("linear", _params(params)), 0.0,
                          params.get("l2_penalty", 0.0), **settings)
    model.compile(optimizer=ours, loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    return model


@pytest.mark.parametrize("optimizer", ADAM_FAMILY)
def test_pack_and_fit_engine_equal_keras_step_by_step(optimizer):
    x, y, order = _data()
    trials = TRIALS[optimizer]
    references = [_keras_reference(optimizer, p) for p in trials]
    fitted = [_ours(optimizer, p) for p in trials]

    model = _model()
    step_fn = PackStep(model, "linear", optimizer, True, CLASSES)
    state = stack_trials([initial_arrays(model, SLOTS[optimizer])] * len(trials), SLOTS[optimizer])
    keys = (*SCHEDULE_PARAMETERS["linear"], *SCHEDULE_OPTIONAL_PARAMETERS["linear"])
    hyper = stack_hyper([_params(p) for p in trials], keys, optimizer)
    x_all, y_all = keras.ops.convert_to_tensor(x), keras.ops.convert_to_tensor(y)

    start = [v.numpy() for v in references[0].trainable_variables]
    moved = 0.0
    for step in range(STEPS):
        batch = order[step]
        indices = np.repeat(batch[None, None, :], len(trials), axis=1)  # (1 step, trials, batch)
        state, finite = step_fn.run_chunk(state, hyper, indices, step, x_all, y_all)
        assert finite.all()
        for position, (reference, fit) in enumerate(zip(references, fitted)):
            reference.train_on_batch(x[batch], y[batch])
            fit.train_on_batch(x[batch], y[batch])
            want = [v.numpy() for v in reference.trainable_variables]
            packed = [np.asarray(v[position]) for v in state.trainable]
            for i, (w, p, f) in enumerate(zip(want, packed, fit.trainable_variables)):
                where = f"{optimizer} trial {position} step {step + 1} variable {i}"
                np.testing.assert_allclose(p, w, rtol=2e-5, atol=2e-6, err_msg=f"pack: {where}")
                np.testing.assert_allclose(f.numpy(), w, rtol=2e-5, atol=2e-6, err_msg=f"fit: {where}")
    for w0, w in zip(start, references[0].trainable_variables):
        moved = max(moved, float(np.max(np.abs(w.numpy() - w0))))
    assert moved > 1e-3  # the comparison is of trained variables, not of the initial ones
    # The slots are the optimizer's: Adam's m and v, Lion's m; one array per variable.
    assert set(state.slots) == set(SLOTS[optimizer])
    assert all(len(arrays) == len(model.trainable_variables) for arrays in state.slots.values())


def test_weight_decay_spares_rank_one_variables():
    """AdamW with a huge decay and a zero gradient: kernels shrink by (1 - eta wd) per
    step, biases (rank 1) stay put; with Adam's zero step on a zero gradient, exactly."""
    kernel = keras.Variable(np.ones((2, 2), np.float32))
    bias = keras.Variable(np.ones((2,), np.float32))
    opt = make_optimizer("adamw", 0.1, weight_decay=0.5)
    zeros = [keras.ops.zeros((2, 2)), keras.ops.zeros((2,))]
    for _ in range(2):
        opt.apply_gradients(zip(zeros, (kernel, bias)))
    np.testing.assert_allclose(kernel.numpy(), 0.95 ** 2, rtol=1e-6)
    np.testing.assert_allclose(bias.numpy(), 1.0)


def test_optimizer_settings_refused_or_defaulted():
    with pytest.raises(ValueError, match="optimizer adam does not read weight_decay"):
        make_optimizer("adam", 0.1, weight_decay=0.1)
    opt = make_optimizer("lamb", 0.1)
    assert opt.settings == {"beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-6, "weight_decay": 0.01}
    restored = type(opt).from_config(opt.get_config())
    assert (restored.rule, restored.settings) == ("lamb", opt.settings)


@pytest.mark.parametrize("optimizer", ["adamw", "nesterov_momentum"])
def test_a_pack_resumed_from_its_checkpoint_arrays_trains_on_identically(optimizer):
    """Six steps in one chunk equal three, a round trip through each trial's checkpoint
    arrays (``StackedState.trial`` -> ``stack_trials``: the slots as ``m/<i>``, ``v/<i>``;
    momentum's ``velocity/<i>`` as before), and three more from step 3: the bias
    corrections read the pack's step, which the checkpoint keeps."""
    x, y, order = _data()
    trials = TRIALS["adamw"] if optimizer == "adamw" else [
        {"learning_rate": p["learning_rate"], "momentum": 0.9} for p in TRIALS["adamw"]]
    model = _model()
    step_fn = PackStep(model, "linear", optimizer, True, CLASSES)
    keys = (*SCHEDULE_PARAMETERS["linear"], *SCHEDULE_OPTIONAL_PARAMETERS["linear"])
    hyper = stack_hyper([_params(p) for p in trials], keys, optimizer)
    indices = np.repeat(order[:, None, :], len(trials), axis=1)  # (steps, trials, batch)
    fresh = [initial_arrays(model, SLOTS[optimizer])] * len(trials)

    whole, _ = step_fn.run_chunk(stack_trials(fresh, SLOTS[optimizer]), hyper, indices, 0, x, y)
    half, _ = step_fn.run_chunk(stack_trials(fresh, SLOTS[optimizer]), hyper, indices[:3], 0, x, y)
    saved = [half.trial(position) for position in range(len(trials))]
    assert {key.split("/")[0] for key in saved[0]} == {"trainable", *SLOTS[optimizer]}  # no
    # non-trainable variables in this model
    resumed, _ = step_fn.run_chunk(stack_trials(saved, SLOTS[optimizer]), hyper, indices[3:], 3, x, y)
    for position in range(len(trials)):
        a, b = whole.trial(position), resumed.trial(position)
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
