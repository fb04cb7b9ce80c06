"""The paper's optimizer rules (TensorFlow's MomentumOptimizer) as NumPy references,
checked by hand, with the optional L2 penalty on weight matrices only.

That PaperMomentum follows these references on the JAX and TensorFlow backends is
checked in tests/integration/test_optimizer_backends.py (one subprocess per backend:
Keras fixes its backend at import); the references and their inputs live here.
"""

import numpy as np
import pytest

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
