"""sacrebleu's TER statistics computed by compiled code.

:func:`ter_statistics` returns what sacrebleu's ``TER._extract_corpus_statistics`` returns, with
sacrebleu's own tokenization. Only ``lib_ter.translation_edit_rate`` is compiled, step for step:
the beam edit distance (same beam, widening, operation preference and trace) and the shift search
(same candidate order, limits, filters, ranking and ``_MAX_SHIFT_CANDIDATES`` stop). sacrebleu's
row cache only saves work; here the rows of the last hypothesis are kept and recomputed from the
first differing word. Words become integers (only their equality matters).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import accumulate, pairwise
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from paraeval.metrics._lcs import TokenIds, pack_pairs, pair_codes

if TYPE_CHECKING:
    from sacrebleu.metrics.ter import TER as SacreTER

# sacrebleu's TER limits and costs (sacrebleu.metrics.lib_ter, after TERCOM): the compiled search
# must use the same ones, which the tests against sacrebleu's own TER pin
_MAX_SHIFT_SIZE = 10
_MAX_SHIFT_DIST = 50
_BEAM_WIDTH = 25
_MAX_SHIFT_CANDIDATES = 1000
_INT_INFINITY = 10**16
_COST_INS = 1
_COST_DEL = 1
_COST_SUB = 1

# operations of the edit trace
_NOP, _SUB, _INS, _DEL, _UNDEF = 0, 1, 2, 3, 4


@njit(cache=True, nogil=True)
def _fill_rows(
    cost: np.ndarray,
    ops: np.ndarray,
    words: np.ndarray,
    ref: np.ndarray,
    first_row: int,
    ratio: float,
    beam: int,
) -> None:
    """Rows ``first_row..n_h`` of ``BeamEditDistance._edit_distance``'s matrix."""
    n_h = words.shape[0]
    n_r = ref.shape[0]
    for i in range(first_row, n_h + 1):
        cost[i, :] = _INT_INFINITY
        ops[i, :] = _UNDEF
        pseudo_diag = math.floor(i * ratio)
        min_j = max(0, pseudo_diag - beam)
        max_j = n_r + 1 if i == n_h else min(n_r + 1, pseudo_diag + beam)
        w = words[i - 1]
        for j in range(min_j, max_j):
            if j == 0:
                cost[i, j] = cost[i - 1, j] + _COST_DEL
                ops[i, j] = _DEL
            else:
                same = w == ref[j - 1]
                c_sub = cost[i - 1, j - 1] + (0 if same else _COST_SUB)
                o_sub = _NOP if same else _SUB
                best = cost[i, j]
                op = ops[i, j]
                if best > c_sub:
                    best = c_sub
                    op = o_sub
                c_del = cost[i - 1, j] + _COST_DEL
                if best > c_del:
                    best = c_del
                    op = _DEL
                c_ins = cost[i, j - 1] + _COST_INS
                if best > c_ins:
                    best = c_ins
                    op = _INS
                cost[i, j] = best
                ops[i, j] = op


@njit(cache=True, nogil=True)
def _evaluate(
    cost: np.ndarray,
    ops: np.ndarray,
    last: np.ndarray,
    valid: np.ndarray,
    words: np.ndarray,
    ref: np.ndarray,
    ratio: float,
    beam: int,
) -> int:
    """Edit distance of ``words``, reusing the rows of the previously evaluated ``last``."""
    n_h = words.shape[0]
    p = 0
    if valid[0]:
        while p < n_h and words[p] == last[p]:
            p += 1
    _fill_rows(cost, ops, words, ref, p + 1, ratio, beam)
    last[:] = words
    valid[0] = True
    return int(cost[n_h, ref.shape[0]])


@njit(cache=True, nogil=True)
def _perform_shift(
    words: np.ndarray, start: int, length: int, target: int, out: np.ndarray
) -> None:
    """``lib_ter._perform_shift`` with Python's slice clamping."""
    n = words.shape[0]
    k = 0
    if target < start:
        bounds = ((0, target), (start, start + length), (target, start), (start + length, n))
    elif target > start + length:
        bounds = ((0, start), (start + length, target), (start, start + length), (target, n))
    else:
        mid = min(n, length + target)
        bounds = ((0, start), (start + length, mid), (start, start + length), (mid, n))
    for lo, hi in bounds:
        for x in range(lo, min(hi, n)):
            out[k] = words[x]
            k += 1


@njit(cache=True, nogil=True)
def _edit_rate(hyp: np.ndarray, ref: np.ndarray) -> tuple[int, int]:
    """(total edits, status) of ``lib_ter.translation_edit_rate``; status 1 = unreadable trace."""
    n_h = hyp.shape[0]
    n_r = ref.shape[0]
    if n_r == 0:
        return n_h, 0
    ratio = n_r / n_h if n_h > 0 else 1.0
    beam = math.ceil(ratio / 2 + _BEAM_WIDTH) if ratio / 2 > _BEAM_WIDTH else _BEAM_WIDTH

    cost = np.empty((n_h + 1, n_r + 1), dtype=np.int64)
    ops = np.empty((n_h + 1, n_r + 1), dtype=np.int8)
    cost[0, :] = np.arange(n_r + 1) * _COST_INS
    ops[0, :] = _INS
    last = np.empty(n_h, dtype=hyp.dtype)
    valid = np.zeros(1, dtype=np.bool_)

    cur = hyp.copy()
    cand = np.empty(n_h, dtype=hyp.dtype)
    trace = np.empty(n_h + n_r, dtype=np.int8)
    align = np.empty(n_r, dtype=np.int64)
    ref_err = np.empty(n_r, dtype=np.int64)
    hyp_err = np.empty(n_h, dtype=np.int64)

    shifts = checked = 0
    while True:
        pre_score = _evaluate(cost, ops, last, valid, cur, ref, ratio, beam)
        # the trace, read back from the last cell
        t, i, j = 0, n_h, n_r
        while i > 0 or j > 0:
            op = ops[i, j]
            trace[t] = op
            t += 1
            if op in (_SUB, _NOP):
                i -= 1
                j -= 1
            elif op == _INS:
                j -= 1
            elif op == _DEL:
                i -= 1
            else:
                return 0, 1
        # the alignment of the flipped trace (insertions <-> deletions), first operation first
        pos_h = pos_r = -1
        for k in range(t - 1, -1, -1):
            op = trace[k]
            if op != _INS:  # a match, a substitution, or _DEL flipped: a hypothesis word
                pos_h += 1
                hyp_err[pos_h] = 0 if op == _NOP else 1
            if op != _DEL:  # a match, a substitution, or _INS flipped: a reference word
                pos_r += 1
                align[pos_r] = pos_h
                ref_err[pos_r] = 0 if op == _NOP else 1

        # the shift search of lib_ter._shift: the best candidate has the highest score, then the
        # greatest length, then the lowest start, then the lowest target
        best = (-_INT_INFINITY, 0, 0, 0)
        for start_h in range(n_h):
            for start_r in range(n_r):
                if abs(start_r - start_h) > _MAX_SHIFT_DIST:
                    continue
                length = 0
                while cur[start_h + length] == ref[start_r + length] and length < _MAX_SHIFT_SIZE:
                    length += 1
                    # one candidate (start_h, start_r, length)
                    if (
                        hyp_err[start_h : start_h + length].any()
                        and ref_err[start_r : start_r + length].any()
                        and not (start_h <= align[start_r] < start_h + length)
                    ):
                        prev_idx = -1
                        for offset in range(-1, length):
                            idx = 0 if start_r + offset == -1 else align[start_r + offset] + 1
                            if idx == prev_idx:
                                continue
                            prev_idx = idx
                            _perform_shift(cur, start_h, length, idx, cand)
                            score = pre_score - _evaluate(
                                cost, ops, last, valid, cand, ref, ratio, beam
                            )
                            checked += 1
                            cand_key = (score, length, -start_h, -idx)
                            if cand_key > best:
                                best = cand_key
                        # checked after a candidate that passed the filters, as sacrebleu does
                        if checked >= _MAX_SHIFT_CANDIDATES:
                            break
                    if n_h == start_h + length or n_r == start_r + length:
                        break
                if checked >= _MAX_SHIFT_CANDIDATES:
                    break
            if checked >= _MAX_SHIFT_CANDIDATES:
                break

        if checked >= _MAX_SHIFT_CANDIDATES or best[0] <= 0:
            return shifts + pre_score, 0
        shifts += 1
        _perform_shift(cur, -best[2], best[1], -best[3], cand)
        cur[:] = cand


@njit(cache=True, nogil=True)
def _edit_rates(
    flat: np.ndarray,
    starts: np.ndarray,
    lens: np.ndarray,
    pa: np.ndarray,
    pb: np.ndarray,
    edits: np.ndarray,
    status: np.ndarray,
) -> None:
    for k in range(pa.shape[0]):
        edits[k], status[k] = _edit_rate(*pair_codes(flat, starts, lens, pa, pb, k))


def ter_statistics(
    metric: SacreTER, hyps: Sequence[str], references: Sequence[Sequence[str | None]]
) -> list[list[float]]:
    """``metric._extract_corpus_statistics(hyps, references)`` (``references`` as sacrebleu's
    streams: one list per reference position, ``None`` where a segment has fewer)."""
    n = len(hyps)
    refs_per_seg: list[list[str]] = [
        [r for r in seg if r is not None] for seg in zip(*references, strict=True)
    ]
    if n == 0 or len(refs_per_seg) != n or any(not rs for rs in refs_per_seg):
        # sacrebleu's own errors (no references, a segment without any, mismatched lengths)
        stats: list[list[float]] = metric._extract_corpus_statistics(
            list(hyps),
            references,  # type: ignore[arg-type]  # sacrebleu skips None references
        )
        return stats

    # sacrebleu's TER preprocessing: its tokenizer on the text without trailing space
    texts = (*hyps, *(r for rs in refs_per_seg for r in rs))
    words = {t: tuple(metric.tokenizer(t.rstrip()).split()) for t in texts}
    hyp_words = [words[h] for h, refs in zip(hyps, refs_per_seg, strict=True) for _ in refs]
    ref_words = [words[r] for rs in refs_per_seg for r in rs]
    flat, starts, lens, pa, pb = pack_pairs(hyp_words, ref_words, TokenIds())
    # a (hypothesis, reference) pair that repeats is computed once
    unique, inverse = np.unique(np.stack([pa, pb]), axis=1, return_inverse=True)
    edits = np.empty(unique.shape[1], dtype=np.int64)
    status = np.zeros(unique.shape[1], dtype=np.int8)
    _edit_rates(flat, starts, lens, unique[0], unique[1], edits, status)
    if status.any():  # beams that always overlap make this unreachable; sacrebleu's error
        raise RuntimeError("unknown operation 'x' in a TER edit trace")
    pair_edits = edits[np.asarray(inverse).ravel()].tolist()
    ref_lens = lens[pb].tolist()

    ends = accumulate(map(len, refs_per_seg), initial=0)
    return [[min(pair_edits[a:b]), sum(ref_lens[a:b]) / (b - a)] for a, b in pairwise(ends)]
