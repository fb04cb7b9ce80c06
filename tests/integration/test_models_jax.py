"""Appendix B's models built and run in-process on JAX (the tests' Keras backend).

Eager JAX on CPU compiles every new op shape, so each of these costs seconds: the
published parameter counts of the small image models, and float32 logits under mixed
precision for one model per code path. Every model on both backends, in subprocesses,
is in tests/integration/test_models_backends.py; the quick checks in tests/unit/test_models.py.
"""

import pytest

from tests.integration.test_models_backends import check_forward, forward_report, tiny_case


@pytest.fixture
def mixed_precision():
    import keras

    keras.config.set_dtype_policy("mixed_bfloat16")
    yield
    keras.config.set_dtype_policy("float32")


@pytest.mark.parametrize(("name", "lengths"), [
    ("resnet_8", ()), ("transformer_narrow_and_shallow", (8, 4)), ("lstm", (8,))])
def test_jax_forward_gives_float32_logits_under_mixed_precision(mixed_precision, name, lengths):
    """One model per code path on JAX (test_models_backends.py covers every model on TF): eager JAX
    compiles every new op shape, so ResNet-50 or VGG-11 would cost tens of seconds here."""
    check_forward(forward_report(name, *tiny_case(name), lengths=lengths), name, lengths)


@pytest.mark.parametrize("name,expected", [
    # 784*128+128 + 128*128+128 + 128*10+10
    ("fc_128_128", 118_282),
    # conv 5x5x1x32+32, conv 5x5x32x64+64, dense 7*7*64*1024+1024, out 1024*10+10 (Appendix B)
    ("simple_cnn_base", 832 + 51_264 + 3_212_288 + 10_250),
    # narrow: 16 and 32 filters, 512 units
    ("simple_cnn_narrow", 416 + 12_832 + 7 * 7 * 32 * 512 + 512 + 5_130),
])
def test_models_have_the_published_architecture(name, expected):
    from batchscale.workloads import build_model

    model = build_model(name, (28, 28, 1), 10)
    assert model.count_params() == expected
    dropout = [layer for layer in model.layers if layer.__class__.__name__ == "Dropout"]
    assert dropout and all(layer.rate == 0.4 for layer in dropout)
