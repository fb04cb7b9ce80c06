"""PaperMomentum follows TensorFlow's MomentumOptimizer rules on the JAX and TensorFlow backends,
with the optional L2 penalty on weight matrices only.

Keras fixes its backend at import, so each backend runs in its own subprocess (all cases in one
script) and the results are compared against the explicit NumPy references of the paper's rules
in tests/unit/test_optimizer.py (checked there by hand).
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from batchscale.core.names import PAPER_OPTIMIZERS
from tests.unit.test_optimizer import (
    ALPHA,
    DECAY_STEPS,
    GRADS,
    L2,
    LR,
    MOMENTUM,
    THETA0,
    keras_sgd_reference,
    l2_reference,
    reference,
)

REPO = Path(__file__).resolve().parents[2]

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



@pytest.fixture(scope="module", params=["jax", "tensorflow"])
def backend_results(request):
    cfg = {
        "theta0": THETA0,
        "grads": GRADS,
        "lr": LR,
        "alpha": ALPHA,
        "decay_steps": DECAY_STEPS,
        "momentum": MOMENTUM,
        "optimizers": list(PAPER_OPTIMIZERS),
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



@pytest.mark.parametrize("optimizer", PAPER_OPTIMIZERS)
def test_matches_paper_rule(backend_results, optimizer):
    np.testing.assert_allclose(backend_results[optimizer], reference(optimizer), atol=1e-6)


def test_keras_sgd_differs_under_decay(backend_results):
    if backend_results["backend"] != "jax":
        pytest.skip("one backend is enough to document the difference")
    for nesterov, ours in ((False, "momentum"), (True, "nesterov_momentum")):
        got = np.array(backend_results[f"keras_sgd_nesterov={nesterov}"])
        np.testing.assert_allclose(got, keras_sgd_reference(nesterov), atol=1e-6)
        assert np.max(np.abs(got - reference(ours))) > 1e-2



def test_l2_one_step_by_hand(backend_results):
    # kernel: w - 0.1 (g + 0.01 w): 1 - 0.1 (0.1 + 0.01) = 0.989; -2 - 0.1 (0.2 - 0.02) = -2.018;
    # 0.5 - 0.1 (-0.3 + 0.005) = 0.5295; 3 - 0.1 (0.4 + 0.03) = 2.957. bias: b - 0.1 g only.
    kernel, bias = backend_results["l2_one_step"]
    np.testing.assert_allclose(kernel, [[0.989, -2.018], [0.5295, 2.957]], atol=1e-6)
    np.testing.assert_allclose(bias, [0.95, -1.05], atol=1e-6)
    assert backend_results["l2_config"] == 0.01


@pytest.mark.parametrize("optimizer", PAPER_OPTIMIZERS)
def test_l2_penalises_kernels_only(backend_results, optimizer):
    kernel, bias = backend_results["l2"][optimizer]
    want_kernel, want_bias = l2_reference(optimizer)
    np.testing.assert_allclose(kernel, want_kernel, atol=1e-6)
    np.testing.assert_allclose(bias, want_bias, atol=1e-6)
    if backend_results["backend"] == "jax" and optimizer == "nesterov_momentum":
        np.testing.assert_allclose(backend_results["l2_stateless"][0], want_kernel, atol=1e-6)
        np.testing.assert_allclose(backend_results["l2_stateless"][1], want_bias, atol=1e-6)
