"""Scrambled, shifted Halton points in the unit cube, deterministic from a seed.

As in the tuning playbook and AlgoPerf: dimension d uses the d-th prime as its base,
a seeded random permutation of that base's digits (the same at every digit position)
and a seeded random shift modulo 1; the first ``skip`` indices are dropped. Point n is
a pure function of (n, dimension, seed), so a study that asks for more trials later
gets the same first points again.
"""

from __future__ import annotations

import math

import numpy as np

DEFAULT_SKIP = 100
_INDEX_DIGITS_BITS = 48  # digits kept per base: enough for indices up to 2**48


def primes(count: int) -> list[int]:
    found: list[int] = []
    candidate = 2
    while len(found) < count:
        if all(candidate % p for p in found if p * p <= candidate):
            found.append(candidate)
        candidate += 1
    return found


def _scrambled_radical_inverse(n: int, base: int, perm: np.ndarray) -> float:
    digits = math.ceil(_INDEX_DIGITS_BITS * math.log(2) / math.log(base))
    value, scale = 0.0, 1.0 / base
    for _ in range(digits):
        n, digit = divmod(n, base)
        value += perm[digit] * scale
        scale /= base
    return value


def halton_points(count: int, dimension: int, seed: int, skip: int = DEFAULT_SKIP) -> np.ndarray:
    """``count`` points of shape (count, dimension) in [0, 1)."""
    rng = np.random.default_rng([seed, dimension])
    bases = primes(dimension)
    perms = [rng.permutation(base) for base in bases]
    shifts = rng.random(dimension)
    points = np.empty((count, dimension))
    for i in range(count):
        for d, base in enumerate(bases):
            u = _scrambled_radical_inverse(skip + i, base, perms[d]) + shifts[d]
            points[i, d] = u - math.floor(u)
    return points
