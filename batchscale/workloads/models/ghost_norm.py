"""Ghost batch normalisation (Hoffer et al. 2017), as the paper's ResNet-50 uses it.

Why: with plain batch normalisation the training objective changes with the batch
size (statistics over 64 examples are not statistics over 65,536), and with data
parallelism it would also change with the number of replicas the batch is split over.
The paper (Appendix B) normalises over fixed "ghost batches" of 32 consecutive
examples instead, so the objective is the same at every batch size and device count.

Rule: training-mode statistics are computed independently for each group of
``g = min(ghost_batch_size, batch)`` consecutive examples; the batch must be a multiple
of ``g``: a ValueError when the batch size is known while tracing (always so on JAX),
an InvalidArgumentError saying so when a TensorFlow graph with an unknown batch size
runs. The moving averages are updated once per step from the mean of the ghost means
and the mean of the ghost variances (what ``tf.keras`` BatchNormalization(
virtual_batch_size=...) did: the moving statistics only serve inference, so one update
per step instead of one per ghost batch is enough).
Inference uses the moving averages. Channels-last only (the reduction is over all
axes but the last). Statistics are computed in float32 whatever the dtype policy.

Replica invariance: under Keras' JAX ``DataParallel`` the layer sees the global batch
(sharded along the batch axis), so the ghost groups are the same for any device count
(where a ghost batch spans devices, XLA adds the cross-device sums; same result).
Under ``tf.distribute.MirroredStrategy`` each replica sees its own slice; the groups
are the same as long as the per-replica batch is a multiple of the ghost batch size.
The moving statistics are declared ``aggregation="mean"`` so that MirroredStrategy
averages the replicas' updates (equal ghost counts per replica: the same value as one
replica computing all ghost batches).

Keras is imported at module level: this module is only imported lazily by
``build_model`` (or directly by code that has already chosen a backend).
"""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="batchscale")
class GhostBatchNormalization(keras.layers.Layer):
    """Batch normalisation over consecutive ghost batches of ``ghost_batch_size`` examples.

    Defaults (momentum 0.997, epsilon 1e-5) are those of the TensorFlow reference
    ResNet implementation of the time (tensorflow/models official/resnet).
    """

    def __init__(self, ghost_batch_size: int = 32, momentum: float = 0.997,
                 epsilon: float = 1e-5, **kwargs):
        super().__init__(**kwargs)
        if int(ghost_batch_size) != ghost_batch_size or ghost_batch_size < 1:
            raise ValueError(f"ghost_batch_size must be a positive integer, got {ghost_batch_size!r}")
        self.ghost_batch_size = int(ghost_batch_size)
        self.momentum = float(momentum)
        self.epsilon = float(epsilon)

    def build(self, input_shape):
        channels = input_shape[-1]
        if channels is None:
            raise ValueError("GhostBatchNormalization needs a known channel (last) dimension")
        shape = (channels,)

        def weight(name, initializer, trainable):
            return self.add_weight(shape=shape, name=name, initializer=initializer,
                                   trainable=trainable, autocast=False,
                                   aggregation="none" if trainable else "mean")

        self.gamma = weight("gamma", "ones", True)
        self.beta = weight("beta", "zeros", True)
        self.moving_mean = weight("moving_mean", "zeros", False)
        self.moving_variance = weight("moving_variance", "ones", False)

    def ghost_size(self, batch: int) -> int:
        """The ghost batch size used for a (static) batch of ``batch`` examples."""
        ghost = min(self.ghost_batch_size, batch)
        if batch % ghost:
            raise ValueError(
                f"GhostBatchNormalization: batch of {batch} examples is not a multiple of the "
                f"ghost batch size {ghost}; use a batch size that is a multiple of {ghost} "
                "(per replica under tf.distribute)")
        return ghost

    def call(self, inputs, training=None):
        x = ops.cast(inputs, "float32")
        gamma = ops.cast(self.gamma, "float32")
        beta = ops.cast(self.beta, "float32")
        if training and self.trainable:  # a frozen layer normalises as in inference (as Keras BN)
            shape = ops.shape(x)
            batch = shape[0]
            if isinstance(batch, int):
                ghost = self.ghost_size(batch)
            else:  # unknown while tracing: only TensorFlow graphs; checked when they run
                ghost = ops.minimum(batch, self.ghost_batch_size)
                if keras.backend.backend() == "tensorflow":
                    import tensorflow as tf

                    check = tf.debugging.assert_equal(
                        batch % ghost, 0, message="GhostBatchNormalization: the batch (per replica "
                        "under tf.distribute) is not a multiple of the ghost batch size")
                    # the reshape below must not run (and fail with its own message) first
                    with tf.control_dependencies([check]):
                        x = tf.identity(x)
            grouped = ops.reshape(x, (-1, ghost, *shape[1:]))
            axes = tuple(range(1, len(grouped.shape) - 1))  # ghost examples and spatial axes
            mean = ops.mean(grouped, axis=axes, keepdims=True)
            variance = ops.mean(ops.square(grouped - mean), axis=axes, keepdims=True)
            normed = (grouped - mean) * ops.rsqrt(variance + self.epsilon)
            outputs = ops.reshape(normed, shape) * gamma + beta
            flat = (-1, shape[-1])
            step_mean = ops.mean(ops.reshape(mean, flat), axis=0)
            step_variance = ops.mean(ops.reshape(variance, flat), axis=0)
            decay = 1.0 - self.momentum
            self.moving_mean.assign(self.moving_mean + decay * (step_mean - self.moving_mean))
            self.moving_variance.assign(
                self.moving_variance + decay * (step_variance - self.moving_variance))
        else:
            scale = gamma * ops.rsqrt(ops.cast(self.moving_variance, "float32") + self.epsilon)
            outputs = (x - ops.cast(self.moving_mean, "float32")) * scale + beta
        return ops.cast(outputs, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "ghost_batch_size": self.ghost_batch_size,
                "momentum": self.momentum, "epsilon": self.epsilon}
