"""Pair counts between the items of a pooled segment-level sample, compiled by numba.

Under item resampling every cell of item i carries the same weight k_i, so each pair count of
Kendall's tau (discordant pairs, pairs tied in x, in y, in both) is a quadratic form k' M k in the
item multiplicities. One O(n^2) pass over the cells gives the four item x item matrices M; every
resample is then a few matrix products instead of a weighted merge sort.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, inline="always")
def _against(
    xs: np.ndarray, ys: np.ndarray, lo: int, hi: int, xc: float, yc: float
) -> tuple[np.int64, np.int64, np.int64, np.int64]:
    """(discordant, tied in x, tied in y, tied in both) of cell (xc, yc) against cells lo:hi."""
    disc = np.int64(0)
    tie_x = np.int64(0)
    tie_y = np.int64(0)
    tie_xy = np.int64(0)
    # branch-free sums: they vectorise, and on real scores the branches would be unpredictable
    for d in range(lo, hi):
        dx = xs[d] - xc
        dy = ys[d] - yc
        tx = dx == 0.0
        ty = dy == 0.0
        disc += np.int64(((dx > 0.0) & (dy < 0.0)) | ((dx < 0.0) & (dy > 0.0)))
        tie_x += np.int64(tx)
        tie_y += np.int64(ty)
        tie_xy += np.int64(tx & ty)
    return disc, tie_x, tie_y, tie_xy


@njit(cache=True, nogil=True)
def _upper_counts(xs: np.ndarray, ys: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """Cells laid out (item, slot), item i's cells in the first ``cells[i]`` slots of row i;
    every pair of cells is counted once, under (item i, item j) with i <= j. One row per item
    puts every item's cells at an aligned start: the inner loops vectorise about three times
    better than over cells concatenated in item order."""
    n_items = xs.shape[0]
    out = np.zeros((4, n_items, n_items))
    for i in range(n_items):
        for j in range(i, n_items):
            # one item pair at a time: the four counts stay in registers and are stored once
            t0 = t1 = t2 = t3 = np.int64(0)
            for a in range(cells[i]):
                lo = a + 1 if j == i else 0
                c0, c1, c2, c3 = _against(xs[j], ys[j], lo, cells[j], xs[i, a], ys[i, a])
                t0 += c0
                t1 += c1
                t2 += c2
                t3 += c3
            out[0, i, j] = t0
            out[1, i, j] = t1
            out[2, i, j] = t2
            out[3, i, j] = t3
    return out


def item_rows(values: np.ndarray, item: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """``values`` laid out (item, slot): item i's values, in their order, in the first
    ``cells[i]`` slots of row i (NaN after them)."""
    order = np.argsort(item, kind="stable")
    starts = np.concatenate(([0], np.cumsum(cells)))
    rows = np.full((cells.size, int(cells.max(initial=0))), np.nan)
    rows[item[order], np.arange(item.size) - starts[item[order]]] = values[order]
    return rows


def item_pair_matrices(x: np.ndarray, y: np.ndarray, item: np.ndarray, n_items: int) -> np.ndarray:
    """(4, n_items, n_items): ordered-pair counts between the cells of two items of pairs that
    are discordant, tied in x, tied in y, tied in both. The tie matrices count each cell with
    itself too, so that k' M k is the sum of squared group weights."""
    item = np.asarray(item, dtype=np.int64)
    cells = np.bincount(item, minlength=n_items)
    upper = _upper_counts(
        item_rows(np.asarray(x, dtype=np.float64), item, cells),
        item_rows(np.asarray(y, dtype=np.float64), item, cells),
        cells.astype(np.int64),
    )
    full = upper + upper.transpose(0, 2, 1)
    for k in (1, 2, 3):
        full[k] += np.diag(cells.astype(np.float64))
    return full


def kendall_b_from_item_weights(mats: np.ndarray, cells: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of the pooled sample for every row of item multiplicities ``k`` (B, n)."""
    total = k @ cells
    # k' M k for the four matrices; the products are exact: integer counts far below 2**53
    forms = np.stack([np.einsum("bi,bi->b", k @ m, k) for m in mats])
    discordant = forms[0] / 2.0
    n0 = (total * total - total) / 2.0
    n1 = (forms[1] - total) / 2.0
    n2 = (forms[2] - total) / 2.0
    n3 = (forms[3] - total) / 2.0
    s = n0 - n1 - n2 + n3 - 2.0 * discordant
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = s / np.sqrt((n0 - n1) * (n0 - n2))
    # every pair tied in x (or in y) is a constant resample: undefined, as in the direct path
    const = (n0 - n1 <= 0) | (n0 - n2 <= 0)
    return np.where(const | (total < 2), np.nan, np.clip(tau, -1.0, 1.0))


@njit(cache=True, nogil=True)
def _spearman_sums(
    x_items: np.ndarray,
    x_starts: np.ndarray,
    x_group: np.ndarray,
    y_items: np.ndarray,
    y_starts: np.ndarray,
    y_group: np.ndarray,
    item: np.ndarray,
    k: np.ndarray,
) -> np.ndarray:
    """Per resample (rows of item multiplicities ``k``): total weight, the weighted cross sum of
    mid-ranks, the weighted sums of squared mid-ranks in x and y, and how many tie groups of x
    and of y carry weight. ``x_items`` are the cells' items in x order, ``x_starts`` the first
    position of every group of tied x values (plus the end), ``x_group`` each cell's group."""
    n_res = k.shape[0]
    out = np.zeros((6, n_res))
    mid_x = np.empty(x_starts.size - 1)
    mid_y = np.empty(y_starts.size - 1)
    for b in range(n_res):
        kb = k[b]
        for side in range(2):
            items = x_items if side == 0 else y_items
            starts = x_starts if side == 0 else y_starts
            mid = mid_x if side == 0 else mid_y
            below = 0.0
            squares = 0.0
            present = 0
            for g in range(starts.size - 1):
                gw = 0.0
                for p in range(starts[g], starts[g + 1]):
                    gw += kb[items[p]]
                m = below + (gw + 1.0) / 2.0
                mid[g] = m
                squares += m * m * gw
                present += gw > 0.0
                below += gw
            out[0, b] = below
            out[2 + side, b] = squares
            out[4 + side, b] = present
        cross = 0.0
        for c in range(item.size):
            cross += kb[item[c]] * (mid_x[x_group[c]] * mid_y[y_group[c]])
        out[1, b] = cross
    return out
