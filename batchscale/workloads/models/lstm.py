"""One-layer LSTM language model with a recurrent projection (Appendix B, "LSTM").

A simpler variant of LSTM-2048-512 of Jozefowicz et al. 2016: 1,024-dim token
embeddings, one LSTM layer with 2,048 cell units whose output is projected to 512
dims (LSTMP, Sak et al. 2014: the projection r_t is both the layer's output and the
recurrent input), then a 512 -> vocab output layer WITHOUT bias (the paper found that
better). Keras has no projection LSTM, so ``ProjectedLSTM`` is written here:

    z_t = x_t W + b + r_{t-1} U            W: 1024 x 4*2048, U: 512 x 4*2048, b: 4*2048
    i, f, g, o = sigmoid, sigmoid, tanh, sigmoid of the four slices of z_t
    c_t = f * c_{t-1} + i * g;  h_t = o * tanh(c_t);  r_t = h_t P      P: 2048 x 512

No peepholes, no projection bias (TensorFlow's LSTMCell(num_proj=...) defaults); the
forget-gate bias starts at 1. ``x_t W + b`` is computed for all steps at once before
the scan (one large matmul instead of one per step). Parameters:
V*1024 + (1024 + 512)*4*2048 + 4*2048 + 2048*512 + 512*V. No dropout (the paper
names none for this model). The model is causal by construction; padding id 0 sits
at the end of sentences, so it never reaches a real position, and the loss must
ignore targets 0. The output layer is float32 under any dtype policy.
"""

from __future__ import annotations

import keras
from keras import layers, ops

EMBEDDING_DIM = 1024
LSTM_UNITS = 2048
PROJECTION_DIM = 512


@keras.saving.register_keras_serializable(package="batchscale")
class ProjectedLSTMCell(layers.Layer):
    """The recurrent step of an LSTMP whose input is the precomputed ``x_t W + b``."""

    def __init__(self, units: int, projection_units: int, **kwargs):
        super().__init__(**kwargs)
        self.units = int(units)
        self.projection_units = int(projection_units)
        self.state_size = [self.projection_units, self.units]  # r (projected output), c
        self.output_size = self.projection_units

    def build(self, input_shape):
        self.recurrent_kernel = self.add_weight(
            shape=(self.projection_units, 4 * self.units), name="recurrent_kernel",
            initializer="orthogonal")
        self.projection = self.add_weight(
            shape=(self.units, self.projection_units), name="projection",
            initializer="glorot_uniform")

    def call(self, inputs, states, training=False):
        r, c = states
        z = inputs + ops.matmul(r, self.recurrent_kernel)
        i, f, g, o = ops.split(z, 4, axis=-1)
        c = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(g)
        r = ops.matmul(ops.sigmoid(o) * ops.tanh(c), self.projection)
        return r, [r, c]

    def get_config(self):
        return {**super().get_config(), "units": self.units,
                "projection_units": self.projection_units}


@keras.saving.register_keras_serializable(package="batchscale")
class ProjectedLSTM(layers.Layer):
    """LSTM with a recurrent projection over (batch, time, features); returns all r_t."""

    def __init__(self, units: int, projection_units: int, **kwargs):
        super().__init__(**kwargs)
        self.units = int(units)
        self.projection_units = int(projection_units)
        self.cell = ProjectedLSTMCell(units, projection_units, dtype=self.dtype_policy, name="cell")
        self.rnn = layers.RNN(self.cell, return_sequences=True, dtype=self.dtype_policy, name="rnn")

    def build(self, input_shape):
        features = input_shape[-1]

        def bias_init(shape, dtype=None):  # forget gate (second quarter) starts at 1
            zeros = ops.zeros((self.units,), dtype=dtype)
            return ops.concatenate([zeros, ops.ones((self.units,), dtype=dtype), zeros, zeros])

        self.kernel = self.add_weight(shape=(features, 4 * self.units), name="kernel",
                                      initializer="glorot_uniform")
        self.bias = self.add_weight(shape=(4 * self.units,), name="bias", initializer=bias_init)
        self.rnn.build((input_shape[0], input_shape[1], 4 * self.units))

    def call(self, inputs, training=None):
        gates = ops.matmul(inputs, self.kernel) + self.bias
        return self.rnn(gates, training=training)

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.projection_units)

    def get_config(self):
        return {**super().get_config(), "units": self.units,
                "projection_units": self.projection_units}


def build(name: str, input_shape, num_outputs: int):
    """lstm: int32 token ids (batch, time) to (batch, time, vocab) logits."""
    from batchscale.workloads.models.dense import logits_layer

    tokens = keras.Input(shape=tuple(input_shape), dtype="int32", name="tokens")
    x = layers.Embedding(num_outputs, EMBEDDING_DIM, name="embedding")(tokens)
    x = ProjectedLSTM(LSTM_UNITS, PROJECTION_DIM, name="lstmp")(x)
    logits = logits_layer(num_outputs, use_bias=False)(x)
    return keras.Model(tokens, logits, name=name)
