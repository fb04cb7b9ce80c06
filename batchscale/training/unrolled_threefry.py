"""Threefry without a loop on a CPU: the same random bits, a faster training step.

Keras draws dropout masks from JAX's threefry2x32 hash. On a CPU, JAX lowers that hash
as a 5-iteration ``while`` loop (to keep compile times short); inside ``PackStep``'s
compiled training loop this is a nested loop per dropout layer per step. Every other
platform gets the unrolled form, which computes exactly the same bits.

``unrolled_threefry()`` lowers threefry unrolled on the CPU for the compilations made
inside it and restores JAX's own rule afterwards, so nothing else in the process (a
``model.fit`` next to it, say) changes. It reaches into JAX internals
(``jax._src.random.threefry2x32``); where a JAX version lacks them it does nothing and
training is merely slower. Measured (benchmarks/pack_throughput.py, 2026-11-23, 2-core
CPU): fc_128_128 (two dropout layers) trains 1.1x (batch 8) to 1.2x (batch 32) faster
with bit-identical parameters.
"""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def unrolled_threefry():
    """Within the block, compile threefry2x32 unrolled on the CPU (same bits, no loop)."""
    try:
        from jax._src.interpreters import mlir
        from jax._src.random import threefry2x32 as threefry

        primitive = threefry.threefry2x32_p
        unrolled = threefry._threefry2x32_lowering_rule
        rolled = threefry._threefry2x32_cpu_lowering_rule
    except (ImportError, AttributeError):  # another JAX: keep its own lowering
        yield
        return
    mlir.register_lowering(primitive, unrolled, platform="cpu")
    try:
        yield
    finally:
        mlir.register_lowering(primitive, rolled, platform="cpu")
