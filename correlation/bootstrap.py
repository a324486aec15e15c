"""Bootstrap confidence intervals for a correlation, vectorised over resamples.

A resample draws item columns, system rows, or both, with replacement (``unit``). The value of one
resample is exactly what :func:`correlation.levels.correlate` returns on the explicitly resampled
matrix ``metric[sys_idx][:, item_idx]`` (the tests check this equality); it is computed without
building that matrix:

- a repeated cell is a weight (its multiplicity). Pearson is a weighted moment ratio (one
  product of the weights with six moment vectors for all resamples); Spearman uses weighted
  mid-ranks from one sort of the data; Kendall's tau-b/tau-c count weighted discordant pairs with
  a merge-sort recursion whose sort orders do not depend on the weights, so every level is a
  handful of array operations over all resamples at once (O(B n log n) work, no Python loop over
  cells or resamples);
- Kendall's tau-b at the segment level under item resampling is a quadratic form in the item
  multiplicities: one compiled pass counts discordant and tied pairs between every two items
  (:mod:`correlation._pairs`), then all resamples are a few matrix products (used where that
  is cheaper than the merge sort);
- with few values per unit of analysis (systems inside an item, systems at the system level) the
  statistics are computed from pair tensors ``(..., n, n)``.

Resampled values that are undefined (a constant resample) are NaN and left out of the percentiles.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import numpy as np

from paraeval.correlation.coefficients import (
    Coefficient,
    CoefficientLike,
    get_coefficient,
    kendall_like_counts,
    pair_kendall_like_counts,
    pair_statistic,
)
from paraeval.correlation.levels import (
    ITEM_NAN,
    UNITS,
    check_level_coefficient,
    check_matrices,
    correlate,
    item_values,
    row_nanmean,
)
from paraeval.memo import Memo, array_key, frozen, nbytes_of

SystemMetricFn = Callable[[np.ndarray], np.ndarray]

# Largest number of float64 elements one temporary array may hold; bounds memory (~16 MB).
_CHUNK_ELEMENTS = 2_000_000
# Elements of item multiplicities (resamples x items, float64) made at once, in whole rows:
# ~32 MB however many resamples and items there are. Every consumer treats resamples
# independently of each other, so block boundaries change no number (at 40,000 items the whole
# matrix would be 320 MB, per worker thread and per coefficient).
_WEIGHT_BLOCK_ELEMENTS = 4_000_000


@dataclass(frozen=True)
class Resamples:
    """Indices of one set of bootstrap resamples; ``None`` where that axis is not resampled.
    :func:`draw_resamples` gives item indices in the narrowest integer type that holds them
    (uint16 up to 65,536 items): a table holds one set per aspect and level for the whole run."""

    n_resamples: int
    sys_idx: np.ndarray | None  # (B, n_systems)
    item_idx: np.ndarray | None  # (B, n_items)


def draw_resamples(
    rng: np.random.Generator, n_systems: int, n_items: int, n_resamples: int, unit: str
) -> Resamples:
    """Draw resampling indices: items first, then systems (the order fixes the random stream)."""
    if unit not in UNITS:
        raise ValueError(f"unknown resampling unit {unit!r}; valid units: {', '.join(UNITS)}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")
    item_idx = _draw_indices(rng, n_items, n_resamples) if unit in ("items", "both") else None
    sys_idx = (
        rng.integers(0, n_systems, size=(n_resamples, n_systems))
        if unit in ("systems", "both")
        else None
    )
    return Resamples(n_resamples, sys_idx, item_idx)


def _draw_indices(rng: np.random.Generator, n: int, n_resamples: int) -> np.ndarray:
    """``rng.integers(0, n, size=(n_resamples, n))`` stored in the narrowest type that holds the
    values: the same numbers, and ``rng`` ends in the same state.

    numpy draws a bound below 2**32 as bounded 32-bit numbers whatever the output type (the
    type only sets how they are stored), and one call's stream continues in the next call, so
    blocks of rows drawn as int32 are the one int64 call's numbers; at 40,000 items a set of
    1,000 resamples is 80 MB in uint16 instead of 320 MB in int64.
    """
    shape = (n_resamples, n)
    if n > np.iinfo(np.int32).max:
        return rng.integers(0, n, size=shape)
    if n > np.iinfo(np.uint16).max + 1:
        return rng.integers(0, n, size=shape, dtype=np.int32)
    out = np.empty(shape, dtype=np.uint16)
    step = max(1, _CHUNK_ELEMENTS // max(n, 1))
    for start in range(0, n_resamples, step):
        rows = min(step, n_resamples - start)
        out[start : start + rows] = rng.integers(0, n, size=(rows, n), dtype=np.int32)
    return out


def counts(idx: np.ndarray, k: int) -> np.ndarray:
    """Multiplicity of each of ``k`` units in each resample row of ``idx``: shape (B, k), float."""
    b = idx.shape[0]
    out = np.empty((b, k))
    # a few rows at a time: the int64 offsets and bincount's int64 result of all rows at once
    # would be twice the output's size again
    step = max(1, _CHUNK_ELEMENTS // max(k, 1))
    for start in range(0, b, step):
        part = idx[start : start + step]
        rows = part.shape[0]
        flat = (part + k * np.arange(rows)[:, None]).ravel()
        out[start : start + rows] = np.bincount(flat, minlength=rows * k).reshape(rows, k)
    return out


# multiplicities of a block of resamples, by the content of its indices: every metric column of
# a table and every job of a sweep with the same seed resamples alike. Read-only when kept.
_COUNTS: Memo[str, np.ndarray] = Memo(
    "bootstrap.counts", max_entries=64, max_bytes=2**24, size=nbytes_of
)


def kept_counts(idx: np.ndarray, k: int) -> np.ndarray:
    """``counts(idx, k)``, read-only, kept by the content of ``idx`` (and ``k``)."""
    key = f"{k}|{array_key(idx)}"
    found = _COUNTS.get(key)
    if found is None:
        found = _COUNTS.put(key, frozen(counts(idx, k)))
    return found


def iter_weight_blocks(idx: np.ndarray, k: int) -> Iterator[tuple[slice, np.ndarray]]:
    """``counts(idx, k)`` block by block of whole resample rows: ``(rows, weights)`` pairs,
    each block made when it is reached (or kept from an earlier call), read-only."""
    for sl in _chunks(idx.shape[0], k, _WEIGHT_BLOCK_ELEMENTS):
        yield sl, kept_counts(idx[sl], k)


# ---------------------------------------------------------------------------------------------
# Fixed data, many weight vectors: x, y of shape (n,), weights of shape (n, B).
# ---------------------------------------------------------------------------------------------


class _Groups:
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


# the y side of Spearman's sums under item resampling (see _pairs._spearman_sums), by the
# content of y, the cells' items and the multiplicities; written once, then only read
_SPEARMAN_Y_MAX_ENTRY = 2**24
_SPEARMAN_Y: Memo[str, tuple[np.ndarray, np.ndarray]] = Memo(
    "bootstrap.spearman_y",
    max_entries=64,
    max_bytes=2**26,
    size=nbytes_of,
)


class FixedPairs:
    """Vectorised coefficients of one fixed pair of vectors under many weightings.

    Weights come as an (n, B) array: one column per resample, one row per pair. The sorted
    layouts each statistic needs are built on first use, so a coefficient pays only for its own.
    ``n_resamples``: how many weightings the caller asks for in all when it asks block by block
    (a choice of method that pays off with many resamples is then made on all of them, the same
    for every block).
    """

    def __init__(self, x: np.ndarray, y: np.ndarray, n_resamples: int | None = None) -> None:
        self.x = np.asarray(x, dtype=float)
        self.y = np.asarray(y, dtype=float)
        self.n = self.x.size
        self.n_resamples = n_resamples
        self._kendall: tuple[np.ndarray, np.ndarray, _InversionPlan] | None = None
        # (item array, n_items, pair matrices) of the last kendall_b_by_items call
        self._item_mats: tuple[np.ndarray, int, np.ndarray] | None = None

    @cached_property
    def gx(self) -> _Groups:
        return _Groups(self.x)

    @cached_property
    def gy(self) -> _Groups:
        return _Groups(self.y)

    @cached_property
    def moments(self) -> np.ndarray:
        x, y = self.x, self.y
        # standardising first keeps the one-pass moment formulas accurate
        sx = x.std() or 1.0
        sy = y.std() or 1.0
        xs = (x - x.mean()) / sx
        ys = (y - y.mean()) / sy
        return np.stack([np.ones_like(xs), xs, ys, xs * xs, ys * ys, xs * ys], axis=0)

    def _kendall_plan(self) -> tuple[np.ndarray, np.ndarray, _InversionPlan]:
        if self._kendall is None:
            order = np.lexsort((self.y, self.x))
            xo, yo = self.x[order], self.y[order]
            new = np.ones(self.n, dtype=bool)
            new[1:] = (xo[1:] != xo[:-1]) | (yo[1:] != yo[:-1])
            joint_starts = np.flatnonzero(new)
            v = self.gy.group[order]
            self._kendall = (order, joint_starts, _InversionPlan(v))
        return self._kendall

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

    def spearman_by_items(self, item: np.ndarray, item_w: np.ndarray) -> np.ndarray:
        """Spearman's rho when every cell of item i weighs ``item_w[:, i]`` (item resampling):
        one compiled pass per resample over the tie groups instead of (cells, resamples) arrays.
        Same sums as :meth:`statistic`, and they are exact (half-integer ranks), so the same
        numbers."""
        from paraeval.correlation._pairs import _spearman_sums, spearman_block, spearman_y_buffers

        item = np.asarray(item, dtype=np.int64)
        k = np.ascontiguousarray(item_w, dtype=np.float64)
        y_items = item[self.gy.order]
        y_starts = np.append(self.gy.starts, self.n).astype(np.int64)
        y_group = self.gy.group.astype(np.int64)
        width = spearman_block(self.gx.n_groups, self.gy.n_groups)
        # the human side is the same for every metric column and every job of a sweep: kept
        # where its mid-ranks of every resample are small
        keep = len(k) * self.gy.n_groups * 8 <= _SPEARMAN_Y_MAX_ENTRY
        key = array_key(self.y, item, k, np.asarray(width)) if keep else ""
        kept = _SPEARMAN_Y.get(key) if keep else None
        y_mid, y_sums = (
            kept if kept is not None else spearman_y_buffers(self.gy.n_groups, len(k), width, keep)
        )
        sums = _spearman_sums(
            item[self.gx.order],
            np.append(self.gx.starts, self.n).astype(np.int64),
            self.gx.group.astype(np.int64),
            y_items,
            y_starts,
            y_group,
            item,
            k,
            width,
            y_mid,
            y_sums,
            kept is not None,
        )
        if keep and kept is None:
            _SPEARMAN_Y.put(key, (y_mid, y_sums))
        total, cross, sq_x, sq_y, kx, ky = sums
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
        from paraeval.correlation._pairs import item_pair_matrices, kendall_b_from_item_weights

        known = self._item_mats
        if known is not None and known[0] is item and known[1] == n_items:
            mats = known[2]
        else:
            # once for all blocks of resamples: the pass over the cell pairs is the costly part
            mats = item_pair_matrices(self.x, self.y, item, n_items)
            self._item_mats = (item, n_items, mats)
        return kendall_b_from_item_weights(mats, cells.astype(np.float64), item_w)

    def statistic(self, coefficient: CoefficientLike, wt: np.ndarray) -> np.ndarray:
        """``coefficient`` under each column of weights ``wt`` (n, B): shape (B,)."""
        coef = get_coefficient(coefficient)
        if coef.pooled is None:
            raise ValueError(f"no resampled statistic for coefficient {coef.name!r}")
        return coef.pooled(self, wt)

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
            # correlation_table oversubscribes the CPUs and was 10-50x slower on a busy host
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
            order, joint_starts, plan = self._kendall_plan()
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


# ---------------------------------------------------------------------------------------------
# Resampled values at each level.
# ---------------------------------------------------------------------------------------------


def _chunks(n_resamples: int, per_resample: int, elements: int = _CHUNK_ELEMENTS) -> list[slice]:
    size = max(1, min(n_resamples, elements // max(per_resample, 1)))
    return [slice(i, min(i + size, n_resamples)) for i in range(0, n_resamples, size)]


def _block_weights(res: Resamples, sl: slice, n_items: int) -> np.ndarray | None:
    """Item multiplicities of resamples ``sl`` only (None: items are not resampled)."""
    return kept_counts(res.item_idx[sl], n_items) if res.item_idx is not None else None


def _cell_weights(
    item_w: np.ndarray | None, sys_w: np.ndarray | None, k: int, ci: np.ndarray, cs: np.ndarray
) -> np.ndarray:
    """Multiplicity of every pooled cell in ``k`` resamples, laid out (n_cells, k), from those
    resamples' item and system multiplicities (rows of ``item_w``, ``sys_w``)."""
    wt = np.ones((ci.size, k), dtype=np.int32)
    if item_w is not None:
        wt = item_w.T.astype(np.int32)[ci]
    if sys_w is not None:
        wt = wt * sys_w.T.astype(np.int32)[cs]
    return wt


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


def _segment_values(m: np.ndarray, h: np.ndarray, coef: Coefficient, res: Resamples) -> np.ndarray:
    n_sys, n_items = m.shape
    b = res.n_resamples
    ok = np.isfinite(m) & np.isfinite(h)
    if not ok.any():
        return np.full(b, np.nan)
    if coef.segment_resampled is not None:
        return coef.segment_resampled(m, h, res)
    if coef.pooled is None or not coef.vector:
        return _explicit_values(m, h, "segment", coef, res)

    sys_w = counts(res.sys_idx, n_sys) if res.sys_idx is not None else None
    cs, ci = np.nonzero(ok)
    fixed = FixedPairs(m[ok], h[ok], n_resamples=b)
    if sys_w is None and res.item_idx is not None and coef.pooled_by_items is not None:
        values = np.full(b, np.nan)
        for sl, item_w in iter_weight_blocks(res.item_idx, n_items):
            part = coef.pooled_by_items(fixed, ci, n_items, item_w)
            if part is None:
                break
            values[sl] = part
        else:
            return values
    out = np.full(b, np.nan)
    # small column blocks keep the (cells, resamples) working set in cache
    for sl in _chunks(b, cs.size, 600_000):
        sys_part = sys_w[sl] if sys_w is not None else None
        weights = _cell_weights(
            _block_weights(res, sl, n_items), sys_part, sl.stop - sl.start, ci, cs
        )
        out[sl] = coef.pooled(fixed, weights)
    return out


def kendall_like_segment_values(
    m: np.ndarray, h: np.ndarray, res: Resamples, **settings: Any
) -> np.ndarray:
    """The WMT Kendall-like tau pooled over items, for every resample: the per-item pair counts
    are taken once (or per system resample) and weighted by the item multiplicities."""
    n_sys, n_items = m.shape
    b = res.n_resamples
    sys_w = counts(res.sys_idx, n_sys) if res.sys_idx is not None else None
    ok = np.isfinite(m) & np.isfinite(h)
    out = np.full(b, np.nan)
    # constant test on the resampled pool of cells, as kendall_like() does
    cs, ci = np.nonzero(ok)
    gm, gh = _Groups(m[ok]), _Groups(h[ok])
    c0, d0 = kendall_like_counts(m, h, **settings)
    for sl in _chunks(b, n_sys * n_sys * n_items):
        k = sl.stop - sl.start
        item_w = _block_weights(res, sl, n_items)
        cw = _cell_weights(item_w, sys_w[sl] if sys_w is not None else None, k, ci, cs)
        const = (gm.present(cw) < 2) | (gh.present(cw) < 2)
        if sys_w is None:
            c = np.broadcast_to(c0, (k, n_items))
            d = np.broadcast_to(d0, (k, n_items))
        else:
            w = sys_w[sl][:, None, :] * ok.T[None]
            c, d = pair_kendall_like_counts(m.T[None], h.T[None], w, **settings)
        iw = item_w if item_w is not None else np.ones((k, n_items))
        cc, dd = (iw * c).sum(1), (iw * d).sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[sl] = np.where(const | (cc + dd == 0), np.nan, (cc - dd) / (cc + dd))
    return out


def _explicit_values(
    m: np.ndarray, h: np.ndarray, level: str, coef: Coefficient, res: Resamples
) -> np.ndarray:
    """The generic path for a coefficient without a vectorised form: every resampled matrix is
    built and passed to :func:`correlation.levels.correlate`."""
    out = np.empty(res.n_resamples)
    for b in range(res.n_resamples):
        mb, hb = m, h
        if res.item_idx is not None:
            mb, hb = mb[:, res.item_idx[b]], hb[:, res.item_idx[b]]
        if res.sys_idx is not None:
            mb, hb = mb[res.sys_idx[b]], hb[res.sys_idx[b]]
        out[b] = correlate(mb, hb, level, coef).value
    return out


def _item_values(
    m: np.ndarray, h: np.ndarray, coefficient: Coefficient, res: Resamples, item_nan: str
) -> np.ndarray:
    n_sys, n_items = m.shape
    b = res.n_resamples
    if coefficient.item_level is not None:
        if res.sys_idx is None and res.item_idx is not None:
            return coefficient.item_level(m, h, counts(res.item_idx, n_items))
        return _explicit_values(m, h, "item", coefficient, res)
    if res.sys_idx is None:
        v = np.broadcast_to(item_values(m, h, coefficient), (b, n_items))
    else:
        v = np.empty((b, n_items))
        mt, ht = m.T, h.T  # (items, systems)
        for sl in _chunks(b, n_items * n_sys * n_sys):
            idx = res.sys_idx[sl]
            xs = mt[:, idx].transpose(1, 0, 2)  # (k, items, systems)
            ys = ht[:, idx].transpose(1, 0, 2)
            v[sl] = pair_statistic(coefficient, xs, ys, np.ones(xs.shape))
    out = np.empty(b)
    # a block of resamples at a time: every row is summed on its own, so the blocks change no
    # number, and the (resamples x items) temporaries stay small
    for sl in _chunks(b, n_items, _WEIGHT_BLOCK_ELEMENTS):
        vb = v[sl]
        iw = _block_weights(res, sl, n_items)
        if iw is None:
            iw = np.ones(vb.shape)
        defined = np.isfinite(vb)
        num = (iw * np.where(defined, vb, 0.0)).sum(1)
        # "zero": undefined items stay in the denominator with value 0
        den = iw.sum(1) if item_nan == "zero" else (iw * defined).sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[sl] = np.where(den > 0, num / den, np.nan)
    return out


# The human side of the system level is the same for every metric column of a table and for
# every job of a sweep that keeps the resamples' seed: its resampled means are kept by content.
_HUMAN_MEANS: Memo[str, np.ndarray] = Memo(
    "bootstrap.human_means", max_entries=256, max_bytes=2**26, size=nbytes_of
)


def _resampled_means(a: np.ndarray, item_w: np.ndarray) -> np.ndarray:
    ok = np.isfinite(a)
    num = np.einsum("bi,si->bs", item_w, np.where(ok, a, 0.0))
    # counts of integers: exact in any order, so the matrix product gives einsum's numbers
    den = item_w @ ok.T.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.maximum(den, 1e-300), np.nan)


def system_resampled_scores(
    m: np.ndarray,
    h: np.ndarray,
    res: Resamples,
    system_metric: np.ndarray | None = None,
    system_metric_fn: SystemMetricFn | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-system metric and human scores of every resample, each of shape (B, n_systems).

    They do not depend on the coefficient, so a caller that needs several coefficients of one
    resample set computes them once. A ``system_metric_fn`` with a ``batch`` attribute
    (``batch(item_idx) -> (B, n_systems)``) recomputes many resamples in one call; it is given
    blocks of rows of the indices, and a row's scores must not depend on the other rows.
    """
    n_sys, n_items = m.shape
    b = res.n_resamples
    if res.item_idx is not None:
        batch = getattr(system_metric_fn, "batch", None)
        if (
            system_metric_fn is None
            and system_metric is not None
            and not is_segment_mean(m, system_metric)
        ):
            raise ValueError(
                "the system-level metric scores are not the mean of the segment scores, so "
                "resampling items cannot recompute them: pass system_metric_fn (corpus scores "
                "of an item subset, e.g. from sufficient statistics) or use unit='systems'"
            )
        x = np.empty((b, n_sys))
        y = np.empty((b, n_sys))
        # a block of resamples at a time (rows are computed independently of each other, so
        # the same numbers): the item multiplicities of all resamples at once are 320 MB at
        # 40,000 items
        for sl, item_w in iter_weight_blocks(res.item_idx, n_items):
            idx = res.item_idx[sl]
            if batch is not None:
                x[sl] = np.asarray(batch(idx), dtype=float).reshape(-1, n_sys)
            elif system_metric_fn is not None:
                x[sl] = np.stack([np.asarray(system_metric_fn(ix), dtype=float) for ix in idx])
            else:
                x[sl] = _resampled_means(m, item_w)
            key = array_key(h, idx)
            means = _HUMAN_MEANS.get(key)
            if means is None:
                means = _HUMAN_MEANS.put(key, frozen(_resampled_means(h, item_w)))
            y[sl] = means
    else:
        if system_metric is not None:
            base = np.asarray(system_metric, dtype=float)
        elif system_metric_fn is not None:
            base = np.asarray(system_metric_fn(np.arange(n_items)), dtype=float)
        else:
            base = row_nanmean(m)
        x = np.broadcast_to(base, (b, n_sys))
        y = np.broadcast_to(row_nanmean(h), (b, n_sys))
    if res.sys_idx is not None:
        x = np.take_along_axis(x, res.sys_idx, axis=1)
        y = np.take_along_axis(y, res.sys_idx, axis=1)
    return x, y


def system_statistic(coefficient: CoefficientLike, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``coefficient`` between the rows of resampled system scores ``x`` and ``y``: shape (B,)."""
    coefficient = get_coefficient(coefficient)
    b, n_sys = x.shape
    out = np.empty(b)
    for sl in _chunks(b, n_sys * n_sys):
        out[sl] = pair_statistic(coefficient, x[sl], y[sl], np.ones(x[sl].shape))
    return out


def _system_values(
    m: np.ndarray,
    h: np.ndarray,
    coefficient: Coefficient,
    res: Resamples,
    system_metric: np.ndarray | None,
    system_metric_fn: SystemMetricFn | None,
) -> np.ndarray:
    if coefficient.matrix_system is not None:
        return _explicit_values(m, h, "system", coefficient, res)
    x, y = system_resampled_scores(m, h, res, system_metric, system_metric_fn)
    return system_statistic(coefficient, x, y)


def stats_system_metric_fn(
    stats: Sequence[np.ndarray], corpus: Callable[[np.ndarray], float]
) -> SystemMetricFn:
    """A ``system_metric_fn`` from per-segment sufficient statistics.

    ``stats[s]`` holds system s's statistics, one row per item in the item order of the score
    matrices (``MetricResult.stats``); ``corpus(rows)`` turns a subset or resample of rows into
    the corpus score (e.g. ``lambda st: metric.corpus_from_stats(st)[column]``). Each bootstrap
    resample then recomputes every system's corpus score on its own items.
    """
    arrays = [np.asarray(st) for st in stats]

    def fn(item_idx: np.ndarray) -> np.ndarray:
        return np.array([float(corpus(st[item_idx])) for st in arrays])

    return fn


def is_segment_mean(m: np.ndarray, system_metric: np.ndarray) -> bool:
    """Whether per-system scores are the mean of each system's finite segment scores."""
    sm = np.asarray(system_metric, dtype=float).ravel()
    return sm.shape == (m.shape[0],) and bool(
        np.allclose(sm, row_nanmean(m), rtol=1e-9, atol=1e-12, equal_nan=True)
    )


def resampled_values(
    metric: np.ndarray,
    human: np.ndarray,
    level: str,
    coefficient: CoefficientLike,
    resamples: Resamples,
    *,
    system_metric: np.ndarray | None = None,
    system_metric_fn: SystemMetricFn | None = None,
    item_nan: str = "skip",
) -> np.ndarray:
    """The correlation of every resample in ``resamples``, shape (B,); NaN where undefined."""
    coef = check_level_coefficient(level, coefficient)
    if item_nan not in ITEM_NAN:
        raise ValueError(f"item_nan must be one of {', '.join(ITEM_NAN)}, got {item_nan!r}")
    m, h = check_matrices(metric, human)
    for name, idx, size in (
        ("item", resamples.item_idx, m.shape[1]),
        ("system", resamples.sys_idx, m.shape[0]),
    ):
        if idx is not None and (idx.shape != (resamples.n_resamples, size)):
            raise ValueError(
                f"{name} resampling indices have shape {idx.shape}, "
                f"expected {(resamples.n_resamples, size)}"
            )
    if level == "segment":
        return _segment_values(m, h, coef, resamples)
    if level == "item":
        return _item_values(m, h, coef, resamples, item_nan)
    return _system_values(m, h, coef, resamples, system_metric, system_metric_fn)


def bootstrap_distribution(
    metric: np.ndarray,
    human: np.ndarray,
    level: str,
    coefficient: CoefficientLike,
    *,
    rng: np.random.Generator,
    n_resamples: int = 1000,
    unit: str = "items",
    system_metric: np.ndarray | None = None,
    system_metric_fn: SystemMetricFn | None = None,
    item_nan: str = "skip",
) -> np.ndarray:
    """Bootstrap distribution (B values, NaN where a resample is undefined) of a correlation."""
    m, h = check_matrices(metric, human)
    res = draw_resamples(rng, m.shape[0], m.shape[1], n_resamples, unit)
    return resampled_values(
        m,
        h,
        level,
        coefficient,
        res,
        system_metric=system_metric,
        system_metric_fn=system_metric_fn,
        item_nan=item_nan,
    )


def percentile_interval(values: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the finite values (numpy's linear interpolation); NaN if none."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return float("nan"), float("nan")
    alpha = 1.0 - confidence
    lo, hi = np.quantile(v, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(lo), float(hi)


def bootstrap_ci(
    metric: np.ndarray,
    human: np.ndarray,
    level: str,
    coefficient: CoefficientLike,
    *,
    rng: np.random.Generator,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    unit: str = "items",
    system_metric_fn: SystemMetricFn | None = None,
    item_nan: str = "skip",
    system_metric: np.ndarray | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``correlate(metric, human, level, coefficient)``.

    ``unit`` resamples item columns (``"items"``), system rows (``"systems"``) or both. At the
    system level each resample recomputes the per-system scores from its items: the mean of the
    segment scores, or ``system_metric_fn(item_indices) -> (n_systems,)`` for corpus-level scores
    (BLEU from summed statistics). A ``system_metric`` that is not the segment mean cannot be
    recomputed without that function, so it is an error when items are resampled.
    Resamples whose correlation is undefined are left out of the percentiles.
    """
    values = bootstrap_distribution(
        metric,
        human,
        level,
        coefficient,
        rng=rng,
        n_resamples=n_resamples,
        unit=unit,
        system_metric=system_metric,
        system_metric_fn=system_metric_fn,
        item_nan=item_nan,
    )
    return percentile_interval(values, confidence)
