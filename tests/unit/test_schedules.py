"""Learning-rate schedules: hand-computed values and agreement of the Keras schedule."""

import pytest

from components.train_trial.schedules import (
    OPTIMIZERS,
    SCHEDULES,
    learning_rate_at,
    make_keras_schedule,
)


def test_names():
    assert SCHEDULES == ("constant", "linear")
    assert OPTIMIZERS == ("sgd", "momentum", "nesterov_momentum")


@pytest.mark.parametrize("step", [0, 1, 50, 100, 10_000])
def test_constant(step):
    assert learning_rate_at(step, "constant", 0.3, 0.1, 100) == 0.3


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (0, 0.4),  # eta_0
        (25, 0.4 - 0.75 * 0.4 * 0.25),  # 0.325
        (50, 0.25),  # halfway between 0.4 and 0.1
        (100, 0.1),  # alpha * eta_0 at T
        (101, 0.1),
        (5000, 0.1),
    ],
)
def test_linear(step, expected):
    assert learning_rate_at(step, "linear", 0.4, 0.25, 100) == pytest.approx(expected, abs=1e-12)


def test_bad_schedule_names_allowed_values():
    with pytest.raises(ValueError, match="constant, linear"):
        learning_rate_at(0, "cosine", 0.1)
    with pytest.raises(ValueError, match="constant, linear"):
        make_keras_schedule("cosine", 0.1)


def test_bad_decay_steps():
    with pytest.raises(ValueError, match="decay_steps"):
        learning_rate_at(0, "linear", 0.1, 0.5, 0)


def test_keras_constant_is_float():
    assert make_keras_schedule("constant", 0.3, 0.1, 100) == 0.3


def test_keras_linear_matches_reference():
    keras = pytest.importorskip("keras")
    sched = make_keras_schedule("linear", 0.4, 0.25, 100)
    assert isinstance(sched, keras.optimizers.schedules.LearningRateSchedule)
    for step in (0, 1, 25, 50, 99, 100, 101, 5000):
        got = float(keras.ops.convert_to_numpy(sched(step)))
        assert got == pytest.approx(learning_rate_at(step, "linear", 0.4, 0.25, 100), abs=1e-6)
    # Round-trips through its config (used when a model with its optimizer is saved).
    again = type(sched).from_config(sched.get_config())
    assert float(keras.ops.convert_to_numpy(again(50))) == pytest.approx(0.25, abs=1e-6)
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(sched))
    assert float(keras.ops.convert_to_numpy(restored(100))) == pytest.approx(0.1, abs=1e-6)
