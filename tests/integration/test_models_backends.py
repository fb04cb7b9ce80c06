"""Every model of Appendix B at paper scale, on both Keras backends, and ghost batch norm
over several replicas.

Parameter counts are checked against formulas written out by hand below. Keras fixes
its backend (and JAX its device count) at first import, so the TensorFlow-backend checks
and the multi-device checks run in one subprocess per backend (module fixture ``probe``);
in-process tests use JAX (tests/conftest.py) on small models only, because eager JAX on
CPU compiles every new op shape (each initializer of a big model costs a compilation):
those are in tests/integration/test_models_jax.py, the registry and the quick
in-process checks in tests/unit/test_models.py.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import host_devices_env
from tests.unit.test_models import IMAGE_MODELS, LM_MODELS

REPO = Path(__file__).resolve().parents[2]
VOCAB = 1000


def conv(k, c_in, c_out, bias=True):
    return k * k * c_in * c_out + (c_out if bias else 0)


def dense(n_in, n_out, bias=True):
    return n_in * n_out + (n_out if bias else 0)


def resnet_50_params(classes):
    """Pre-activation bottleneck ResNet-50: bias-free convolutions, 4 numbers per normalised
    channel (gamma, beta, moving mean and variance), one normalisation before each of a
    unit's three convolutions and one after the last unit; none after conv1 (v2)."""
    total, channels = conv(7, 3, 64, bias=False), 64
    for filters, units in ((64, 3), (128, 4), (256, 6), (512, 3)):
        for unit in range(units):
            total += conv(1, channels, filters, False) + conv(3, filters, filters, False)
            total += conv(1, filters, 4 * filters, False)
            total += 4 * (channels + 2 * filters)  # ghost BN before conv1, conv2, conv3
            if unit == 0:
                total += conv(1, channels, 4 * filters, False)  # projection shortcut
            channels = 4 * filters
    return total + 4 * channels + dense(channels, classes)  # final ghost BN, logits


def transformer_params(d, ff, layers, vocab):
    """Shared input/output embedding (no output bias); per layer: attention q, k, v, o with
    biases, the ReLU feed-forward pair, two layer norms; one final layer norm."""
    per_layer = 4 * (d * d + d) + dense(d, ff) + dense(ff, d) + 2 * 2 * d
    return vocab * d + layers * per_layer + 2 * d


PARAMETER_COUNTS = {  # name: (input shape, outputs, task, expected)
    # Appendix B's ResNet-8 (He 2016a 4.2, n=1) without BN, so convolutions have biases;
    # 1x1 projections where stages 2 and 3 change shape.
    "resnet_8": ((32, 32, 3), 10, "classification",
                 conv(3, 3, 16) + 2 * conv(3, 16, 16)
                 + conv(3, 16, 32) + conv(3, 32, 32) + conv(1, 16, 32)
                 + conv(3, 32, 64) + conv(3, 64, 64) + conv(1, 32, 64) + dense(64, 10)),
    # 25,594,792. Keras' ResNet50 (v1) has 25,557,032 and ResNet50V2 25,613,800; all share
    # the 23,454,912 bias-free conv weights and the 2,049,000 of the FC layer and differ in
    # conv biases and in where the normalisations sit (here 22,720 normalised channels).
    "resnet_50": ((224, 224, 3), 1000, "classification", resnet_50_params(1000)),
    # 132,863,336: Simonyan & Zisserman's model A.
    "vgg_11": ((224, 224, 3), 1000, "classification",
               conv(3, 3, 64) + conv(3, 64, 128) + conv(3, 128, 256) + conv(3, 256, 256)
               + conv(3, 256, 512) + 3 * conv(3, 512, 512)
               + dense(7 * 7 * 512, 4096) + dense(4096, 4096) + dense(4096, 1000)),
    "transformer_base": (None, VOCAB, "language_model", transformer_params(512, 2048, 6, VOCAB)),
    "transformer_shallow": (None, VOCAB, "language_model", transformer_params(512, 2048, 2, VOCAB)),
    "transformer_narrow_and_shallow": (None, VOCAB, "language_model",
                                       transformer_params(256, 1024, 2, VOCAB)),
    "transformer_wide": (None, VOCAB, "language_model", transformer_params(1024, 4096, 6, VOCAB)),
    # Embedding 1024; LSTMP: input and recurrent (projected, 512) kernels to 4 gates of 2048,
    # gate biases, 2048 -> 512 projection without bias; 512 -> vocab logits without bias.
    "lstm": (None, VOCAB, "language_model",
             VOCAB * 1024 + (1024 + 512) * 4 * 2048 + 4 * 2048 + 2048 * 512 + 512 * VOCAB),
}


def tiny_case(name):
    """(input shape, outputs, task) of a small instance, for forward passes."""
    if name in LM_MODELS:
        return None, 50, "language_model"
    if name == "resnet_50":
        return (32, 32, 3), 7, "multilabel"
    return (8, 8, 3), 5, "classification"


SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import numpy as np
    cfg = json.loads(sys.argv[1])
    if os.environ["KERAS_BACKEND"] == "tensorflow":
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 4)
    import keras
    from tests.integration.test_models_backends import (
        distributed_run, forward_report, tf_dynamic_batch_report)
    from batchscale.workloads.models import build_model

    out = {"backend": keras.backend.backend(), "counts": {}, "forward": {}}
    for name, (shape, outputs, task) in cfg["counts"].items():
        out["counts"][name] = build_model(name, shape, outputs, task).count_params()
    keras.config.set_dtype_policy("mixed_bfloat16")
    for name, case in cfg["forward"].items():
        out["forward"][name] = forward_report(name, *case)
    keras.config.set_dtype_policy("float32")
    if out["backend"] == "tensorflow":
        out["dynamic_batch"] = tf_dynamic_batch_report()
    out["distributed"] = {f"{norm}_{n}": distributed_run(norm, n) for norm, n in cfg["distributed"]}
    print(json.dumps(out))
    """
)


def forward_report(name, shape, outputs, task, lengths=(7, 4)):
    """Shapes, dtypes and finiteness of the logits in inference and training mode; for
    language models (token sequences of each of ``lengths``) also the causality gaps: the
    largest logit change before and from position 3 when the token at 3 is replaced."""
    import keras

    from batchscale.workloads.models import build_model

    model = build_model(name, shape, outputs, task)
    rng = np.random.default_rng(0)
    report = {"passes": []}

    def run(x, training):
        y = model(x, training=training)
        report["passes"].append({"shape": list(y.shape), "dtype": keras.backend.standardize_dtype(y.dtype),
                                 "finite": bool(np.isfinite(np.asarray(y, dtype="float32")).all())})
        return np.asarray(y, dtype="float32")

    if task != "language_model":
        x = rng.normal(size=(2, *shape)).astype("float32")
        run(x, False), run(x, True)
        return report
    for i, length in enumerate(lengths):
        tokens = rng.integers(1, outputs, size=(2, length)).astype("int32")
        tokens[1, length - 2:] = 0  # padding at the end of the second sentence
        logits = run(tokens, False)
        if i == 0:
            run(tokens, True)
            changed = tokens.copy()
            changed[:, 3] = tokens[:, 3] % (outputs - 1) + 1
            gap = np.abs(run(changed, False) - logits)
            report["causal"] = [float(gap[:, :3].max()), float(gap[:, 3:].max())]
    return report


def tf_dynamic_batch_report():
    """TensorFlow graphs may not know the batch size while tracing: ghost BN in a
    tf.function with batch dimension None against eager calls (64 and 8 examples), and
    the error for 24 examples with ghost batch 16."""
    import tensorflow as tf

    from batchscale.workloads.models.ghost_norm import GhostBatchNormalization

    x = np.random.default_rng(0).normal(size=(64, 3, 3, 4)).astype("float32")
    eager, traced = GhostBatchNormalization(16), GhostBatchNormalization(16)
    traced.build(x.shape)
    step = tf.function(lambda t: traced(t, training=True),
                       input_signature=[tf.TensorSpec([None, 3, 3, 4])])
    report = {"max_difference": max(float(np.abs(step(b).numpy() - eager(b, training=True).numpy()).max())
                                    for b in (x, x[:8]))}
    try:
        step(x[:24])
    except tf.errors.InvalidArgumentError as err:
        report["error"] = err.message
    return report


def distributed_run(norm, replicas, steps=3, global_batch=128):
    """Train a conv + norm + dense model for ``steps`` steps of ``global_batch`` over
    ``replicas`` CPU devices (JAX DataParallel or tf.distribute.MirroredStrategy) from
    fixed initial weights; returns the loss, every weight (moving statistics included)
    and what shows the work was really split."""
    import keras
    from keras import layers

    from batchscale.workloads.models.ghost_norm import GhostBatchNormalization

    jax_backend = keras.backend.backend() == "jax"
    seen = []  # JAX: how the normalisation's input is sharded inside the compiled train step

    class ShardingSeen(layers.Layer):
        def call(self, t):
            import jax

            jax.debug.inspect_array_sharding(
                t, callback=lambda s: seen.append([len(s.device_set), list(getattr(s, "spec", ()))]))
            return t

    def make():
        inputs = keras.Input((6, 6, 3))
        x = layers.Conv2D(8, 3, padding="same", name="conv")(inputs)
        x = ShardingSeen()(x) if jax_backend else x
        x = (GhostBatchNormalization(32, momentum=0.9, name="norm") if norm == "ghost"
             else layers.BatchNormalization(momentum=0.9, name="norm"))(x)
        x = layers.GlobalAveragePooling2D()(layers.ReLU()(x))
        return keras.Model(inputs, layers.Dense(5, name="logits")(x))

    keras.utils.set_random_seed(0)
    initial = make().get_weights()

    rng = np.random.default_rng(0)
    # Each ghost batch of 32 gets its own scale, so ghost and whole-batch statistics differ.
    scale = 1.0 + np.arange(steps * global_batch)[:, None, None, None] % global_batch // 32
    x = (rng.normal(size=(steps * global_batch, 6, 6, 3)) * scale).astype("float32")
    y = keras.utils.to_categorical(rng.integers(0, 5, steps * global_batch), 5)
    info = {}
    if jax_backend:
        distribution = keras.distribution.DataParallel(
            devices=keras.distribution.list_devices("cpu")[:replicas])
        scope = distribution.scope()
        info["data_axes"] = list(distribution.get_data_layout(x.shape).axes)
    else:
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])
        scope = strategy.scope()
        info["replicas_in_sync"] = strategy.num_replicas_in_sync
    with scope:
        model = make()
        model.set_weights(initial)
        model.compile(keras.optimizers.SGD(0.1, momentum=0.9),
                      keras.losses.CategoricalCrossentropy(from_logits=True))
        history = model.fit(x, y, batch_size=global_batch, epochs=1, shuffle=False, verbose=0)
    if jax_backend:
        info["weight_devices"] = len(model.weights[0].value.sharding.device_set)
        info["norm_input_sharding"] = seen[-1]
    return {"loss": history.history["loss"][-1], "info": info,
            "weights": {w.path: keras.ops.convert_to_numpy(w).tolist() for w in model.weights}}


def run_probe(backend, cfg):
    """Run SCRIPT with ``cfg`` on ``backend`` with 4 logical CPU devices; its JSON report."""
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3",
               **host_devices_env(4))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(cfg)], check=False, cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["backend"] == backend
    return out


@pytest.fixture(scope="module")
def tf_probe():
    """TensorFlow backend: every model's parameter count and forward pass (LMs: causality),
    and ghost vs plain batch norm over 1 and 4 MirroredStrategy replicas."""
    return run_probe("tensorflow", {
        "counts": {name: case[:3] for name, case in PARAMETER_COUNTS.items()},
        "forward": {name: tiny_case(name) for name in IMAGE_MODELS + LM_MODELS},
        "distributed": [["ghost", 1], ["ghost", 4], ["plain", 1], ["plain", 4]]})


@pytest.fixture(scope="module")
def jax_probe():
    """JAX backend: ghost BN over 1 and 4 DataParallel devices, plain BN over 4."""
    return run_probe("jax", {"counts": {}, "forward": {},
                             "distributed": [["ghost", 1], ["ghost", 4], ["plain", 4]]})



# --- architectures -----------------------------------------------------------------------------


def test_hand_formulas_give_the_published_totals():
    assert PARAMETER_COUNTS["vgg_11"][3] == 132_863_336
    assert PARAMETER_COUNTS["resnet_50"][3] == 25_594_792  # ~25.6M, see PARAMETER_COUNTS
    assert abs(PARAMETER_COUNTS["resnet_50"][3] / 25.6e6 - 1) < 0.001


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PARAMETER_COUNTS))
def test_parameter_counts_match_the_formulas(tf_probe, name):
    assert tf_probe["counts"][name] == PARAMETER_COUNTS[name][3]


def check_forward(report, name, lengths=(7, 4)):
    shape, outputs, task = tiny_case(name)
    if task == "language_model":
        expected = [[2, lengths[0], outputs]] * 3 + [[2, length, outputs] for length in lengths[1:]]
        before, after = report["causal"]
        assert before < 1e-6 and after > 1e-3  # position t sees tokens <= t only
    else:
        expected = [[2, outputs]] * 2
    assert [r["shape"] for r in report["passes"]] == expected
    assert all(r["dtype"] == "float32" and r["finite"] for r in report["passes"])


@pytest.mark.slow
@pytest.mark.parametrize("name", IMAGE_MODELS + LM_MODELS)
def test_tensorflow_forward_gives_float32_logits_under_mixed_precision(tf_probe, name):
    check_forward(tf_probe["forward"][name], name)


# --- ghost batch normalisation -----------------------------------------------------------------


@pytest.mark.slow
def test_ghost_batch_norm_with_an_unknown_batch_size_in_tensorflow_graphs(tf_probe):
    report = tf_probe["dynamic_batch"]
    assert report["max_difference"] < 1e-5
    assert "not a multiple of the ghost batch size" in report["error"]


def _max_difference(a, b):
    assert a.keys() == b.keys()
    return max(float(np.abs(np.subtract(a[k], b[k])).max()) for k in a)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
def test_ghost_batch_norm_same_result_for_one_and_several_replicas(request, backend):
    """Acceptance: one replica and four (logical CPU devices) over the same global batch of
    128, ghost batch 32, three training steps: same loss, weights and moving statistics."""
    runs = request.getfixturevalue("jax_probe" if backend == "jax" else "tf_probe")["distributed"]
    one, four = runs["ghost_1"], runs["ghost_4"]
    assert four["loss"] == pytest.approx(one["loss"], rel=1e-6)
    assert _max_difference(one["weights"], four["weights"]) < 1e-5
    assert any("moving_mean" in path for path in one["weights"])
    if backend == "jax":  # the batch really was sharded over four devices
        assert four["info"] == {"data_axes": ["batch", None, None, None], "weight_devices": 4,
                                "norm_input_sharding": [4, ["batch"]]}
        assert one["info"]["weight_devices"] == 1 and one["info"]["norm_input_sharding"][0] == 1
        # the layer sees the global batch: ghost groups make a difference against plain BN
        assert _max_difference(one["weights"], runs["plain_4"]["weights"]) > 1e-3
    else:  # MirroredStrategy: plain BN normalises per replica, so it changes with the count
        assert four["info"]["replicas_in_sync"] == 4
        assert _max_difference(runs["plain_1"]["weights"], runs["plain_4"]["weights"]) > 1e-3
