"""Decoder-only Transformer language models (Appendix B; Vaswani et al. 2017 sizes).

The paper applies the Transformer decoder "directly to the sequence of word
embeddings", i.e. an autoregressive LM: logits at position t predict token t+1 and
depend on tokens 0..t only (causal self-attention; no encoder, no cross-attention).

Sizes (d_model, heads, feed-forward, layers): base 512/8/2048/6 (Vaswani's base);
shallow: base with 2 layers; narrow_and_shallow: shallow with half the units, heads
and filter size (256/4/1024/2); wide: base with double those (1024/16/4096/6).

Decisions, documented because the paper does not spell them out. We follow
Tensor2Tensor's ``transformer_base`` hyperparameters (= transformer_base_v2), the
Google Brain implementation of the time and the likely one behind the paper:
- Input embedding and output projection are SHARED (Vaswani 3.4; T2T's
  shared_embedding_and_softmax_weights): one V x d matrix, initialised N(0, 1/d),
  embeddings multiplied by sqrt(d) on the way in, logits = h E^T on the way out, no
  output bias. Parameters: V*d + L*(4d^2 + 4d [attention q,k,v,o with biases]
  + 2*d*ff + ff + d [ReLU FFN] + 4d [two layer norms]) + 2d [final layer norm].
- Pre-layer-norm residual units with a final layer norm (T2T's "n"/"da" processing,
  more stable than Vaswani's post-norm over the wide learning-rate ranges the
  metaparameter search explores). Layer norm epsilon 1e-6.
- Dropout 0.1 on the embeddings and on every sub-layer output before the residual sum
  (Vaswani's P_drop), on the attention probabilities and after the FFN's ReLU (T2T).
- Sinusoidal positions computed on the fly (sin on the first d/2 dims, cos on the
  last d/2 as in T2T, Vaswani's frequencies 10000^(-2i/d)): any eval length works.
- No padding mask: sentences are padded with id 0 at the END, and causal attention
  already keeps padding out of every real position; the loss must ignore targets 0.
Mixed precision: the shared embedding layer runs in float32 both ways, so the logits
are float32 under e.g. mixed_bfloat16; the blocks in between follow the global policy.
"""

from __future__ import annotations

import math

import keras
from keras import layers, ops

TRANSFORMER_SIZES = {  # d_model, heads, feed-forward, layers
    "transformer_base": (512, 8, 2048, 6),
    "transformer_shallow": (512, 8, 2048, 2),
    "transformer_narrow_and_shallow": (256, 4, 1024, 2),
    "transformer_wide": (1024, 16, 4096, 6),
}
DROPOUT = 0.1
LAYER_NORM_EPSILON = 1e-6


@keras.saving.register_keras_serializable(package="batchscale")
class SharedEmbedding(layers.Layer):
    """Token embedding whose transpose is also the output projection.

    ``layer(ids)`` embeds (scaled by sqrt(dim)); ``layer(h, reverse=True)`` returns
    logits ``h @ E^T``. Build it with dtype="float32" for float32 logits.
    """

    def __init__(self, vocab_size: int, dim: int, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = int(vocab_size)
        self.dim = int(dim)

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            shape=(self.vocab_size, self.dim), name="embeddings",
            initializer=keras.initializers.RandomNormal(stddev=self.dim ** -0.5))

    def call(self, inputs, reverse=False):
        if reverse:
            return ops.matmul(inputs, ops.transpose(self.embeddings))
        return ops.take(self.embeddings, ops.cast(inputs, "int32"), axis=0) * math.sqrt(self.dim)

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size, "dim": self.dim}


@keras.saving.register_keras_serializable(package="batchscale")
class SinusoidalPosition(layers.Layer):
    """Adds Vaswani's fixed sinusoidal position signal to (batch, time, dim) inputs."""

    def call(self, inputs):
        dim = inputs.shape[-1]
        half = dim // 2
        inv_freq = ops.convert_to_tensor(
            [10000.0 ** (-2.0 * i / dim) for i in range(half)], dtype="float32")
        ones = ops.ones_like(ops.cast(inputs[..., :1], "float32"))
        positions = ops.cumsum(ones, axis=1) - 1.0  # (batch, time, 1): 0, 1, 2, ...
        angles = positions * inv_freq
        signal = ops.concatenate([ops.sin(angles), ops.cos(angles)], axis=-1)
        if dim % 2:
            signal = ops.pad(signal, [(0, 0), (0, 0), (0, 1)])
        return inputs + ops.cast(signal, inputs.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape


def build(name: str, input_shape, num_outputs: int):
    """transformer_*: int32 token ids (batch, time) to (batch, time, vocab) logits."""
    d_model, heads, ff, depth = TRANSFORMER_SIZES[name]
    tokens = keras.Input(shape=tuple(input_shape), dtype="int32", name="tokens")
    embedding = SharedEmbedding(num_outputs, d_model, dtype="float32", name="shared_embedding")
    x = SinusoidalPosition(name="position")(embedding(tokens))
    x = layers.Dropout(DROPOUT)(x)
    for i in range(depth):
        h = layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name=f"layer{i}_attention_norm")(x)
        h = layers.MultiHeadAttention(heads, d_model // heads, dropout=DROPOUT,
                                      name=f"layer{i}_attention")(h, h, use_causal_mask=True)
        x = layers.Add()([x, layers.Dropout(DROPOUT)(h)])
        h = layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name=f"layer{i}_ffn_norm")(x)
        h = layers.Dense(ff, activation="relu", name=f"layer{i}_ffn_hidden")(h)
        h = layers.Dropout(DROPOUT)(h)
        h = layers.Dense(d_model, name=f"layer{i}_ffn_output")(h)
        x = layers.Add()([x, layers.Dropout(DROPOUT)(h)])
    x = layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name="final_norm")(x)
    logits = embedding(x, reverse=True)
    return keras.Model(tokens, logits, name=name)
