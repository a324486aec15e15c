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


@njit(cache=True, nogil=True)
def _discordant_by_sweep(
    item: np.ndarray, rank: np.ndarray, starts: np.ndarray, n_ranks: int, n_items: int
) -> np.ndarray:
    """Discordant pairs between items, cells visited in increasing x (``starts``: the groups of
    tied x, in that order). ``rank`` is each cell's y rank among ``n_ranks`` distinct values.
    ``above[k, j]`` counts the cells of item j already visited (strictly smaller x) whose y rank
    is at least k, so a cell of rank r meets ``above[r + 1]``: the earlier cells it is
    discordant with, for all items at once. Out: ``out[i, j]`` = such pairs with the earlier
    cell in item j and the later one in item i (each unordered pair once)."""
    above = np.zeros((n_ranks + 1, n_items), dtype=np.int32)
    out = np.zeros((n_items, n_items), dtype=np.int64)
    for g in range(starts.size - 1):
        lo, hi = starts[g], starts[g + 1]
        for c in range(lo, hi):  # a group meets only the groups before it
            row = out[item[c]]
            seen = above[rank[c] + 1]
            for j in range(n_items):
                row[j] += seen[j]
        for c in range(lo, hi):
            j = item[c]
            for k in range(rank[c] + 1):
                above[k, j] += 1
    return out


@njit(cache=True, nogil=True)
def _tied_by_groups(item: np.ndarray, starts: np.ndarray, n_items: int) -> np.ndarray:
    """``sum over groups of c c'`` for every group of tied values (cells ``starts[g]`` to
    ``starts[g + 1]`` in ``item`` order of visit), ``c`` the group's cells per item: ordered
    pairs of tied cells between two items, each cell with itself included."""
    out = np.zeros((n_items, n_items), dtype=np.int64)
    tally = np.zeros(n_items, dtype=np.int64)
    touched = np.empty(n_items, dtype=np.int64)
    for g in range(starts.size - 1):
        n_touched = 0
        for c in range(starts[g], starts[g + 1]):
            j = item[c]
            if tally[j] == 0:
                touched[n_touched] = j
                n_touched += 1
            tally[j] += 1
        for p in range(n_touched):
            a = touched[p]
            for q in range(n_touched):
                b = touched[q]
                out[a, b] += tally[a] * tally[b]
        for p in range(n_touched):
            tally[touched[p]] = 0
    return out


def _sweep_pays_off(n_cells: int, n_ranks: int, n_items: int) -> bool:
    """Whether the sweep beats the direct pass: it costs about cells x (items + ranks / 2)
    against the direct pass's cells^2 / 2 (the 4 is measured: the direct pass vectorises
    better), while its table of counts (ranks x items, int32) stays within 16 MB."""
    return (n_ranks + 1) * n_items <= 2**22 and n_ranks / 2 + n_items <= n_cells / 4


def _group_starts(sorted_keys: list[np.ndarray]) -> np.ndarray:
    """Starts of the runs of equal keys (all of them equal) in sorted order, and the end."""
    n = sorted_keys[0].size
    new = np.zeros(n, dtype=bool)
    if n:
        new[0] = True
    for k in sorted_keys:
        new[1:] |= k[1:] != k[:-1]
    return np.append(np.flatnonzero(new), n).astype(np.int64)


def _sweep_matrices(x: np.ndarray, y: np.ndarray, item: np.ndarray, n_items: int) -> np.ndarray:
    """:func:`item_pair_matrices` by a sweep in x order over the y ranks (``y`` being the
    variable with few distinct values): the same integer counts."""
    _, rank = np.unique(y, return_inverse=True)
    rank = rank.astype(np.int64).ravel()
    n_ranks = int(rank.max(initial=-1)) + 1
    by_x = np.argsort(x, kind="stable")
    x_starts = _group_starts([x[by_x]])
    later_earlier = _discordant_by_sweep(item[by_x], rank[by_x], x_starts, n_ranks, n_items)
    by_y = np.argsort(rank, kind="stable")
    by_xy = np.lexsort((rank, x))
    mats = np.empty((4, n_items, n_items))
    mats[0] = later_earlier + later_earlier.T
    mats[1] = _tied_by_groups(item[by_x], x_starts, n_items)
    mats[2] = _tied_by_groups(item[by_y], _group_starts([rank[by_y]]), n_items)
    mats[3] = _tied_by_groups(item[by_xy], _group_starts([x[by_xy], rank[by_xy]]), n_items)
    return mats


def item_pair_matrices(x: np.ndarray, y: np.ndarray, item: np.ndarray, n_items: int) -> np.ndarray:
    """(4, n_items, n_items): ordered-pair counts between the cells of two items of pairs that
    are discordant, tied in x, tied in y, tied in both. The tie matrices count each cell with
    itself too, so that k' M k is the sum of squared group weights.

    A variable with few distinct values (human ratings on a scale) is swept over its ranks
    (:func:`_sweep_matrices`); otherwise every pair of cells is visited."""
    item = np.asarray(item, dtype=np.int64)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    nx, ny = np.unique(x).size, np.unique(y).size
    finite = bool(np.isfinite(x).all() and np.isfinite(y).all())
    if finite and x.size and _sweep_pays_off(x.size, min(nx, ny), n_items):
        if ny <= nx:
            return _sweep_matrices(x, y, item, n_items)
        # discordance is symmetric in the two variables: sweep over x's ranks instead
        return _sweep_matrices(y, x, item, n_items)[[0, 2, 1, 3]]
    return _direct_matrices(x, y, item, n_items)


def _direct_matrices(x: np.ndarray, y: np.ndarray, item: np.ndarray, n_items: int) -> np.ndarray:
    cells = np.bincount(item, minlength=n_items)
    upper = _upper_counts(item_rows(x, item, cells), item_rows(y, item, cells), cells)
    full = upper + upper.transpose(0, 2, 1)
    for k in (1, 2, 3):
        full[k] += np.diag(cells.astype(np.float64))
    return full


def _exact_in_float32(k: np.ndarray, mats: np.ndarray) -> bool:
    """Whether k M is a product of non-negative integers whose every partial sum stays below
    2**24, float32's range of exact integers."""
    if k.size == 0 or mats.size == 0 or k.min() < 0 or mats.min() < 0:
        return False
    bound = float(k.sum(axis=1).max()) * float(mats.max())
    return bound < 2.0**24 and bool((k == np.rint(k)).all() and (mats == np.rint(mats)).all())


def kendall_b_from_item_weights(mats: np.ndarray, cells: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of the pooled sample for every row of item multiplicities ``k`` (B, n)."""
    total = k @ cells
    # k' M k for the four matrices, exact (integer counts far below 2**53); one product for all
    n = mats.shape[-1]
    side = mats.transpose(1, 0, 2).reshape(n, -1)  # [M0 | M1 | M2 | M3]
    # exact in float32 too where every partial sum stays below 2**24: the same numbers at half
    # the cost
    if _exact_in_float32(k, mats):
        km = (k.astype(np.float32) @ side.astype(np.float32)).astype(np.float64)
    else:
        km = k @ side
    forms = np.einsum("bmi,bi->mb", km.reshape(k.shape[0], 4, n), k)
    discordant = forms[0] / 2.0
    n0 = (total * total - total) / 2.0
    n1, n2, n3 = (forms[1:] - total) / 2.0
    s = n0 - n1 - n2 + n3 - 2.0 * discordant
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = s / np.sqrt((n0 - n1) * (n0 - n2))
    # every pair tied in x (or in y) is a constant resample: undefined, as in the direct path
    const = (n0 - n1 <= 0) | (n0 - n2 <= 0)
    return np.where(const | (total < 2), np.nan, np.clip(tau, -1.0, 1.0))


# resamples taken together by spearman_sums: its inner loops run over them (vectorised), and
# the mid-ranks of a block of resamples (groups x block) stay in cache; fewer where the groups
# are many (the block's mid-ranks stay within _SPEARMAN_BLOCK_BYTES)
_SPEARMAN_BLOCK = 64
_SPEARMAN_BLOCK_BYTES = 2**23


def spearman_block(n_groups_x: int, n_groups_y: int) -> int:
    """Resamples per block of :func:`spearman_sums` for these numbers of tie groups."""
    fit = _SPEARMAN_BLOCK_BYTES // (8 * max(n_groups_x + n_groups_y, 1))
    return int(min(_SPEARMAN_BLOCK, max(1, fit)))


@njit(cache=True, nogil=True)
def spearman_sums(
    x_items: np.ndarray,
    x_starts: np.ndarray,
    x_group: np.ndarray,
    y_items: np.ndarray,
    y_starts: np.ndarray,
    y_group: np.ndarray,
    item: np.ndarray,
    k: np.ndarray,
    width: int,
) -> np.ndarray:
    """Per resample (rows of item multiplicities ``k``): total weight, the weighted cross sum of
    mid-ranks, the weighted sums of squared mid-ranks in x and y, and how many tie groups of x
    and of y carry weight. ``x_items`` are the cells' items in x order, ``x_starts`` the first
    position of every group of tied x values (plus the end), ``x_group`` each cell's group.

    Blocks of ``width`` resamples (:func:`spearman_block`), resamples innermost: each resample's
    sums take the same operations in the same order as alone (the same numbers)."""
    n_res, n_items = k.shape
    out = np.zeros((6, n_res))
    # the block's weights as (items, resamples): a cell's weights side by side
    kt = np.empty((n_items, width))
    mid_x = np.empty((x_starts.size - 1, width))
    mid_y = np.empty((y_starts.size - 1, width))
    gw = np.empty(width)
    below = np.empty(width)
    squares = np.empty(width)
    present = np.empty(width)
    cross = np.empty(width)
    for b0 in range(0, n_res, width):
        nb = min(width, n_res - b0)
        for i in range(n_items):
            for j in range(nb):
                kt[i, j] = k[b0 + j, i]
        for side in range(2):
            items = x_items if side == 0 else y_items
            starts = x_starts if side == 0 else y_starts
            mid = mid_x if side == 0 else mid_y
            below[:] = 0.0
            squares[:] = 0.0
            present[:] = 0.0
            for g in range(starts.size - 1):
                gw[:] = 0.0
                for p in range(starts[g], starts[g + 1]):
                    row = kt[items[p]]
                    for j in range(nb):
                        gw[j] += row[j]
                mg = mid[g]
                for j in range(nb):
                    m = below[j] + (gw[j] + 1.0) / 2.0
                    mg[j] = m
                    squares[j] += m * m * gw[j]
                    present[j] += gw[j] > 0.0
                    below[j] += gw[j]
            for j in range(nb):
                out[0, b0 + j] = below[j]
                out[2 + side, b0 + j] = squares[j]
                out[4 + side, b0 + j] = present[j]
        cross[:] = 0.0
        for c in range(item.size):
            row = kt[item[c]]
            mx = mid_x[x_group[c]]
            my = mid_y[y_group[c]]
            for j in range(nb):
                cross[j] += row[j] * (mx[j] * my[j])
        for j in range(nb):
            out[1, b0 + j] = cross[j]
    return out


@njit(cache=True, nogil=True)
def kendall_pair_sums(
    x: np.ndarray, y: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Over every ordered pair (i, j) of each row (diagonal included): the sums of w_i w_j
    sign(x_i - x_j) sign(y_i - y_j), of w_i w_j [x_i = x_j] and of w_i w_j [y_i = y_j].

    The caller passes finite x and y and integer-valued weights whose sums stay far below 2**53:
    every term and partial sum is then an exact integer, so these equal the float64 sums of the
    broadcast products in any order."""
    rows, n = x.shape
    s = np.zeros(rows)
    tx = np.zeros(rows)
    ty = np.zeros(rows)
    for r in range(rows):
        acc_s = 0.0
        acc_x = 0.0
        acc_y = 0.0
        for i in range(n):
            wi = w[r, i]
            xi = x[r, i]
            yi = y[r, i]
            for j in range(n):
                ww = wi * w[r, j]
                dx = xi - x[r, j]
                dy = yi - y[r, j]
                acc_s += ww * (np.sign(dx) * np.sign(dy))
                acc_x += ww * (dx == 0.0)
                acc_y += ww * (dy == 0.0)
        s[r] = acc_s
        tx[r] = acc_x
        ty[r] = acc_y
    return s, tx, ty


@njit(cache=True, nogil=True)
def midrank_sums(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For every position s of each row: the weight of the positions t with x_t < x_s, and of
    those with x_t = x_s (s itself included). With integer weights these are exact integer sums,
    the same in any order as the (rows, n, n) products they replace."""
    rows, n = x.shape
    below = np.zeros((rows, n))
    tied = np.zeros((rows, n))
    for r in range(rows):
        for s in range(n):
            xs = x[r, s]
            acc_b = 0.0
            acc_t = 0.0
            for t in range(n):
                xt = x[r, t]
                acc_b += w[r, t] * (xt < xs)
                acc_t += w[r, t] * (xt == xs)
            below[r, s] = acc_b
            tied[r, s] = acc_t
    return below, tied
