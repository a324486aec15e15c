"""sacrebleu's corpus scores of many summed-statistics rows at once (``corpus_from_stats_batched``).

They follow sacrebleu's ``_compute_score_from_stats`` of BLEU, chrF and TER operation by operation
in the same dtype (float32 in sacrebleu's paired bootstrap), with ``math.log``/``math.exp`` rather
than numpy's (which differ in the last bit): the paired-test p-values count strict inequalities.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, cast

import numba
import numpy as np
from numba import njit

if TYPE_CHECKING:
    from sacrebleu.metrics.bleu import BLEU as SacreBLEU
    from sacrebleu.metrics.chrf import CHRF as SacreCHRF
    from sacrebleu.metrics.ter import TER as SacreTER

_MY_LOG_FLOOR = -9999999999.0  # sacrebleu.utils.my_log(0.0)


@njit(cache=True, nogil=True)
def _libm(x: np.ndarray, exp: bool) -> np.ndarray:
    out = np.empty_like(x)
    for i in range(x.size):
        out[i] = math.exp(x[i]) if exp else math.log(x[i])
    return out


# numba compiles these scalar loops to the C library's log/exp, the functions behind Python's
# math.log/math.exp (a test checks bit equality on millions of values). With Intel SVML, numba
# may vectorise them into other code: then each value goes through Python's math module.
# (numba.config sets USING_SVML when it reads its environment, which a type checker cannot see.)
_MATH_LOG: Callable[[np.ndarray], np.ndarray]
_MATH_EXP: Callable[[np.ndarray], np.ndarray]
if getattr(numba.config, "USING_SVML", False):
    _MATH_LOG = np.frompyfunc(math.log, 1, 1)
    _MATH_EXP = np.frompyfunc(math.exp, 1, 1)
else:
    _MATH_LOG, _MATH_EXP = partial(_libm, exp=False), partial(_libm, exp=True)


def _map_math(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    flat = np.ascontiguousarray(x, dtype=np.float64).ravel()
    return np.asarray(fn(flat), dtype=np.float64).reshape(np.shape(x))


def _rows(stats: np.ndarray, copy: bool) -> tuple[np.ndarray, np.dtype]:
    """The rows in the statistics' dtype where it is float32 (sacrebleu's paired bootstrap), else
    in float64."""
    stats = np.atleast_2d(stats)
    dtype = stats.dtype if stats.dtype == np.float32 else np.dtype(np.float64)
    return stats.astype(dtype, copy=copy), dtype


def _with_python_zeros(scores: np.ndarray, python_rows: np.ndarray) -> np.ndarray:
    """sacrebleu returns a Python float on some branches and a numpy scalar of the statistics'
    dtype on others; ``np.array`` of such a list is float64 as soon as one Python float is in it."""
    if scores.dtype != np.float64 and python_rows.any():
        scores = scores.astype(np.float64)
    return scores


def bleu_scores(stats: np.ndarray, bleu: SacreBLEU) -> np.ndarray:
    """``sacrebleu.BLEU._compute_score_from_stats(row).score`` for every row of ``stats``."""
    s, dtype = _rows(stats, copy=True)
    order = int(bleu.max_ngram_order)
    method = str(bleu.smooth_method)
    # None only for smooth_method "none", which never reads it (cast, not float(): an int
    # default such as add-k's 1 enters the sums as sacrebleu's own code adds it)
    smooth_value = cast(
        float,
        bleu.SMOOTH_DEFAULTS[method] if bleu.smooth_value is None else bleu.smooth_value,
    )
    rows = s.shape[0]
    # int(stats[0]) and int(stats[1]): exact integers, then Python int arithmetic (exact in f64)
    sys_len = np.trunc(s[:, 0].astype(np.float64))
    ref_len = np.trunc(s[:, 1].astype(np.float64))
    correct = s[:, 2 : 2 + order]
    total = s[:, 2 + order : 2 + 2 * order]

    bp = np.ones(rows)
    short = sys_len < ref_len
    short_pos = short & (sys_len > 0)
    if short_pos.any():
        bp[short_pos] = _map_math(_MATH_EXP, 1 - ref_len[short_pos] / sys_len[short_pos])
    bp[short & (sys_len <= 0)] = 0.0

    any_match = (correct != 0).any(axis=1)
    precisions = np.zeros((rows, order))
    eff_order = np.full(rows, order, dtype=np.int64)
    active = any_match.copy()
    smooth_mteval = np.ones(rows)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for n in range(1, order + 1):
            j = n - 1
            if method == "add-k" and n > 1:
                correct[:, j] += smooth_value
                total[:, j] += smooth_value
            active &= total[:, j] != 0
            if bleu.effective_order:
                eff_order = np.where(active, n, eff_order)
            zero = correct[:, j] == 0
            hit = active & ~zero
            precisions[hit, j] = (100.0 * correct[hit, j] / total[hit, j]).astype(np.float64)
            miss = active & zero
            if method == "exp":
                smooth_mteval = np.where(miss, smooth_mteval * 2, smooth_mteval)
                if miss.any():
                    precisions[miss, j] = (
                        100.0 / (smooth_mteval[miss].astype(dtype) * total[miss, j])
                    ).astype(np.float64)
            elif method == "floor" and miss.any():
                precisions[miss, j] = (100.0 * smooth_value / total[miss, j]).astype(np.float64)
    logs = np.full(precisions.shape, _MY_LOG_FLOOR)
    positive = precisions != 0.0
    logs[positive] = _map_math(_MATH_LOG, precisions[positive])
    acc = np.zeros(rows)
    for j in range(order):  # Python's sum(): left to right, only over the effective orders
        acc = np.where(j < eff_order, acc + logs[:, j], acc)
    score = bp * _map_math(_MATH_EXP, acc / eff_order)
    score[~any_match] = 0.0
    return score


def chrf_scores(stats: np.ndarray, chrf: SacreCHRF) -> np.ndarray:
    """``sacrebleu.CHRF._compute_score_from_stats(row).score`` for every row of ``stats``."""
    s, dtype = _rows(stats, copy=False)
    rows = s.shape[0]
    factor = int(chrf.beta) ** 2
    eps = 1e-16
    avg_p = np.zeros(rows, dtype=dtype)
    avg_r = np.zeros(rows, dtype=dtype)
    eff = np.zeros(rows, dtype=np.int64)
    eps_score = np.zeros(rows, dtype=dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(int(chrf.order)):
            n_hyp, n_ref, n_match = s[:, 3 * i], s[:, 3 * i + 1], s[:, 3 * i + 2]
            prec = np.where(n_hyp > 0, n_match / n_hyp, dtype.type(eps))
            rec = np.where(n_ref > 0, n_match / n_ref, dtype.type(eps))
            both = (n_hyp > 0) & (n_ref > 0)
            avg_p = np.where(both, avg_p + prec, avg_p)
            avg_r = np.where(both, avg_r + rec, avg_r)
            eff += both
            if chrf.eps_smoothing:
                denom = factor * prec + rec
                eps_score = eps_score + np.where(
                    denom > 0, (1 + factor) * prec * rec / denom, dtype.type(eps)
                )
        if chrf.eps_smoothing:
            return 100 * eps_score / int(chrf.order)
        safe = np.maximum(eff, 1).astype(dtype)
        avg_p = np.where(eff > 0, avg_p / safe, dtype.type(0))
        avg_r = np.where(eff > 0, avg_r / safe, dtype.type(0))
        nonzero = (avg_p + avg_r) != 0
        score = 100 * ((1 + factor) * avg_p * avg_r / ((factor * avg_p) + avg_r))
    score = np.where(nonzero, score, dtype.type(0))
    return _with_python_zeros(score, ~nonzero)


def ter_scores(stats: np.ndarray, ter: SacreTER | None = None) -> np.ndarray:
    """``sacrebleu.TER._compute_score_from_stats(row).score`` for every row of ``stats``."""
    s, dtype = _rows(stats, copy=False)
    edits, ref_len = s[:, 0], s[:, 1]
    has_ref = ref_len > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        score = 100 * (edits / ref_len)
    fallback = np.where(edits > 0, 100.0, 0.0).astype(dtype)
    return _with_python_zeros(np.where(has_ref, score, fallback), ~has_ref)
