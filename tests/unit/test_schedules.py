"""Learning-rate schedules: hand-computed values and agreement of the Keras schedules."""

import math

import pytest

from batchscale.core.names import OPTIMIZERS, SCHEDULE_OPTIONAL_PARAMETERS, SCHEDULE_PARAMETERS, SCHEDULES
from batchscale.training.schedules import learning_rate_at, make_keras_schedule

ETA, ALPHA, T = 0.4, 0.25, 100
DECAY = {"learning_rate": ETA, "end_learning_rate_factor": ALPHA, "decay_steps": T}
PARAMS = {
    "constant": {"learning_rate": ETA},
    "linear": DECAY,
    "cosine": DECAY,
    "exponential_polynomial": {**DECAY, "power": 2.0},
    "inverse_exponential_polynomial": {**DECAY, "power": 0.5},
    "exponential": DECAY,
    "piecewise_linear": {**DECAY, "decay_events": 3},
}


def test_names():
    assert SCHEDULES == (
        "constant", "linear", "cosine", "exponential_polynomial",
        "inverse_exponential_polynomial", "exponential", "piecewise_linear",
    )
    assert set(SCHEDULE_PARAMETERS) == set(SCHEDULES) == set(SCHEDULE_OPTIONAL_PARAMETERS)
    assert set(PARAMS["piecewise_linear"]) - {"learning_rate"} == set(SCHEDULE_PARAMETERS["piecewise_linear"])
    assert OPTIMIZERS[:3] == ("sgd", "momentum", "nesterov_momentum")


@pytest.mark.parametrize("step", [0, 1, 50, 100, 10_000])
def test_constant(step):
    assert learning_rate_at(step, "constant", {"learning_rate": 0.3}) == 0.3


# Hand-computed: eta_0 = 0.4, alpha = 0.25, T = 100 (0.1 = alpha * eta_0 at and after T).
HAND = {
    "linear": [(0, 0.4), (25, 0.325), (50, 0.25), (100, 0.1), (101, 0.1), (5000, 0.1)],
    # d(50) = 0.25 + 0.375 * (1 + cos(pi/2)) = 0.625; d(25) = 0.25 + 0.375 (1 + sqrt(2)/2).
    "cosine": [(0, 0.4), (25, 0.4 * (0.25 + 0.375 * (1 + math.sqrt(0.5)))), (50, 0.25),
               (100, 0.1), (200, 0.1)],
    # lambda = 2: d(50) = 0.25 + 0.75 * 0.25 = 0.4375; d(90) = 0.25 + 0.75 * 0.01 = 0.2575.
    "exponential_polynomial": [(0, 0.4), (50, 0.175), (90, 0.103), (100, 0.1), (150, 0.1)],
    # lambda = 0.5: d(25) = 0.25 / (0.25 + 0.75 * 0.5) = 0.4; d(4) = 0.25 / (0.25 + 0.15) = 0.625.
    "inverse_exponential_polynomial": [(0, 0.4), (4, 0.25), (25, 0.16), (100, 0.1), (101, 0.1)],
    # d = 0.25^(t/100): d(50) = 0.5.
    "exponential": [(0, 0.4), (50, 0.2), (100, 0.1), (1000, 0.1)],
    # k = 3: drops of 0.25^(1/3) at t = 33.3 -> 34, 66.7 -> 67, and 100.
    "piecewise_linear": [(0, 0.4), (33, 0.4), (34, 0.4 * 0.25 ** (1 / 3)), (66, 0.4 * 0.25 ** (1 / 3)),
                         (67, 0.4 * 0.25 ** (2 / 3)), (99, 0.4 * 0.25 ** (2 / 3)), (100, 0.1),
                         (500, 0.1)],
}


@pytest.mark.parametrize(
    ("schedule", "step", "expected"),
    [(s, step, value) for s, cases in HAND.items() for step, value in cases],
)
def test_hand_computed(schedule, step, expected):
    assert learning_rate_at(step, schedule, PARAMS[schedule]) == pytest.approx(expected, abs=1e-12)


def test_goyal_warmup_then_piecewise_constant():
    """Goyal et al.: 5 'epochs' of linear warm-up, then /10 drops at 30, 60, 90 'epochs'."""
    params = {"learning_rate": 0.8, "end_learning_rate_factor": 1e-3, "decay_steps": 95,
              "decay_events": 3, "warmup_steps": 5}
    got = [learning_rate_at(t, "piecewise_linear", params) for t in (0, 1, 4, 5, 34, 35, 64, 65, 94, 95)]
    expected = [0.16, 0.32, 0.8, 0.8, 0.8, 0.08, 0.08, 0.008, 0.008, 0.0008]
    assert got == pytest.approx(expected, rel=1e-12)


def test_warmup_then_linear_decay_from_w_to_t():
    params = {**DECAY, "warmup_steps": 20}  # ramp 0.02, 0.04, ..., 0.4; then 0.4 -> 0.1 over 20..100
    assert learning_rate_at(0, "linear", params) == pytest.approx(0.02)
    assert learning_rate_at(19, "linear", params) == pytest.approx(0.4)
    assert learning_rate_at(20, "linear", params) == pytest.approx(0.4)
    assert learning_rate_at(60, "linear", params) == pytest.approx(0.25)
    assert learning_rate_at(100, "linear", params) == pytest.approx(0.1)
    assert learning_rate_at(3, "constant", {"learning_rate": 0.4, "warmup_steps": 4}) == pytest.approx(0.4)
    assert learning_rate_at(1, "constant", {"learning_rate": 0.4, "warmup_steps": 4}) == pytest.approx(0.2)


def test_protobuf_floats_and_extra_keys_are_accepted():
    params = {**PARAMS["piecewise_linear"], "decay_steps": 100.0, "decay_events": 3.0,
              "momentum": 0.9, "label_smoothing": 0.1, "l2_penalty": 1e-4}
    assert learning_rate_at(34, "piecewise_linear", params) == pytest.approx(0.4 * 0.25 ** (1 / 3))


@pytest.mark.parametrize(
    ("schedule", "params", "match"),
    [
        ("cosine_restarts", {"learning_rate": 0.1}, "constant, linear, cosine"),
        ("linear", {"learning_rate": 0.1, "decay_steps": 10}, "needs end_learning_rate_factor"),
        ("exponential_polynomial", DECAY, "needs power"),
        ("piecewise_linear", DECAY, "needs decay_events"),
        ("constant", {"learning_rate": 0.1, "decay_steps": 10}, "does not use decay_steps"),
        ("linear", {**DECAY, "power": 2.0}, "does not use power"),
        ("linear", {**DECAY, "decay_steps": 0}, "decay_steps must be > 0"),
        ("linear", {**DECAY, "decay_steps": 10.5}, "decay_steps must be an integer"),
        ("linear", {**DECAY, "end_learning_rate_factor": 0.0}, "end_learning_rate_factor must be > 0"),
        ("exponential_polynomial", {**DECAY, "power": -1.0}, "power must be > 0"),
        ("piecewise_linear", {**DECAY, "decay_events": 0}, "decay_events must be > 0"),
        ("linear", {**DECAY, "warmup_steps": 100}, "warmup_steps .100. must be < decay_steps"),
        ("constant", {"learning_rate": 0.1, "warmup_steps": -1}, "warmup_steps must be >= 0"),
        ("constant", {"learning_rate": -0.1}, "learning_rate must be > 0"),
        ("constant", {"learning_rate": float("nan")}, "finite number"),
    ],
)
def test_validation_errors(schedule, params, match):
    with pytest.raises(ValueError, match=match):
        learning_rate_at(0, schedule, params)
    with pytest.raises(ValueError, match=match):
        make_keras_schedule(schedule, params)


def test_keras_constant_is_float():
    assert make_keras_schedule("constant", {"learning_rate": 0.3, "momentum": 0.9}) == 0.3


STEPS = (0, 1, 2, 3, 4, 5, 19, 20, 21, 25, 33, 34, 50, 66, 67, 90, 99, 100, 101, 150, 5000)
KERAS_CASES = [(s, p) for s, p in PARAMS.items() if s != "constant"] + [
    (s, {**p, "warmup_steps": 20}) for s, p in PARAMS.items()
] + [("piecewise_linear", {**DECAY, "decay_events": 1}),
     ("piecewise_linear", {**DECAY, "decay_events": 5, "warmup_steps": 5}),
     ("exponential_polynomial", {**DECAY, "power": 0.3}),
     ("inverse_exponential_polynomial", {**DECAY, "power": 3.0})]


@pytest.mark.parametrize(("schedule", "params"), KERAS_CASES,
                         ids=[f"{s}-{i}" for i, (s, _) in enumerate(KERAS_CASES)])
def test_keras_matches_reference(schedule, params):
    keras = pytest.importorskip("keras")
    sched = make_keras_schedule(schedule, params)
    assert isinstance(sched, keras.optimizers.schedules.LearningRateSchedule)
    for step in STEPS:
        got = float(keras.ops.convert_to_numpy(sched(step)))
        assert got == pytest.approx(learning_rate_at(step, schedule, params), rel=1e-5, abs=1e-7), step
    # Also under the optimizer's integer step variable, traced.
    iterations = keras.Variable(34, dtype="int64" if keras.backend.backend() != "jax" else "int32")
    got = float(keras.ops.convert_to_numpy(sched(iterations)))
    assert got == pytest.approx(learning_rate_at(34, schedule, params), rel=1e-5)


def test_keras_schedule_serialises():
    keras = pytest.importorskip("keras")
    sched = make_keras_schedule("piecewise_linear", {**PARAMS["piecewise_linear"], "warmup_steps": 10})
    again = type(sched).from_config(sched.get_config())
    assert float(keras.ops.convert_to_numpy(again(5))) == pytest.approx(0.4 * 6 / 10, rel=1e-6)
    # Registered, so a saved optimizer's schedule deserialises (the full keras.saving round trip
    # imports TensorFlow: too slow for a unit test).
    assert keras.saving.get_registered_object("batchscale>PaperSchedule") is type(sched)
    assert keras.saving.get_registered_name(type(sched)) == "batchscale>PaperSchedule"


def test_keras_schedule_under_jit():
    keras = pytest.importorskip("keras")
    if keras.backend.backend() != "jax":
        pytest.skip("the suite runs the schedules on JAX")
    import jax

    sched = make_keras_schedule("piecewise_linear", {**PARAMS["piecewise_linear"], "warmup_steps": 10})
    f = jax.jit(sched.__call__)
    for step in (0, 9, 10, 40, 60, 99, 100, 1000):
        want = learning_rate_at(step, "piecewise_linear", {**PARAMS["piecewise_linear"], "warmup_steps": 10})
        assert float(f(jax.numpy.int32(step))) == pytest.approx(want, rel=1e-5)
