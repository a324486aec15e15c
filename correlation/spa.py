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

import hashlib
from collections.abc import Callable, Hashable
from functools import partial

import numpy as np
from numba import njit

from paraeval.correlation.resamples import Resamples, resampled_matrices
from paraeval.correlation.values import Coefficient, Memo

# sign matrices, and human p-values, a memo keeps for the metrics that share a set of resamples,
# at most (~64 MB each)
_KEPT_SIGN_BYTES = 64 * 2**20


def sign_matrix(n_items: int, n_permutations: int = 1000, seed: int = 4) -> np.ndarray:
    """The (n_permutations, n_items) matrix of +1/-1 that mt-metrics-eval's ``pce`` draws.

    It depends only on its arguments: one draw serves the human and the metric p-values."""
    rng = np.random.default_rng(seed)
    signs = rng.random(size=(n_permutations, n_items), dtype=np.float32)
    np.rint(signs, out=signs, casting="same_kind")
    signs *= 2.0
    signs -= 1.0
    return signs


def sign_matrix_nbytes(n_items: int, n_permutations: int, n_systems: int) -> int:
    """Peak bytes of one :func:`sign_matrix` and the p-values taken with it: the float32 signs
    (a set of resamples may keep one per number of items, within ``_KEPT_SIGN_BYTES``, so two are
    counted) and the partial sums of every permutation and system (float32)."""
    return 2 * 4 * n_permutations * n_items + 2 * 4 * n_permutations * n_systems


def pairwise_p_values(scores: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """(S, S) matrix whose upper triangle holds the permutation p-value that system i beats
    system j on the segment ``scores`` (S, N), NaN elsewhere."""
    seg = np.asarray(scores, dtype=np.float32)
    totals = seg.sum(axis=1)
    partial_sums = np.ascontiguousarray(signs @ seg.T)  # (K, S)
    return _shares(partial_sums, totals)


@njit(cache=True, nogil=True)
def _shares(partial_sums: np.ndarray, totals: np.ndarray) -> np.ndarray:  # pragma: no cover
    # each pair's differences in float32 as numpy forms them, counted without the (K, pairs)
    # matrix of differences: the same p-values, bit for bit
    k, n_sys = partial_sums.shape
    p = np.full((n_sys, n_sys), np.nan)
    for i in range(n_sys):
        for j in range(i + 1, n_sys):
            observed = totals[i] - totals[j]
            hits = 0
            for r in range(k):
                if partial_sums[r, i] - partial_sums[r, j] >= observed:
                    hits += 1
            p[i, j] = hits / k
    return p


def _complete(ok: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """The index (``np.ix_``) of the systems with any score among the cells ``ok`` and of the
    items every one of them has on both sides, or None where SPA is undefined."""
    rows = ok.any(axis=1)
    cols = ok[rows].all(axis=0)
    return np.ix_(rows, cols) if rows.sum() >= 2 and cols.any() else None


def _spa(ph: np.ndarray, pm: np.ndarray) -> float:
    i, j = np.triu_indices(ph.shape[0], k=1)
    return float(1.0 - np.mean(np.abs(ph[i, j] - pm[i, j])))


def soft_pairwise_accuracy_value(
    metric: np.ndarray,
    human: np.ndarray,
    *,
    n_permutations: int = 1000,
    seed: int = 4,
) -> float:
    """SPA of two ``(n_systems, n_items)`` matrices; NaN with fewer than 2 systems or no item
    scored by all of them."""
    batch = np.asarray(metric, dtype=float)[None]
    return float(soft_pairwise_accuracy_batch(batch, human, None, n_permutations, seed)[0])


def soft_pairwise_accuracy_batch(
    metrics: np.ndarray,
    human: np.ndarray,
    memo: Memo | None = None,
    n_permutations: int = 1000,
    seed: int = 4,
) -> np.ndarray:
    """SPA of each matrix of ``metrics`` (K, S, I), all missing the same cells (a permutation
    test's hybrids), as :func:`soft_pairwise_accuracy_value`: one product of the signs with every
    matrix gives all partial sums. ``memo`` (shared by one test or one set of resamples) keeps
    the sign matrices and the human p-values, each kind within ``_KEPT_SIGN_BYTES``."""
    ms = np.asarray(metrics, dtype=float)
    h = np.asarray(human, dtype=float)
    cells = _complete(np.isfinite(ms).all(axis=0) & np.isfinite(h))
    if cells is None:
        return np.full(ms.shape[0], np.nan)
    memo, hk, run = {} if memo is None else memo, h[cells], ("spa", n_permutations, seed)
    n = hk.shape[1]
    signs = _kept(memo, (*run, "signs"), n, lambda: sign_matrix(n, n_permutations, seed))
    digest = hashlib.blake2b(hk.tobytes() + str(hk.shape).encode(), digest_size=16).digest()
    ph = _kept(memo, (*run, "human"), digest, lambda: pairwise_p_values(hk, signs))
    seg = np.ascontiguousarray(ms[:, cells[0], cells[1]], dtype=np.float32)
    k, n_sys, n_items = seg.shape
    partial_sums = signs @ seg.reshape(k * n_sys, n_items).T
    blocks = np.ascontiguousarray(partial_sums.reshape(-1, k, n_sys).transpose(1, 0, 2))
    return np.array([_spa(ph, _shares(p, t)) for p, t in zip(blocks, seg.sum(axis=2), strict=True)])


def _kept(memo: Memo, kind: Hashable, key: Hashable, make: Callable[[], np.ndarray]) -> np.ndarray:
    kept: dict[Hashable, np.ndarray] = memo.setdefault(kind, {})
    if key in kept:
        return kept[key]
    value = make()
    # a snapshot: the table's threads share one memo
    if sum(v.nbytes for v in list(kept.values())) + value.nbytes <= _KEPT_SIGN_BYTES:
        kept[key] = value
    return value


def resampled_spa(
    metric: np.ndarray,
    human: np.ndarray,
    res: Resamples,
    memo: Memo,
    *,
    n_permutations: int = 1000,
    seed: int = 4,
) -> np.ndarray:
    """SPA of every resampled matrix of ``res`` (the same numbers as on each one); ``memo``:
    shared by the metrics of one set of resamples, whose human p-values are the same on the same
    cells."""
    out = np.full(res.n_resamples, np.nan)
    m, h = np.asarray(metric, dtype=float), np.asarray(human, dtype=float)
    for b, mb, hb in resampled_matrices(m, h, res):
        out[b] = soft_pairwise_accuracy_batch(mb[None], hb, memo, n_permutations, seed)[0]
    return out


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
            soft_pairwise_accuracy_batch, n_permutations=n_permutations, seed=seed
        ),
        matrix_system_resampled=partial(resampled_spa, n_permutations=n_permutations, seed=seed),
        williams=False,
        options=(("n_permutations", n_permutations), ("seed", seed)),
    )
