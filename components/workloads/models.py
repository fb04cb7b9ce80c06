"""Models of the paper's Appendix B, named as in its released database.

Names: ``fc_<N1>_..._<Nk>`` (the paper's FC-N1-...-Nk: ReLU hidden layers, dropout 0.4)
and ``simple_cnn_base`` / ``simple_cnn_narrow`` / ``simple_cnn_wide``. Keras is imported
inside ``build_model`` only, so name checks cost nothing.
"""

from __future__ import annotations

import re

SIMPLE_CNN_SIZES = {  # conv1 filters, conv2 filters, dense units (Appendix B)
    "base": (32, 64, 1024),
    "narrow": (16, 32, 512),
    "wide": (64, 128, 2048),
}
MODEL_FAMILIES = (
    "fc_<N1>_..._<Nk> (fully connected, e.g. fc_128_128)",
    "simple_cnn_base",
    "simple_cnn_narrow",
    "simple_cnn_wide",
)
_FC = re.compile(r"^fc(_[1-9][0-9]{0,5})+$")
DROPOUT = 0.4


def check_model_name(name: str) -> None:
    """Raise ValueError naming the allowed models unless ``name`` is one of them."""
    if _FC.match(name) or name.removeprefix("simple_cnn_") in SIMPLE_CNN_SIZES:
        return
    raise ValueError(f"unknown model {name!r}; allowed: {', '.join(MODEL_FAMILIES)}")


def build_model(name: str, image_shape, num_classes: int):
    """A Keras model mapping float images to logits (softmax lives in the loss)."""
    check_model_name(name)
    import keras
    from keras import layers

    inputs = keras.Input(shape=tuple(image_shape))
    if name.startswith("fc"):
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
    outputs = layers.Dense(num_classes)(x)
    return keras.Model(inputs, outputs, name=name)
