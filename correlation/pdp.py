"""Pairwise Difference Pearson (mt-metrics-eval's ``pdp``, added to its segment-level statistics
in 2025): Pearson's r between the human and the metric differences of every pair of systems
inside an item, pooled over items.

mt-metrics-eval lists both orders of every pair and the zero self-pairs, so the differences have
mean 0 and r is uncentred::

    r = sum_i sum_{s<t} dh dm / sqrt(sum_i sum_{s<t} dh^2 * sum_i sum_{s<t} dm^2)

and each item's sums come from its centred scores (``sum_{s<t} dh dm = n sum_s hc mc``), so an
item is three numbers and a resample of items a weighted sum of them. Cells where either score is
missing are left out (mt-metrics-eval drops pairs with a missing human score); fewer than two
pairs in all, or no variation in either score inside any item, gives NaN. No p-value: the
differences are not independent observations.
"""

from __future__ import annotations

import numpy as np

from paraeval.correlation.resamples import Resamples, counts
from paraeval.correlation.values import Coefficient


def item_sums(metric: np.ndarray, human: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per item (last axis): the sums over its pairs of dh*dm, dh^2 and dm^2, and its pair
    count, for matrices ``(..., n_systems, n_items)`` sharing one missing-value pattern rule."""
    m = np.asarray(metric, dtype=float)
    h = np.asarray(human, dtype=float)
    ok = np.isfinite(m) & np.isfinite(h)
    n = ok.sum(axis=-2)
    with np.errstate(invalid="ignore", divide="ignore"):
        mc = np.where(ok, m - np.where(ok, m, 0.0).sum(axis=-2, keepdims=True) / n[..., None, :], 0)
        hc = np.where(ok, h - np.where(ok, h, 0.0).sum(axis=-2, keepdims=True) / n[..., None, :], 0)
    return (
        n * (hc * mc).sum(axis=-2),
        n * (hc * hc).sum(axis=-2),
        n * (mc * mc).sum(axis=-2),
        n * (n - 1) / 2.0,
    )


def _ratio(cross: np.ndarray, hh: np.ndarray, mm: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        r = cross / np.sqrt(hh * mm)
    return np.where((pairs >= 2) & (hh > 0) & (mm > 0), np.clip(r, -1.0, 1.0), np.nan)


def pdp(metric: np.ndarray, human: np.ndarray) -> tuple[float, float]:
    """Pairwise Difference Pearson of two ``(n_systems, n_items)`` matrices; p is NaN."""
    m = np.atleast_2d(np.asarray(metric, dtype=float))
    h = np.atleast_2d(np.asarray(human, dtype=float))
    if m.shape != h.shape:
        raise ValueError(f"metric and human scores differ in shape: {m.shape} vs {h.shape}")
    return float(_ratio(*(np.asarray(s.sum()) for s in item_sums(m, h)))), float("nan")


def _resampled(metric: np.ndarray, human: np.ndarray, res: Resamples) -> np.ndarray | None:
    """PDP under every resample of items: item multiplicities weight the per-item sums; None
    where systems are resampled (the generic path rebuilds the matrices)."""
    if res.sys_idx is not None or res.item_idx is None:
        return None
    w = counts(res.item_idx, metric.shape[1]).astype(float)
    cross, hh, mm, pairs = (w @ s for s in item_sums(metric, human))
    return _ratio(cross, hh, mm, pairs)


def _batch(metrics: np.ndarray, human: np.ndarray) -> np.ndarray:
    """PDP of each matrix of a batch ``(K, n_systems, n_items)`` against ``human``."""
    cross, hh, mm, pairs = (s.sum(axis=-1) for s in item_sums(metrics, human[None]))
    return _ratio(cross, hh, mm, pairs)


PDP = Coefficient(
    "pdp",
    pdp,
    levels=("segment",),
    vector=False,
    segment_resampled=_resampled,
    segment_batch=_batch,
    williams=False,
)
