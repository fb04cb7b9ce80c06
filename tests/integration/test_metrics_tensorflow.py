"""Average precision (Appendix A.2) against TensorFlow's own tf.metrics.auc.

TensorFlow runs in a subprocess (graph mode, tf.compat.v1 metrics streamed like ours);
the hand-computed checks of every metric are in tests/unit/test_metrics.py.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from batchscale.training.metrics import MetricAccumulator, average_precision, sigmoid

REPO = Path(__file__).resolve().parents[2]


TF_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tensorflow as tf

    data = np.load(sys.argv[1])
    cases = json.loads(data["cases"].item())
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        p = tf.compat.v1.placeholder(tf.float32, [None])
        y = tf.compat.v1.placeholder(tf.bool, [None])
        w = tf.compat.v1.placeholder(tf.float32, [None])
        z = tf.compat.v1.placeholder(tf.float64, [None, None])
        t = tf.compat.v1.placeholder(tf.float64, [None, None])
        ce = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=t, logits=z))
        out = {}
        for case in cases:
            auc, update = tf.compat.v1.metrics.auc(
                y, p, weights=w, num_thresholds=200, curve="PR",
                summation_method="careful_interpolation", name=case)
            sess.run(tf.compat.v1.local_variables_initializer())
            probs, labels, weights = data[case + "/p"], data[case + "/y"], data[case + "/w"]
            for start in range(0, len(probs), 1000):  # streamed, like ours
                s = slice(start, start + 1000)
                sess.run(update, {p: probs[s], y: labels[s], w: weights[s]})
            out[case] = float(sess.run(auc))
            if data[case + "/z"].size:
                out[case + "/ce"] = float(sess.run(ce, {z: data[case + "/z"], t: data[case + "/t"]}))
    print(json.dumps(out))
    """
)


def _tf_cases():
    """Inputs (logits or probabilities), with our results, for the TensorFlow comparison."""
    rng = np.random.default_rng(0)
    cases = {}

    def add(name, logits=None, targets=None, probabilities=None, weights=None, batch=64):
        if probabilities is None:
            acc = MetricAccumulator("multilabel")
            for start in range(0, len(logits), batch):
                s = slice(start, start + batch)
                acc.update(logits[s], targets[s], None if weights is None else weights[s])
            ours = acc.result()
            probabilities = sigmoid(logits)
        else:
            ours = {"average_precision": average_precision(probabilities, targets, weights)}
        w = np.ones(targets.shape) if weights is None else np.broadcast_to(
            weights[:, None] if weights.ndim == 1 else weights, targets.shape)
        cases[name] = {
            "ours": ours,
            "p": probabilities.astype(np.float32).ravel(), "y": targets.ravel() > 0,
            "w": w.astype(np.float32).ravel(),
            "z": np.zeros(0) if logits is None else logits.astype(np.float64),
            "t": np.zeros(0) if logits is None else targets.astype(np.float64),
        }

    z = rng.normal(0, 2, (200, 50))
    add("random", z, (rng.random(z.shape) < 0.1).astype(int))
    y = (rng.random((300, 20)) < 0.3).astype(int)
    add("informative", rng.normal(0, 1.5, y.shape) + 2.0 * y - 1.0, y, batch=100)
    weights = np.ones(300)
    weights[-37:] = 0.0  # a padded final batch
    add("padded_images", rng.normal(0, 1.5, y.shape) + 1.5 * y - 1.0, y, weights=weights, batch=128)
    pair_w = (rng.random(y.shape) < 0.7).astype(float)
    add("pair_weights", rng.normal(0, 1, y.shape) + y, y, weights=pair_w, batch=50)
    add("saturated", rng.choice([-40.0, 40.0, 0.0, 3.0], (80, 10)), (rng.random((80, 10)) < 0.5).astype(int))
    add("rare_positives", rng.normal(0, 3, (500, 40)), (rng.random((500, 40)) < 0.005).astype(int))
    on_thresholds = (rng.integers(0, 200, 3000) / 199).astype(np.float32)  # ties with t_i: strict >
    on_thresholds[:4] = [0.0, 1.0, 0.0, 1.0]
    add("on_thresholds", probabilities=on_thresholds, targets=(rng.random(3000) < 0.4).astype(int))
    add("no_positives", rng.normal(0, 1, (20, 5)), np.zeros((20, 5), int))
    return cases


@pytest.fixture(scope="module")
def tensorflow_results(tmp_path_factory):
    pytest.importorskip("tensorflow")
    cases = _tf_cases()
    path = tmp_path_factory.mktemp("auc") / "cases.npz"
    arrays = {f"{c}/{k}": v for c, d in cases.items() for k, v in d.items() if k != "ours"}
    np.savez(path, cases=np.array(json.dumps(list(cases))), **arrays)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", TF_SCRIPT, str(path)], check=False, cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return cases, json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # importing TensorFlow takes ~10 s of CPU
def test_average_precision_matches_tf_metrics_auc(tensorflow_results):
    cases, tf_values = tensorflow_results
    for name, case in cases.items():
        assert case["ours"]["average_precision"] == pytest.approx(tf_values[name], abs=2e-6), name
        if f"{name}/ce" in tf_values and "padded" not in name and "weights" not in name:
            assert case["ours"]["cross_entropy_error"] == pytest.approx(tf_values[f"{name}/ce"], rel=1e-9)
    assert 0.05 < tf_values["random"] < 0.3 and tf_values["informative"] > 0.5
    assert tf_values["no_positives"] == 0.0
