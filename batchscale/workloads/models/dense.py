"""Appendix B's small image models: Fully Connected (fc_<N1>_..._<Nk>) and Simple CNN.

Fully Connected: ReLU hidden layers of N1..Nk units, each followed by dropout 0.4.
Simple CNN: two 5x5 "same" ReLU convolutions (stride 1), each followed by 2x2 max
pooling with stride 2, then one ReLU fully connected layer with dropout 0.4; sizes
base 32/64/1024, narrow 16/32/512, wide 64/128/2048.

Also home of ``logits_layer``, the output layer every image model shares: a Dense
layer computed in float32 whatever the global dtype policy, so logits (and the loss
on them) stay float32 under mixed precision.
"""

from __future__ import annotations

SIMPLE_CNN_SIZES = {  # conv1 filters, conv2 filters, dense units (Appendix B)
    "base": (32, 64, 1024),
    "narrow": (16, 32, 512),
    "wide": (64, 128, 2048),
}
DROPOUT = 0.4


def logits_layer(units: int, use_bias: bool = True, name: str = "logits"):
    """The output layer: Dense to ``units`` logits, float32 under any dtype policy."""
    from keras import layers

    return layers.Dense(units, use_bias=use_bias, dtype="float32", name=name)


def build(name: str, input_shape, num_outputs: int):
    """fc_* or simple_cnn_*: float images of ``input_shape`` to ``num_outputs`` logits."""
    import keras
    from keras import layers

    inputs = keras.Input(shape=tuple(input_shape))
    if name.startswith("fc_"):
        x = layers.Flatten()(inputs)
        for width in name.split("_")[1:]:
            x = layers.Dense(int(width), activation="relu")(x)
            x = layers.Dropout(DROPOUT)(x)
    else:
        filters1, filters2, units = SIMPLE_CNN_SIZES[name.removeprefix("simple_cnn_")]
        x = inputs
        for filters in (filters1, filters2):
            x = layers.Conv2D(filters, 5, strides=1, padding="same", activation="relu")(x)
            x = layers.MaxPooling2D(pool_size=2, strides=2, padding="same")(x)
        x = layers.Flatten()(x)
        x = layers.Dense(units, activation="relu")(x)
        x = layers.Dropout(DROPOUT)(x)
    outputs = logits_layer(num_outputs)(x)
    return keras.Model(inputs, outputs, name=name)
