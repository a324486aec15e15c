"""Exact permutation p-values for a handful of pairs (a few systems): every pairing of the two
samples enumerated, the numbers of ``scipy.stats.permutation_test`` with ``n_resamples=np.inf``."""

from __future__ import annotations

import numpy as np

EXACT_MAX_N = 8
"""Up to this many pairs the p-values of Pearson, Spearman and Kendall are exact; above it scipy's
large-sample approximations, which do not hold for a handful of systems (Spearman's p on 3
perfectly ordered systems is 0.0 by the t approximation, 1/3 exactly)."""


def _all_pairings(n: int) -> np.ndarray:
    """Every permutation of ``range(n)``, shape (n!, n), in ``itertools.permutations``' order,
    built from those of k - 1 values (a hundred times faster than a list of tuples at n = 8)."""
    perms = np.zeros((1, 0), dtype=np.intp)
    for k in range(1, n + 1):
        rows = len(perms)
        out = np.empty((k * rows, k), dtype=np.intp)
        for first in range(k):
            block = out[first * rows : (first + 1) * rows]
            block[:, 0] = first
            block[:, 1:] = perms + (perms >= first)
        perms = out
    return perms


def _exact_p(observed: float, permuted: np.ndarray) -> float:
    """Two-sided p-value from the statistic under all n! pairings, as scipy's
    ``permutation_test`` computes it for an exact null distribution: twice the smaller one-sided
    p-value, at most 1, values within a relative 1e-12 of the observed one counting as equal."""
    tol = 1e-12 * max(1.0, abs(observed))
    greater = float(np.mean(permuted >= observed - tol))
    less = float(np.mean(permuted <= observed + tol))
    return min(1.0, 2.0 * min(greater, less))


def exact_linear_p(xs: np.ndarray, ys: np.ndarray) -> float:
    """Exact p-value of Pearson's r of ``xs`` and ``ys`` (Spearman's rho: pass ranks). Under
    re-pairing the means and norms are fixed, so r is a fixed multiple of sum(xc * yc[perm])."""
    xc, yc = xs - xs.mean(), ys - ys.mean()
    perms = _all_pairings(xs.size)
    return _exact_p(float(xc @ yc), yc[perms] @ xc)


def exact_kendall_p(xs: np.ndarray, ys: np.ndarray) -> float:
    """Exact p-value of Kendall's tau-b / tau-c. Under re-pairing the tie counts of each side are
    fixed, so tau is a fixed multiple of S = sum_{i<j} sign(x_i - x_j) sign(y_i - y_j)."""
    sx = np.sign(xs[:, None] - xs[None, :])
    yp = ys[_all_pairings(xs.size)]
    s_perm = np.einsum("pij,ij->p", np.sign(yp[:, :, None] - yp[:, None, :]), sx)
    observed = float((np.sign(ys[:, None] - ys[None, :]) * sx).sum())
    return _exact_p(observed, s_perm)
