"""A compiled kernel for ParaScore's diversity: the character edit distance of many pairs.

Text ``t`` is ``flat[starts[t]:starts[t] + lens[t]]`` (Unicode code points); pair ``k`` compares
text ``pa[k]`` with text ``pb[k]``. One DP row is kept at a time."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _distances(
    flat: np.ndarray, starts: np.ndarray, lens: np.ndarray, pa: np.ndarray, pb: np.ndarray
) -> np.ndarray:
    out = np.zeros(pa.shape[0], dtype=np.int64)
    for k in range(pa.shape[0]):
        a0, m = starts[pa[k]], lens[pa[k]]
        b0, n = starts[pb[k]], lens[pb[k]]
        prev = np.arange(n + 1)
        cur = np.zeros(n + 1, dtype=np.int64)
        for i in range(1, m + 1):
            cur[0] = i
            ai = flat[a0 + i - 1]
            for j in range(1, n + 1):
                cost = 0 if ai == flat[b0 + j - 1] else 1
                best = prev[j - 1] + cost
                if prev[j] + 1 < best:
                    best = prev[j] + 1
                if cur[j - 1] + 1 < best:
                    best = cur[j - 1] + 1
                cur[j] = best
            prev, cur = cur, prev
        out[k] = prev[n]
    return out


def edit_distances(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """The Levenshtein distance (insertions, deletions, substitutions at cost 1) of each pair of
    strings, over their code points."""
    texts: dict[str, int] = {}
    for a, b in pairs:
        texts.setdefault(a, len(texts))
        texts.setdefault(b, len(texts))
    codes = [np.frombuffer(t.encode("utf-32-le"), dtype=np.uint32) for t in texts]
    lens = np.array([len(c) for c in codes], dtype=np.int64)
    starts = np.zeros(len(codes), dtype=np.int64)
    if len(codes) > 1:
        starts[1:] = np.cumsum(lens[:-1])
    flat = np.concatenate(codes) if codes else np.zeros(0, dtype=np.uint32)
    pa = np.array([texts[a] for a, _ in pairs], dtype=np.int64)
    pb = np.array([texts[b] for _, b in pairs], dtype=np.int64)
    return _distances(flat, starts, lens, pa, pb)
