"""Vectorised coefficients of one fixed pair of vectors under many weightings
(:class:`FixedPairs`): the segment level of the bootstrap and of the permutation tests, where a
resample or a permutation only changes how often each pooled cell counts.

Pearson is a weighted moment ratio; Spearman uses weighted mid-ranks from one sort of the data;
Kendall's tau-b/c count weighted discordant pairs by a merge sort whose orders do not depend on
the weights, or as a quadratic form in item multiplicities (:mod:`correlation._pairs`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Literal

import numpy as np

from paraeval.correlation._pairs import (
    item_pair_matrices,
    kendall_b_from_item_weights,
    spearman_block,
    spearman_sums,
)

# ---------------------------------------------------------------------------------------------
# Fixed data, many weight vectors: x, y of shape (n,), weights of shape (n, B).
# ---------------------------------------------------------------------------------------------


class Groups:
    """Runs of equal values of a fixed vector, in sorted order."""

    def __init__(self, v: np.ndarray) -> None:
        order = np.argsort(v, kind="stable")
        vs = v[order]
        new = np.ones(v.size, dtype=bool)
        new[1:] = vs[1:] != vs[:-1]
        self.order = order
        self.starts = np.flatnonzero(new)
        self.group = np.empty(v.size, dtype=np.intp)
        self.group[order] = np.cumsum(new) - 1
        self.n_groups = int(self.starts.size)

    def weights(self, wt: np.ndarray) -> np.ndarray:
        """Total weight of every group for weights ``wt`` of shape (n, B): shape (n_groups, B)."""
        return _group_sums(wt[self.order], self.starts)

    def present(self, wt: np.ndarray) -> np.ndarray:
        """How many distinct values carry positive weight, shape (B,)."""
        return np.asarray((self.weights(wt) > 0).sum(axis=0))


def _group_midranks(gw: np.ndarray) -> np.ndarray:
    """Mid-rank of each group of tied values in the expanded sample, from group weights (G, B)."""
    below = np.cumsum(gw, axis=0, dtype=gw.dtype) - gw
    return below + (gw + 1.0) / 2.0


def _group_sums(sorted_w: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Sums of consecutive row runs beginning at ``starts``; runs of one row need no reduction
    (reduceat costs as much per run as per row, and untied data has only such runs)."""
    if starts.size == sorted_w.shape[0]:
        return sorted_w
    return np.add.reduceat(sorted_w, starts, axis=0)


def _tied_pairs(gw: np.ndarray) -> np.ndarray:
    g = gw.astype(np.float64)
    return np.asarray((g * (g - 1.0)).sum(axis=0) / 2.0)


class _InversionPlan:
    """Weight-independent merge-sort levels for sum_{i<j, v_i > v_j} w_i w_j over many w.

    At a level with half-width h, the sequence splits into blocks of 2h; every pair (i in the left
    half, j in the right half) of a block is counted there and nowhere else. For each right element
    the weight of left elements with a larger value is a difference of two entries of the cumulative
    sum of the left weights in value order, and those positions depend only on v.
    """

    def __init__(self, v: np.ndarray) -> None:
        n = v.size
        span = int(v.max()) + 1 if n else 1
        pos = np.arange(n)
        self.levels: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        h = 1
        while h < n:
            block = pos // (2 * h)
            left = (pos % (2 * h)) < h
            key = block * span + v
            left_pos = pos[left]
            left_sorted = left_pos[np.argsort(key[left_pos], kind="stable")]
            left_keys = key[left_sorted]
            right_pos = pos[~left]
            upto = np.searchsorted(left_keys, key[right_pos], side="right")
            end = np.searchsorted(left_keys, (block[right_pos] + 1) * span, side="left")
            self.levels.append((left_sorted, right_pos, upto, end))
            h *= 2

    def count(self, wt: np.ndarray) -> np.ndarray:
        """Weighted inversion count for weights ``wt`` of shape (n, B) in sequence order.

        Integer weights (resample multiplicities) stay integers: int32 halves the memory traffic
        of float64 and its cumulative sums are several times faster; the caller guarantees that
        a product of one weight and a total weight fits.
        """
        total = np.zeros(wt.shape[1])
        for left_sorted, right_pos, upto, end in self.levels:
            # (n, B) layout: every gather moves whole contiguous rows and the cumulative sum runs
            # down the rows, both much faster than working along the last axis
            cs = np.zeros((left_sorted.size + 1, wt.shape[1]), dtype=wt.dtype)
            # an explicit integer output: np.cumsum would otherwise widen int32 to int64 and run
            # several times slower
            np.cumsum(wt[left_sorted], axis=0, out=cs[1:])
            larger = cs[end] - cs[upto]
            total += (wt[right_pos] * larger).sum(axis=0, dtype=np.float64)
        return total


class FixedPairs:
    """Vectorised coefficients of one fixed pair of vectors under many weightings.

    Weights are (n, B): one column per resample. Sorted layouts are built on first use.
    ``n_resamples``: the weightings asked for in all, block by block, so that a choice of method
    is made once for every block.
    """

    def __init__(self, x: np.ndarray, y: np.ndarray, n_resamples: int | None = None) -> None:
        self.x = np.asarray(x, dtype=float)
        self.y = np.asarray(y, dtype=float)
        self.n = self.x.size
        self.n_resamples = n_resamples
        # (item array, n_items, pair matrices) of the last kendall_b_by_items call
        self._item_mats: tuple[np.ndarray, int, np.ndarray] | None = None

    @cached_property
    def gx(self) -> Groups:
        return Groups(self.x)

    @cached_property
    def gy(self) -> Groups:
        return Groups(self.y)

    @cached_property
    def moments(self) -> np.ndarray:
        x, y = self.x, self.y
        # standardising first keeps the one-pass moment formulas accurate
        sx = x.std() or 1.0
        sy = y.std() or 1.0
        xs = (x - x.mean()) / sx
        ys = (y - y.mean()) / sy
        return np.stack([np.ones_like(xs), xs, ys, xs * xs, ys * ys, xs * ys], axis=0)

    @cached_property
    def _kendall_plan(self) -> tuple[np.ndarray, np.ndarray, _InversionPlan]:
        order = np.lexsort((self.y, self.x))
        xo, yo = self.x[order], self.y[order]
        new = np.ones(self.n, dtype=bool)
        new[1:] = (xo[1:] != xo[:-1]) | (yo[1:] != yo[:-1])
        return order, np.flatnonzero(new), _InversionPlan(self.gy.group[order])

    def _pearson(
        self, m: np.ndarray, total: np.ndarray, weights_of: Callable[[np.ndarray], np.ndarray]
    ) -> np.ndarray:
        """Pearson's r from the six weighted moment sums ``m`` (6, B); ``weights_of(cols)`` gives
        the cell weights of those resamples for the exact constant test."""
        with np.errstate(invalid="ignore", divide="ignore"):
            t = m[0]
            mx, my = m[1] / t, m[2] / t
            vx = m[3] / t - mx * mx
            vy = m[4] / t - my * my
            r = (m[5] / t - mx * my) / np.sqrt(vx * vy)
        # rounding leaves ~1e-16 of variance on a constant resample of standardised data
        suspect = (vx < 1e-8) | (vy < 1e-8) | ~np.isfinite(r)
        const = np.zeros(m.shape[1], dtype=bool)
        cols = np.flatnonzero(suspect)
        if self.gx.n_groups < 2 or self.gy.n_groups < 2:
            # a constant pool: every resample is constant, nothing to look up
            const[:] = True
        elif cols.size:
            sub = weights_of(cols)
            const[cols] = (self.gx.present(sub) < 2) | (self.gy.present(sub) < 2)
        return np.where(const | (total < 3), np.nan, np.clip(r, -1.0, 1.0))

    def pearson_by_items(self, item: np.ndarray, n_items: int, item_w: np.ndarray) -> np.ndarray:
        """Pearson's r when every cell of item i weighs ``item_w[:, i]`` (item resampling): the
        moment sums are linear in the weights, so they are taken per item first (n_items
        columns instead of one per cell)."""
        per_item = np.stack(
            [np.bincount(item, weights=row, minlength=n_items) for row in self.moments]
        )
        m = np.einsum("ki,bi->kb", per_item, item_w)
        total = item_w @ np.bincount(item, minlength=n_items).astype(np.float64)
        return self._pearson(m, total, lambda cols: item_w[cols].T[item])

    def spearman_by_items(self, item: np.ndarray, n_items: int, item_w: np.ndarray) -> np.ndarray:
        """Spearman's rho when every cell of item i weighs ``item_w[:, i]`` (item resampling):
        one compiled pass per resample over the tie groups instead of (cells, resamples) arrays.
        Same sums as :meth:`statistic`, and they are exact (half-integer ranks), so the same
        numbers."""
        item = np.asarray(item, dtype=np.int64)
        sides = [
            (item[g.order], np.append(g.starts, self.n).astype(np.int64), g.group.astype(np.int64))
            for g in (self.gx, self.gy)
        ]
        k = np.ascontiguousarray(item_w, dtype=np.float64)
        width = spearman_block(self.gx.n_groups, self.gy.n_groups)
        total, cross, sq_x, sq_y, kx, ky = spearman_sums(*sides[0], *sides[1], item, k, width)
        centre = total * ((total + 1.0) / 2.0) ** 2
        with np.errstate(invalid="ignore", divide="ignore"):
            vx, vy = sq_x - centre, sq_y - centre
            r = np.clip((cross - centre) / np.sqrt(vx * vy), -1.0, 1.0)
        const = (kx < 2) | (ky < 2)
        return np.where(const | (total < 3), np.nan, r)

    def kendall_b_by_items(
        self, item: np.ndarray, n_items: int, item_w: np.ndarray
    ) -> np.ndarray | None:
        """Kendall's tau-b under item resampling as a quadratic form in the item multiplicities
        (:mod:`correlation._pairs`), or None where that does not beat the merge sort."""
        cells = np.bincount(item, minlength=n_items)
        if not _item_pairs_pay_off(cells, self.n_resamples or item_w.shape[0]):
            return None
        known = self._item_mats
        if known is not None and known[0] is item and known[1] == n_items:
            mats = known[2]
        else:
            # once for all blocks of resamples: the pass over the cell pairs is the costly part
            mats = item_pair_matrices(self.x, self.y, item, n_items)
            self._item_mats = (item, n_items, mats)
        return kendall_b_from_item_weights(mats, cells.astype(np.float64), item_w)

    @staticmethod
    def _totals(wt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        total = wt.sum(axis=0, dtype=np.float64)
        # int32 products of one weight and a cumulative weight must not overflow
        small_int = wt.dtype.kind in "iu" and wt.dtype.itemsize < 8
        if small_int and float(wt.max(initial=0)) * float(total.max(initial=0)) >= 2**31:
            wt = wt.astype(np.int64)
        return wt, total

    def pearson(self, wt: np.ndarray) -> np.ndarray:
        """Pearson's r under each column of weights ``wt`` (n, B): shape (B,)."""
        wt, total = self._totals(wt)
        with np.errstate(invalid="ignore", divide="ignore"):
            # einsum, not a BLAS product: multi-threaded BLAS inside the worker threads of
            # correlation_table oversubscribes the CPUs
            m = np.einsum("kn,nb->kb", self.moments, wt.astype(np.float64))
            return self._pearson(m, total, lambda cols: wt[:, cols])

    def spearman(self, wt: np.ndarray) -> np.ndarray:
        """Spearman's rho under each column of weights ``wt`` (n, B): shape (B,)."""
        wt, total = self._totals(wt)
        with np.errstate(invalid="ignore", divide="ignore"):
            # Mid-ranks of the expanded sample always sum to N(N+1)/2, and their squares can
            # be summed per group of tied values, so only the cross term needs every cell.
            # Ranks are half-integers: these sums stay exact in float64 up to N of ~1e5.
            gwx, gwy = self.gx.weights(wt), self.gy.weights(wt)
            mid_x, mid_y = _group_midranks(gwx), _group_midranks(gwy)
            cross = np.einsum("nb,nb->b", mid_x[self.gx.group] * mid_y[self.gy.group], wt)
            centre = total * ((total + 1.0) / 2.0) ** 2
            vx = np.einsum("gb,gb->b", mid_x * mid_x, gwx) - centre
            vy = np.einsum("gb,gb->b", mid_y * mid_y, gwy) - centre
            r = np.clip((cross - centre) / np.sqrt(vx * vy), -1.0, 1.0)
            const = ((gwx > 0).sum(axis=0) < 2) | ((gwy > 0).sum(axis=0) < 2)
            return np.where(const | (total < 3), np.nan, r)

    def kendall(self, wt: np.ndarray, variant: Literal["b", "c"]) -> np.ndarray:
        """Kendall's tau-b or tau-c under each column of weights ``wt`` (n, B): shape (B,)."""
        wt, total = self._totals(wt)
        with np.errstate(invalid="ignore", divide="ignore"):
            order, joint_starts, plan = self._kendall_plan
            wo = wt[order]
            discordant = plan.count(wo)
            gwx = self.gx.weights(wt)
            gwy = self.gy.weights(wt)
            kx = (gwx > 0).sum(axis=0)
            ky = (gwy > 0).sum(axis=0)
            n0 = (total * total - total) / 2.0
            n1 = _tied_pairs(gwx)
            n2 = _tied_pairs(gwy)
            n3 = _tied_pairs(_group_sums(wo, joint_starts))
            s = n0 - n1 - n2 + n3 - 2.0 * discordant
            if variant == "b":
                tau = s / np.sqrt((n0 - n1) * (n0 - n2))
            else:
                m_cls = np.minimum(kx, ky).astype(float)
                tau = 2.0 * s / (total * total * (m_cls - 1.0) / m_cls)
            const = (kx < 2) | (ky < 2)
            return np.where(const | (total < 2), np.nan, np.clip(tau, -1.0, 1.0))


def _item_pairs_pay_off(cells: np.ndarray, n_resamples: int) -> bool:
    """Whether one O(cells^2) pass plus item x item products beats the merge sort per resample,
    for ``cells[i]`` cells in item i: the four item matrices must stay small (<= 128 MB), the
    (item, slot) layout of the pass too (items of similar sizes, as when every system rates
    every item), and the pass cheaper than the sorts."""
    n_items, n_cells = cells.size, int(cells.sum())
    return (
        n_items <= 2000
        and n_items * int(cells.max(initial=0)) <= max(2 * n_cells, 2**20)
        and n_cells <= 4 * n_resamples * max(np.log2(max(n_cells, 2)), 1.0)
    )
