"""VGG-11: Simonyan and Zisserman 2014, configuration "A" (Appendix B).

Eight 3x3 "same" ReLU convolutions (64, M, 128, M, 256, 256, M, 512, 512, M, 512, 512,
M; M = 2x2 max pooling with stride 2), then fully connected layers of 4,096 and 4,096
ReLU units with dropout 0.5 (as in the original), then the float32 logits layer. No
batch normalisation (the paper's point: VGG-11 has neither BN nor residual links).
132,863,336 parameters at 224x224x3 with 1,000 classes. Pooling uses "same" padding
so that small inputs (28x28, 32x32) still build: the first FC layer simply takes the
flattened map of whatever spatial size results (7x7 at 224, 1x1 at 32).
"""

from __future__ import annotations

VGG_11_CONV = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")
VGG_FC = (4096, 4096)
VGG_DROPOUT = 0.5


def build(name: str, input_shape, num_outputs: int):
    """vgg_11: float images of ``input_shape`` to ``num_outputs`` logits."""
    import keras
    from keras import layers

    from batchscale.workloads.models.dense import logits_layer

    inputs = keras.Input(shape=tuple(input_shape))
    x = inputs
    for item in VGG_11_CONV:
        if item == "M":
            x = layers.MaxPooling2D(2, strides=2, padding="same")(x)
        else:
            x = layers.Conv2D(item, 3, padding="same", activation="relu")(x)
    x = layers.Flatten()(x)
    for units in VGG_FC:
        x = layers.Dense(units, activation="relu")(x)
        x = layers.Dropout(VGG_DROPOUT)(x)
    return keras.Model(inputs, logits_layer(num_outputs)(x), name=name)
