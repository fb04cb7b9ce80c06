"""PaperMomentum follows TensorFlow's MomentumOptimizer rules on the JAX and TensorFlow backends.

Keras fixes its backend at import, so each backend runs in its own subprocess (all cases in one
script) and the results are compared against an explicit NumPy reference of the paper's rules.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from components.train_trial.schedules import OPTIMIZERS

REPO = Path(__file__).resolve().parents[2]

THETA0 = [1.0, -2.0, 0.5]
GRADS = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.5], [-2.0, 1.0, 0.75], [0.1, -0.3, 1.2]]
LR, ALPHA, DECAY_STEPS = 0.4, 0.25, 3  # eta_t = 0.4, 0.3, 0.2, 0.1 for t = 0..3
MOMENTUM = 0.9

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import keras
    import numpy as np
    from components.train_trial.optimizer import make_optimizer
    from components.train_trial.schedules import make_keras_schedule

    cfg = json.loads(sys.argv[1])

    def run(opt):
        var = keras.Variable(np.array(cfg["theta0"], dtype="float32"))
        for g in cfg["grads"]:
            opt.apply_gradients([(keras.ops.convert_to_tensor(np.array(g, "float32")), var)])
        return keras.ops.convert_to_numpy(var).tolist()

    def schedule():
        return make_keras_schedule("linear", cfg["lr"], cfg["alpha"], cfg["decay_steps"])

    out = {"backend": keras.backend.backend()}
    for name in cfg["optimizers"]:
        out[name] = run(make_optimizer(name, schedule(), cfg["momentum"]))
    for nesterov in (False, True):
        sgd = keras.optimizers.SGD(schedule(), momentum=cfg["momentum"], nesterov=nesterov)
        out[f"keras_sgd_nesterov={nesterov}"] = run(sgd)
    print(json.dumps(out))
    """
)


def reference(optimizer):
    """The paper's update rules (TF MomentumOptimizer), written out as plain loops."""
    gamma = {"sgd": 0.0, "momentum": MOMENTUM, "nesterov_momentum": MOMENTUM}[optimizer]
    theta = np.array(THETA0, dtype=np.float64)
    v = np.zeros_like(theta)
    for t, g_list in enumerate(GRADS):
        g = np.array(g_list, dtype=np.float64)
        eta = LR - (1 - ALPHA) * LR * min(t, DECAY_STEPS) / DECAY_STEPS
        v = gamma * v + g
        if optimizer == "nesterov_momentum":
            theta = theta - eta * g - eta * gamma * v
        else:
            theta = theta - eta * v
    return theta


def keras_sgd_reference(nesterov):
    """Keras SGD's rule (velocity carries past learning rates), for documentation."""
    theta = np.array(THETA0, dtype=np.float64)
    v = np.zeros_like(theta)
    for t, g_list in enumerate(GRADS):
        g = np.array(g_list, dtype=np.float64)
        eta = LR - (1 - ALPHA) * LR * min(t, DECAY_STEPS) / DECAY_STEPS
        v = MOMENTUM * v - eta * g
        theta = theta + (MOMENTUM * v - eta * g if nesterov else v)
    return theta


@pytest.fixture(scope="module", params=["jax", "tensorflow"])
def backend_results(request):
    cfg = {
        "theta0": THETA0,
        "grads": GRADS,
        "lr": LR,
        "alpha": ALPHA,
        "decay_steps": DECAY_STEPS,
        "momentum": MOMENTUM,
        "optimizers": list(OPTIMIZERS),
    }
    env = dict(os.environ, KERAS_BACKEND=request.param, TF_CPP_MIN_LOG_LEVEL="3")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(cfg)],
        check=False,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["backend"] == request.param
    return out


@pytest.mark.parametrize(
    ("optimizer", "theta_0"),
    [
        # eta = 0.4, 0.3, 0.2, 0.1; component 0 of g = 0.5, 1.5, -2.0, 0.1.
        ("sgd", 1 - (0.4 * 0.5 + 0.3 * 1.5 + 0.2 * -2.0 + 0.1 * 0.1)),  # 0.74
        # v = 0.5, 1.95, -0.245, -0.1205; theta = 0.8, 0.215, 0.264, 0.27605.
        ("momentum", 0.27605),
        # theta = 0.62, -0.3565, 0.0876, 0.088445.
        ("nesterov_momentum", 0.088445),
    ],
)
def test_reference_by_hand(optimizer, theta_0):
    assert reference(optimizer)[0] == pytest.approx(theta_0, abs=1e-12)


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_matches_paper_rule(backend_results, optimizer):
    np.testing.assert_allclose(backend_results[optimizer], reference(optimizer), atol=1e-6)


def test_keras_sgd_differs_under_decay(backend_results):
    if backend_results["backend"] != "jax":
        pytest.skip("one backend is enough to document the difference")
    for nesterov, ours in ((False, "momentum"), (True, "nesterov_momentum")):
        got = np.array(backend_results[f"keras_sgd_nesterov={nesterov}"])
        np.testing.assert_allclose(got, keras_sgd_reference(nesterov), atol=1e-6)
        assert np.max(np.abs(got - reference(ours))) > 1e-2
