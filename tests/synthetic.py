"""Synthetic study data with a known answer, for tests of the analysis.

``synthetic_crossings`` draws trial crossings from a known S(B) = S_min (1 + B*/B) in the
format ``regimes.fit_regimes`` takes; ``tests.paper_database.write_synthetic_database`` turns
them into a study on disk. Only tests use them (the package never imports tests/).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def synthetic_crossings(s_min: float, b_star: float, batch_sizes, trials: int, rng: np.random.Generator,
                        spread: float = 0.5, failure: float = 0.5, resolution: float = 0.05) -> pd.DataFrame:
    """Trial crossings with known truth S(B) = s_min * (1 + b_star / B), in fit_regimes' input format.

    Per batch size, ``trials`` trials. A trial's true crossing is S(B) * exp(spread * |z|) with z
    standard normal: near a smooth optimum of two searched metaparameters the density of excess
    steps is flat, as |z|'s is at 0. Each trial independently never reaches with probability
    ``failure`` (step NaN). Evaluations lie on a geometric grid with ratio 1 + ``resolution`` and a
    random per-trial offset; step is the first grid point at or after the true crossing and
    previous_step = step / (1 + resolution).
    """
    rows = []
    ratio = math.log1p(resolution)
    for batch_size in batch_sizes:
        true = math.log(s_min * (1 + b_star / batch_size)) + spread * np.abs(rng.standard_normal(trials))
        offset = rng.random(trials)
        step = np.exp((np.ceil(true / ratio - offset) + offset) * ratio)
        step[rng.random(trials) < failure] = math.nan
        rows.append(pd.DataFrame({"batch_size": int(batch_size), "trial_id": np.arange(trials),
                                  "step": step, "previous_step": step / (1 + resolution)}))
    return pd.concat(rows, ignore_index=True)
