"""The model registry, Appendix B's architectures built small, and ghost batch normalisation.

In-process, on JAX (tests/conftest.py), small models only: eager JAX on CPU compiles
every new op shape. Every model at paper scale, both Keras backends and ghost BN over
several replicas are in tests/integration/test_models_backends.py (subprocesses, about
a minute); forward passes and published sizes on JAX in tests/integration/test_models_jax.py.
"""

import numpy as np
import pytest

from batchscale.workloads import MODEL_FAMILIES as REEXPORTED_FAMILIES
from batchscale.workloads.models import MODEL_FAMILIES, TASKS, check_model_name, model_tasks

IMAGE_MODELS = ("fc_32_16", "simple_cnn_base", "simple_cnn_narrow", "simple_cnn_wide",
                "resnet_8", "resnet_50", "vgg_11")
LM_MODELS = ("transformer_base", "transformer_shallow", "transformer_narrow_and_shallow",
             "transformer_wide", "lstm")


# --- the registry: names, tasks, errors ---------------------------------------------------


def test_registry_names_and_tasks():
    assert TASKS == ("classification", "multilabel", "regression", "language_model")
    assert REEXPORTED_FAMILIES is MODEL_FAMILIES
    for name in IMAGE_MODELS + ("fc_1024", "fc_128_128_128"):
        check_model_name(name)
        check_model_name(name, "multilabel")
        assert model_tasks(name) == ("classification", "multilabel")
    for name in LM_MODELS:
        check_model_name(name, "language_model")
        assert model_tasks(name) == ("language_model",)
    assert set(MODEL_FAMILIES[1:]) == set(IMAGE_MODELS[1:] + LM_MODELS)


def test_errors_name_what_is_allowed_in_one_line():
    with pytest.raises(ValueError, match=r"unknown model 'resnet_9'; allowed: fc_<N1>.*vgg_11.*lstm") as err:
        check_model_name("resnet_9")
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=r"'lstm' does not serve task 'classification'") as err:
        check_model_name("lstm", "classification")
    allowed = str(err.value).split("allowed for classification: ")[1]
    assert "resnet_50" in allowed and "transformer" not in allowed
    with pytest.raises(ValueError, match=r"for task 'language_model'; allowed: transformer_base, "):
        check_model_name("fc_", "language_model")
    with pytest.raises(ValueError, match="unknown task 'ranking'"):
        check_model_name("vgg_11", "ranking")
    with pytest.raises(ValueError, match=r"'vgg_11' does not serve task 'regression' .*allowed for "
                       r"regression: none of the registry's; name your own model function, "
                       r"'module:function' or 'path/to/file.py:function'$"):
        check_model_name("vgg_11", "regression")
    with pytest.raises(ValueError, match="unknown model"):
        model_tasks("resnet")


# --- architectures -----------------------------------------------------------------------------


def test_build_model_keeps_the_positional_call_and_checks_inputs():
    from batchscale.workloads.models import build_model

    model = build_model("fc_8", (4, 4, 1), 3)  # build_model(name, image_shape, num_classes)
    # dense 16 -> 8 and 8 -> 3, with biases
    assert model.output_shape == (None, 3) and model.count_params() == (16 * 8 + 8) + (8 * 3 + 3)
    with pytest.raises(ValueError, match="image shape"):
        build_model("resnet_8", (32, 32), 10)
    with pytest.raises(ValueError, match="does not serve task"):
        build_model("resnet_8", (32, 32, 3), 10, task="language_model")
    with pytest.raises(ValueError, match=r"shape \(time,\)"):
        build_model("lstm", (8, 8), 10, task="language_model")


# --- ghost batch normalisation -----------------------------------------------------------------


def test_ghost_batch_norm_uses_per_ghost_batch_statistics():
    from batchscale.workloads.models.ghost_norm import GhostBatchNormalization

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 3, 3, 4)) * np.repeat([1.0, 2.0, 3.0, 4.0], 16)[:, None, None, None]
    x = (x + np.repeat([0.0, 1.0, -2.0, 5.0], 16)[:, None, None, None]).astype("float32")
    layer = GhostBatchNormalization(16, momentum=0.75, epsilon=1e-3)
    y = np.asarray(layer(x, training=True))

    groups = x.astype("float64").reshape(4, 16, 3, 3, 4)
    mean = groups.mean(axis=(1, 2, 3), keepdims=True)
    var = groups.var(axis=(1, 2, 3), keepdims=True)
    expected = ((groups - mean) / np.sqrt(var + 1e-3)).reshape(x.shape)
    np.testing.assert_allclose(y, expected, atol=1e-5)
    whole = (x - x.mean(axis=(0, 1, 2))) / np.sqrt(x.var(axis=(0, 1, 2)) + 1e-3)
    assert np.abs(y - whole).max() > 0.5  # not plain batch statistics
    # moving averages: one update from the mean ghost statistics (initial 0 and 1)
    np.testing.assert_allclose(layer.moving_mean.numpy(), 0.25 * mean.mean(axis=0).ravel(), atol=1e-6)
    np.testing.assert_allclose(layer.moving_variance.numpy(), 0.75 + 0.25 * var.mean(axis=0).ravel(),
                               rtol=1e-6)
    inference = (x - layer.moving_mean.numpy()) / np.sqrt(layer.moving_variance.numpy() + 1e-3)
    np.testing.assert_allclose(np.asarray(layer(x, training=False)), inference, atol=1e-5)

    small = x[:8]  # a batch below the ghost batch size is one ghost batch
    expected = (small - small.mean(axis=(0, 1, 2))) / np.sqrt(small.var(axis=(0, 1, 2)) + 1e-3)
    np.testing.assert_allclose(np.asarray(layer(small, training=True)), expected, atol=1e-5)
    with pytest.raises(ValueError, match="batch of 24 examples is not a multiple of the ghost batch size 16"):
        layer(x[:24], training=True)


