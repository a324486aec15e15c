"""Soft pairwise accuracy (Thompson et al., WMT24), as mt-metrics-eval's ``pce`` module defines it:
SPA = 1 - mean over system pairs of |p_human - p_metric|.

p is a paired permutation test on the segment scores that i beats j: each permutation flips the
sign of every item's difference with probability 1/2 (one sign per item, shared by all pairs and
both sides), p the share of permutations whose summed difference reaches the observed one (no
+1). Signs are drawn from ``numpy.random.default_rng(seed)`` exactly as mt-metrics-eval draws them
(float32 uniforms rounded, seed 4, 1,000 permutations). Only items scored by every system on both
sides are used; systems without any score are left out first.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from paraeval.correlation.coefficients import Coefficient, register_coefficient, register_settings


def sign_matrix(n_items: int, n_permutations: int = 1000, seed: int = 4) -> np.ndarray:
    """The (n_permutations, n_items) matrix of +1/-1 that mt-metrics-eval's ``pce`` draws.

    It depends only on its arguments: one draw serves the human and the metric p-values."""
    rng = np.random.default_rng(seed)
    signs = rng.random(size=(n_permutations, n_items), dtype=np.float32)
    np.rint(signs, out=signs, casting="same_kind")
    signs *= 2.0
    signs -= 1.0
    return signs


def pairwise_p_values(scores: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """(S, S) matrix whose upper triangle holds the permutation p-value that system i beats
    system j on the segment ``scores`` (S, N), NaN elsewhere."""
    seg = np.asarray(scores, dtype=np.float32)
    totals = seg.sum(axis=1)
    partial_sums = signs @ seg.T  # (K, S)
    n_sys = seg.shape[0]
    p = np.full((n_sys, n_sys), np.nan)
    i, j = np.triu_indices(n_sys, k=1)
    null = partial_sums[:, i] - partial_sums[:, j]
    p[i, j] = (null >= (totals[i] - totals[j])[None, :]).mean(axis=0)
    return p


def soft_pairwise_accuracy_value(
    metric: np.ndarray,
    human: np.ndarray,
    *,
    n_permutations: int = 1000,
    seed: int = 4,
) -> float:
    """SPA of two ``(n_systems, n_items)`` matrices; NaN with fewer than 2 systems or no item
    scored by all of them."""
    m = np.asarray(metric, dtype=float)
    h = np.asarray(human, dtype=float)
    ok = np.isfinite(m) & np.isfinite(h)
    rows = ok.any(axis=1)
    m, h, ok = m[rows], h[rows], ok[rows]
    cols = ok.all(axis=0)
    if m.shape[0] < 2 or not cols.any():
        return float("nan")
    m, h = m[:, cols], h[:, cols]
    signs = sign_matrix(m.shape[1], n_permutations, seed)
    ph = pairwise_p_values(h, signs)
    pm = pairwise_p_values(m, signs)
    i, j = np.triu_indices(m.shape[0], k=1)
    return float(1.0 - np.mean(np.abs(ph[i, j] - pm[i, j])))


def _vector_fn(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    raise ValueError(
        "soft_pairwise_accuracy needs the segment scores of every system (system x item "
        "matrices), not one score per system"
    )


def soft_pairwise_accuracy_coefficient(*, n_permutations: int = 1000, seed: int = 4) -> Coefficient:
    """The ``soft_pairwise_accuracy`` entry: system level only, from the score matrices."""
    if not isinstance(n_permutations, int) or n_permutations < 1:
        raise ValueError(f"n_permutations must be a positive integer, got {n_permutations!r}")
    if not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    return Coefficient(
        "soft_pairwise_accuracy",
        _vector_fn,
        levels=("system",),
        matrix_system=partial(
            soft_pairwise_accuracy_value, n_permutations=n_permutations, seed=seed
        ),
        williams=False,
        options=(("n_permutations", n_permutations), ("seed", seed)),
    )


register_coefficient(soft_pairwise_accuracy_coefficient())
register_settings("soft_pairwise_accuracy", soft_pairwise_accuracy_coefficient)
