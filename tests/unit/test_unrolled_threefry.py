"""unrolled_threefry: the same random bits as JAX's CPU lowering, without its loop, and
only for the compilations made inside the block."""

from __future__ import annotations

import numpy as np

from batchscale.training.unrolled_threefry import unrolled_threefry


def dropout_masks(key):
    """What Keras' dropout draws on the JAX backend: Bernoulli masks from a raw key."""
    import jax

    first, second = jax.random.split(key)
    return (jax.random.bernoulli(first, 0.6, (32, 128)),
            jax.random.uniform(second, (7, 3)))


def compiled(key):
    """A fresh function each time: JAX caches a jitted function's lowering."""
    import jax

    return jax.jit(lambda key: dropout_masks(key)).lower(key).compile()


def test_same_bits_without_the_loop_and_only_inside_the_block():
    import jax

    key = jax.random.PRNGKey(1234)
    rolled = compiled(key)
    with unrolled_threefry():
        unrolled = compiled(key)
    after = compiled(key)

    assert " while(" in rolled.as_text()  # JAX's CPU rule: a 5-iteration loop
    assert " while(" not in unrolled.as_text()
    assert " while(" in after.as_text()  # JAX's own rule is back
    for a, b in zip(rolled(key), unrolled(key)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
