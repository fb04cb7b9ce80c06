"""PaperMomentum follows TensorFlow's MomentumOptimizer rules on the JAX and TensorFlow backends,
with the optional L2 penalty on weight matrices only.

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

from batchscale.core.names import OPTIMIZERS

REPO = Path(__file__).resolve().parents[2]

THETA0 = [1.0, -2.0, 0.5]
GRADS = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.5], [-2.0, 1.0, 0.75], [0.1, -0.3, 1.2]]
LR, ALPHA, DECAY_STEPS = 0.4, 0.25, 3  # eta_t = 0.4, 0.3, 0.2, 0.1 for t = 0..3
MOMENTUM = 0.9
# L2 penalty case: a 2x2 kernel (penalised) and a bias (not), constant learning rate.
L2 = {
    "penalty": 0.01,
    "lr": 0.1,
    "kernel": [[1.0, -2.0], [0.5, 3.0]],
    "bias": [1.0, -1.0],
    "kernel_grads": [[[0.1, 0.2], [-0.3, 0.4]], [[-0.2, 0.0], [0.1, 0.5]], [[0.3, -0.1], [0.0, 0.2]]],
    "bias_grads": [[0.5, 0.5], [-0.25, 1.0], [0.1, 0.0]],
}

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import keras
    import numpy as np
    from batchscale.training.optimizer import make_optimizer
    from batchscale.training.schedules import make_keras_schedule

    cfg = json.loads(sys.argv[1])

    def run(opt):
        var = keras.Variable(np.array(cfg["theta0"], dtype="float32"))
        for g in cfg["grads"]:
            opt.apply_gradients([(keras.ops.convert_to_tensor(np.array(g, "float32")), var)])
        return keras.ops.convert_to_numpy(var).tolist()

    def schedule():
        return make_keras_schedule("linear", {"learning_rate": cfg["lr"], "decay_steps": cfg["decay_steps"],
                                              "end_learning_rate_factor": cfg["alpha"]})

    l2 = cfg["l2"]

    def l2_variables():
        return (keras.Variable(np.array(l2["kernel"], "float32")),
                keras.Variable(np.array(l2["bias"], "float32")))

    def l2_grads():
        for gk, gb in zip(l2["kernel_grads"], l2["bias_grads"]):
            yield [keras.ops.convert_to_tensor(np.array(g, "float32")) for g in (gk, gb)]

    def run_l2(name, steps):
        opt = make_optimizer(name, l2["lr"], cfg["momentum"], l2_penalty=l2["penalty"])
        kernel, bias = l2_variables()
        for _, grads in zip(range(steps), l2_grads()):
            opt.apply_gradients(zip(grads, (kernel, bias)))
        return [keras.ops.convert_to_numpy(v).tolist() for v in (kernel, bias)]

    out = {"backend": keras.backend.backend()}
    for name in cfg["optimizers"]:
        out[name] = run(make_optimizer(name, schedule(), cfg["momentum"]))
    for nesterov in (False, True):
        sgd = keras.optimizers.SGD(schedule(), momentum=cfg["momentum"], nesterov=nesterov)
        out[f"keras_sgd_nesterov={nesterov}"] = run(sgd)
    out["l2"] = {name: run_l2(name, len(l2["kernel_grads"])) for name in cfg["optimizers"]}
    out["l2_one_step"] = run_l2("sgd", 1)
    restored = type(make_optimizer("momentum", 0.1, 0.9, 0.01)).from_config(
        make_optimizer("momentum", 0.1, 0.9, 0.01).get_config())
    out["l2_config"] = restored.l2_penalty
    if out["backend"] == "jax":  # the path model.fit takes on JAX: stateless_apply
        opt = make_optimizer("nesterov_momentum", l2["lr"], cfg["momentum"], l2_penalty=l2["penalty"])
        kernel, bias = l2_variables()
        opt.build([kernel, bias])
        opt_vars, train_vars = [v.value for v in opt.variables], [kernel.value, bias.value]
        for grads in l2_grads():
            train_vars, opt_vars = opt.stateless_apply(opt_vars, grads, train_vars)
        out["l2_stateless"] = [np.asarray(v).tolist() for v in train_vars]
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
        "l2": L2,
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


def l2_reference(optimizer):
    """The paper's rules on the gradient of loss + (penalty / 2) ||kernel||^2 (bias unpenalised)."""
    gamma = {"sgd": 0.0, "momentum": MOMENTUM, "nesterov_momentum": MOMENTUM}[optimizer]
    out = []
    for name, penalty in (("kernel", L2["penalty"]), ("bias", 0.0)):
        w = np.array(L2[name], dtype=np.float64)
        v = np.zeros_like(w)
        for g_list in L2[f"{name}_grads"]:
            g = np.array(g_list, dtype=np.float64) + penalty * w
            v = gamma * v + g
            w = w - L2["lr"] * (g + gamma * v if optimizer == "nesterov_momentum" else v)
        out.append(w)
    return out


def test_l2_one_step_by_hand(backend_results):
    # kernel: w - 0.1 (g + 0.01 w): 1 - 0.1 (0.1 + 0.01) = 0.989; -2 - 0.1 (0.2 - 0.02) = -2.018;
    # 0.5 - 0.1 (-0.3 + 0.005) = 0.5295; 3 - 0.1 (0.4 + 0.03) = 2.957. bias: b - 0.1 g only.
    kernel, bias = backend_results["l2_one_step"]
    np.testing.assert_allclose(kernel, [[0.989, -2.018], [0.5295, 2.957]], atol=1e-6)
    np.testing.assert_allclose(bias, [0.95, -1.05], atol=1e-6)
    assert backend_results["l2_config"] == 0.01


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_l2_penalises_kernels_only(backend_results, optimizer):
    kernel, bias = backend_results["l2"][optimizer]
    want_kernel, want_bias = l2_reference(optimizer)
    np.testing.assert_allclose(kernel, want_kernel, atol=1e-6)
    np.testing.assert_allclose(bias, want_bias, atol=1e-6)
    if backend_results["backend"] == "jax" and optimizer == "nesterov_momentum":
        np.testing.assert_allclose(backend_results["l2_stateless"][0], want_kernel, atol=1e-6)
        np.testing.assert_allclose(backend_results["l2_stateless"][1], want_bias, atol=1e-6)


def test_l2_reference_is_the_gradient_of_the_half_squared_norm():
    """(penalty / 2) ||w||^2 has gradient penalty * w: check by central differences."""
    w = np.array(L2["kernel"])
    penalty, eps = L2["penalty"], 1e-6
    numeric = np.zeros_like(w)
    for idx in np.ndindex(w.shape):
        d = np.zeros_like(w)
        d[idx] = eps
        numeric[idx] = (penalty / 2 * (np.sum((w + d) ** 2) - np.sum((w - d) ** 2))) / (2 * eps)
    np.testing.assert_allclose(numeric, penalty * w, atol=1e-8)


def test_negative_penalty_is_refused():
    pytest.importorskip("keras")
    from batchscale.training.optimizer import make_optimizer

    with pytest.raises(ValueError, match="l2_penalty must be >= 0"):
        make_optimizer("sgd", 0.1, 0.0, l2_penalty=-1.0)
