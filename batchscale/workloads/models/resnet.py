"""ResNet-8 (CIFAR-10, no normalisation) and ResNet-50 (ImageNet, ghost batch norm).

Both use the "improved" pre-activation residual unit of He et al. 2016b (identity
mappings): each unit computes ``shortcut(x) + F(x)`` where F starts with the
activation (and normalisation) instead of ending with it, and the network ends with a
last activation before global average pooling and the float32 logits layer.

ResNet-8 (Appendix B): He et al. 2016a section 4.2 with n=1: a 3x3 convolution with
16 filters, then three stages of one two-convolution unit each (16, 32, 64 filters,
strides 1, 2, 2): 7 convolutions on the main path plus the FC layer. Batch
normalisation removed (as Masters and Luschi 2018), so convolutions carry biases.
Where a stage changes the shape the shortcut is a strided 1x1 convolution of the
pre-activated input (He 2016b / the TensorFlow reference ResNet), identity elsewhere.

ResNet-50 (Appendix B): He et al. 2016a section 4.1: 7x7/2 convolution with 64
filters, 3x3/2 max pooling, four stages of 3, 4, 6, 3 bottleneck units (1x1, 3x3,
1x1 convolutions; 64/128/256/512 filters, 4x wider outputs), with pre-activation
units and ghost batch normalisation (ghost batch 32) in place of batch norm. The
stride of a downsampling unit sits on its 3x3 convolution and the first unit of each
stage has a 1x1 projection shortcut, as in the TensorFlow reference implementation
("v1.5" placement; no effect on the parameter count). Convolutions have no bias (every
one is followed, after the residual sum at worst, by a normalisation with its own
offset). 25,594,792 parameters at 1,000 classes (moving statistics included).
"""

from __future__ import annotations

RESNET_50_STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # filters, units, stride
RESNET_8_STAGES = ((16, 1), (32, 2), (64, 2))  # filters, stride; one unit each (n=1)


def _conv(filters: int, kernel: int, stride: int = 1, use_bias: bool = False, name=None):
    """A "same" convolution with He et al.'s (2015) N(0, 2/fan_in) initialisation."""
    from keras import initializers, layers

    he = initializers.VarianceScaling(2.0, mode="fan_in", distribution="untruncated_normal")
    return layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=use_bias,
                         kernel_initializer=he, name=name)


def build_resnet_8(input_shape, num_outputs: int):
    """CIFAR ResNet-8 with pre-activation units and no batch normalisation."""
    import keras
    from keras import layers

    from batchscale.workloads.models.dense import logits_layer

    inputs = keras.Input(shape=tuple(input_shape))
    x = _conv(16, 3, use_bias=True, name="conv1")(inputs)
    for stage, (filters, stride) in enumerate(RESNET_8_STAGES, start=1):
        preact = layers.ReLU(name=f"stage{stage}_preact")(x)
        if stride != 1 or x.shape[-1] != filters:
            shortcut = _conv(filters, 1, stride, use_bias=True, name=f"stage{stage}_shortcut")(preact)
        else:
            shortcut = x
        h = _conv(filters, 3, stride, use_bias=True, name=f"stage{stage}_conv1")(preact)
        h = layers.ReLU()(h)
        h = _conv(filters, 3, use_bias=True, name=f"stage{stage}_conv2")(h)
        x = layers.Add(name=f"stage{stage}_add")([shortcut, h])
    x = layers.ReLU(name="post_relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, logits_layer(num_outputs)(x), name="resnet_8")


def build_resnet_50(input_shape, num_outputs: int, ghost_batch_size: int = 32):
    """ImageNet ResNet-50 with pre-activation bottleneck units and ghost batch norm."""
    import keras
    from keras import layers

    from batchscale.workloads.models.dense import logits_layer
    from batchscale.workloads.models.ghost_norm import GhostBatchNormalization

    def norm_relu(t, name):
        t = GhostBatchNormalization(ghost_batch_size, name=f"{name}_gbn")(t)
        return layers.ReLU(name=f"{name}_relu")(t)

    inputs = keras.Input(shape=tuple(input_shape))
    x = _conv(64, 7, 2, name="conv1")(inputs)
    x = layers.MaxPooling2D(3, strides=2, padding="same", name="pool1")(x)
    for stage, (filters, units, stage_stride) in enumerate(RESNET_50_STAGES, start=1):
        for unit in range(units):
            name = f"stage{stage}_unit{unit + 1}"
            stride = stage_stride if unit == 0 else 1
            preact = norm_relu(x, f"{name}_preact")
            shortcut = _conv(4 * filters, 1, stride, name=f"{name}_shortcut")(preact) if unit == 0 else x
            h = _conv(filters, 1, name=f"{name}_conv1")(preact)
            h = _conv(filters, 3, stride, name=f"{name}_conv2")(norm_relu(h, f"{name}_conv1"))
            h = _conv(4 * filters, 1, name=f"{name}_conv3")(norm_relu(h, f"{name}_conv2"))
            x = layers.Add(name=f"{name}_add")([shortcut, h])
    x = norm_relu(x, "post")
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, logits_layer(num_outputs)(x), name="resnet_50")


def build(name: str, input_shape, num_outputs: int, ghost_batch_size: int = 32):
    """resnet_8 or resnet_50 (``ghost_batch_size`` only matters for resnet_50)."""
    if name == "resnet_8":
        return build_resnet_8(input_shape, num_outputs)
    return build_resnet_50(input_shape, num_outputs, ghost_batch_size)
