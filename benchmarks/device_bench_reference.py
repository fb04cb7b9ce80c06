"""The device benchmark's speed-of-light reference: FC-128-128 and the Simple CNN written
by hand in pure JAX (no Keras), K trials vmapped inside ``lax.scan`` over steps.

Same architecture as the registry's models (``batchscale.workloads.models.dense``: its
layer sizes and dropout rate are read from there), same loss (softmax cross-entropy on
logits, one-hot targets, the batch's mean), same update (Nesterov momentum, the paper's
rule: ``v <- m v + g; theta <- theta - eta (g + m v)``), dropout drawn from threefry as
Keras draws it, each trial with its own learning rate, momentum and dropout key. Like
``PackStep`` it gathers each step's batch on the device from indices the host sends per
call, drops the trial axis of a pack of one once per call (not per step), donates the
state, and compiles threefry unrolled (``unrolled_threefry``); unlike it, the scan's
length is fixed at compile time and nothing is general (one optimizer, no schedule, no
label smoothing, no L2 penalty, no non-trainable variables).

FLOPs of one trial-step: ``xla_flops`` (XLA's cost analysis of the lowered one-trial step,
forward, backward and update) and ``analytic_flops`` (the multiply-adds of the dense and
convolution layers, x2: forward 2 I O per example, backward 2 I O for the weights' and
2 I O for the inputs' gradients, the first layer's inputs needing none).
"""

from __future__ import annotations

import time

import numpy as np

from batchscale.workloads.models.dense import DROPOUT, SIMPLE_CNN_SIZES


def layer_shapes(model: str, input_shape, num_classes: int) -> list[tuple]:
    """("dense", inputs, outputs) or ("conv", height, width, channels in, out, kernel)
    of each layer with weights, in order."""
    if model.startswith("fc_"):
        sizes = [int(np.prod(input_shape)), *(int(n) for n in model.split("_")[1:]), num_classes]
        return [("dense", a, b) for a, b in zip(sizes, sizes[1:])]
    filters1, filters2, units = SIMPLE_CNN_SIZES[model.removeprefix("simple_cnn_")]
    height, width, channels = input_shape
    out = []
    for filters in (filters1, filters2):
        out.append(("conv", height, width, channels, filters, 5))
        height, width, channels = -(-height // 2), -(-width // 2), filters  # 2x2 pool, "same"
    return out + [("dense", height * width * channels, units), ("dense", units, num_classes)]


def analytic_flops(model: str, input_shape, num_classes: int, batch_size: int) -> float:
    """Training FLOPs of one trial-step at ``batch_size`` (module docstring)."""
    total = 0.0
    for i, shape in enumerate(layer_shapes(model, input_shape, num_classes)):
        macs = (shape[1] * shape[2] if shape[0] == "dense"
                else shape[1] * shape[2] * shape[3] * shape[4] * shape[5] ** 2)
        total += 2 * macs * (2 if i == 0 else 3)
    return total * batch_size


def init_params(model: str, input_shape, num_classes: int, seed: int) -> list:
    """[(kernel, bias)] of every layer, Glorot-uniform kernels and zero biases (Keras')."""
    rng = np.random.default_rng(seed)
    params = []
    for shape in layer_shapes(model, input_shape, num_classes):
        kernel = (shape[1], shape[2]) if shape[0] == "dense" else (shape[5], shape[5], shape[3],
                                                                    shape[4])
        fan_in = int(np.prod(kernel[:-1]))
        fan_out = kernel[-1] * (1 if shape[0] == "dense" else kernel[0] * kernel[1])
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        params.append((rng.uniform(-limit, limit, kernel).astype(np.float32),
                       np.zeros(kernel[-1], np.float32)))
    return params


def _dropout(x, key):
    import jax
    import jax.numpy as jnp

    keep = jax.random.bernoulli(key, 1.0 - DROPOUT, x.shape)
    return jnp.where(keep, x / (1.0 - DROPOUT), 0.0)


def logits(model: str, params: list, x, key):
    """The training forward pass (dropout on) of one trial's batch ``x``."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    *hidden, last = params
    if model.startswith("fc_"):
        x = x.reshape(x.shape[0], -1)
        for i, (w, b) in enumerate(hidden):
            x = _dropout(jax.nn.relu(x @ w + b), jax.random.fold_in(key, i))
    else:
        for w, b in hidden[:2]:
            x = lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
            x = lax.reduce_window(jax.nn.relu(x + b), -jnp.inf, lax.max, (1, 2, 2, 1),
                                  (1, 2, 2, 1), "SAME")
        w, b = hidden[2]
        x = _dropout(jax.nn.relu(x.reshape(x.shape[0], -1) @ w + b), key)
    return x @ last[0] + last[1]


def one_step(model: str, params, velocity, rate, momentum, x, y, key, step):
    """One trial's training step: (new params, new velocity, loss)."""
    import jax
    import jax.numpy as jnp

    def loss_fn(p):
        out = logits(model, p, x, jax.random.fold_in(key, step))
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(out), axis=-1))

    loss, grads = jax.value_and_grad(loss_fn)(params)
    velocity = jax.tree.map(lambda v, g: momentum * v + g, velocity, grads)
    params = jax.tree.map(lambda p, g, v: p - rate * (g + momentum * v), params, grads, velocity)
    return params, velocity, loss


def xla_flops(model: str, input_shape, num_classes: int, batch_size: int) -> float | None:
    """XLA's FLOP count of one lowered (not compiled) trial-step at ``batch_size``."""
    import jax
    import jax.numpy as jnp

    params = jax.tree.map(jnp.asarray, init_params(model, input_shape, num_classes, 0))
    x = jnp.zeros((batch_size, *input_shape), jnp.float32)
    y = jnp.zeros((batch_size, num_classes), jnp.float32)

    def step(p, v, x, y):
        return one_step(model, p, v, 0.01, 0.9, x, y, jax.random.key(0), 0)

    analysis = jax.jit(step).lower(params, params, x, y).cost_analysis()
    analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
    return float(analysis["flops"]) if analysis and "flops" in analysis else None


class Scanned:
    """K trials of the hand-written model, vmapped, ``steps`` steps per call in one
    ``lax.scan``; ``run`` trains ``calls`` calls and waits for the finite flags."""

    def __init__(self, model: str, input_shape, num_classes: int, rates, momenta, seed: int = 0):
        import jax
        import jax.numpy as jnp

        self.model, self.width = model, len(rates)
        one = init_params(model, input_shape, num_classes, seed)
        self.params = [tuple(jnp.asarray(np.stack([a] * self.width)) for a in layer)
                       for layer in one]
        self.velocity = jax.tree.map(jnp.zeros_like, self.params)
        self.hyper = (jnp.asarray(rates, jnp.float32), jnp.asarray(momenta, jnp.float32),
                      jax.random.split(jax.random.key(seed), self.width))
        self.compiled, self.compile_seconds, self.done = None, 0.0, 0

    def _chunk(self, carry, hyper, indices, first_step, x_all, y_all):
        import jax
        import jax.numpy as jnp

        alone = self.width == 1
        if alone:  # a pack of one: no trial axis inside the loop, as PackStep
            carry, hyper = jax.tree.map(lambda a: a[0], (carry, hyper))

        def trial(p, v, rate, momentum, key, idx, step):
            return one_step(self.model, p, v, rate, momentum, x_all[idx], y_all[idx], key, step)

        step_all = trial if alone else jax.vmap(trial, in_axes=(0, 0, 0, 0, 0, 0, None))

        def body(state, inputs):
            params, velocity, finite = state
            step, idx = inputs
            params, velocity, loss = step_all(params, velocity, *hyper, idx[0] if alone else idx,
                                              step)
            return (params, velocity, finite & jnp.isfinite(loss)), None

        steps = jnp.arange(indices.shape[0], dtype=jnp.int32) + first_step
        carry, _ = jax.lax.scan(body, carry, (steps, indices))
        return jax.tree.map(lambda a: a[None], carry) if alone else carry

    def compile(self, batch_size: int, steps: int, x_all, y_all) -> None:
        import jax
        import jax.numpy as jnp

        from batchscale.training.unrolled_threefry import unrolled_threefry

        tick = time.perf_counter()
        indices = jnp.zeros((steps, self.width, batch_size), jnp.int32)
        with unrolled_threefry():
            lowered = jax.jit(self._chunk, donate_argnums=(0,)).lower(
                self._carry(), self.hyper, indices, jnp.int32(0), x_all, y_all)
        self.compiled = lowered.compile()
        self.compile_seconds += time.perf_counter() - tick

    def _carry(self):
        import jax.numpy as jnp

        return self.params, self.velocity, jnp.ones((self.width,), bool)

    def run(self, indices: np.ndarray, x_all, y_all) -> bool:
        """Train the calls of ``indices`` (calls, steps, K, batch); whether every loss was
        finite (fetched at the end, so the device has finished)."""
        import jax.numpy as jnp

        flags = []
        for chunk in indices:  # dispatched without waiting, as PackStep's buffers are
            self.params, self.velocity, finite = self.compiled(
                self._carry(), self.hyper, jnp.asarray(chunk), jnp.int32(self.done), x_all, y_all)
            self.done += len(chunk)
            flags.append(finite)
        return all(bool(np.asarray(f).all()) for f in flags)
