"""Correlation coefficients between metric scores and human scores, ``(value, p_value)`` floats,
and their descriptors (:class:`~correlation.values.Coefficient`, listed in
:mod:`correlation.catalog`; their vectorised forms give the numbers of ``fn``).

NaN policy (the same everywhere in :mod:`correlation`): pairs where either score is not finite are
dropped; under 3 pairs (2 for Kendall) or a constant vector give ``(nan, nan)`` (recent scipy
returns 0 or 1 for constant input, a made-up number in a correlation table). Adding a
coefficient: its descriptor in :data:`catalog.COEFFICIENTS` and its test.
"""

from __future__ import annotations

import math
import warnings
from functools import partial
from typing import Any, Literal

import numpy as np
from scipy import stats

from paraeval.correlation.exact import EXACT_MAX_N, exact_kendall_p, exact_linear_p
from paraeval.correlation.fixed_pairs import FixedPairs, Groups
from paraeval.correlation.resamples import Resamples, cell_weights, chunks, counts, item_blocks
from paraeval.correlation.values import NAN_RESULT, Coefficient, check_matrices
from paraeval.correlation.weighted import (
    HUMAN_TIES,
    MARGIN_RULES,
    METRIC_TIES,
    HumanTies,
    MarginRule,
    MetricTies,
    kendall_like_classes,
    pair_kendall_like_counts,
    weighted_accuracy,
    weighted_kendall_b,
    weighted_kendall_c,
    weighted_kendall_like,
    weighted_pearson,
    weighted_spearman,
)


def paired_finite(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flatten two score arrays of the same shape and keep the pairs where both are finite."""
    xa = np.asarray(x, dtype=float).ravel()
    ya = np.asarray(y, dtype=float).ravel()
    if xa.shape != ya.shape:
        raise ValueError(
            f"paired scores need the same number of values, got {xa.size} and {ya.size}"
        )
    keep = np.isfinite(xa) & np.isfinite(ya)
    return xa[keep], ya[keep]


def is_constant(v: np.ndarray) -> bool:
    """Exact test (no tolerance): a vector whose values are all equal carries no ranking."""
    return v.size == 0 or bool(np.all(v == v[0]))


def _degenerate(x: np.ndarray, y: np.ndarray, min_n: int) -> bool:
    return x.size < min_n or is_constant(x) or is_constant(y)


def pearson(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Pearson's r and the two-sided p-value of scipy.stats.pearsonr (exact permutation
    p-value for n <= :data:`EXACT_MAX_N`)."""
    xs, ys = paired_finite(x, y)
    if _degenerate(xs, ys, 3):
        return NAN_RESULT
    res = stats.pearsonr(xs, ys)
    p = exact_linear_p(xs, ys) if xs.size <= EXACT_MAX_N else float(res.pvalue)
    return float(res.statistic), p


def pearson_statistic(x: np.ndarray, y: np.ndarray) -> float:
    """``pearson(x, y)[0]`` without the p-value: scipy.stats.pearsonr's statistic, computed by
    the same array operations in the same order (a third of the time of the whole test)."""
    xs, ys = paired_finite(x, y)
    if _degenerate(xs, ys, 3):
        return NAN_RESULT[0]
    # scipy.stats.pearsonr's own steps for 1-d numpy input (scipy 1.17), spelled in numpy:
    # scaling by the largest deviation before the norms keeps them from overflowing
    xm = xs - np.mean(xs, axis=-1, keepdims=True)
    ym = ys - np.mean(ys, axis=-1, keepdims=True)
    xmax = np.max(np.abs(xm), axis=-1, keepdims=True)
    ymax = np.max(np.abs(ym), axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        normxm = xmax * np.linalg.vector_norm(xm / xmax, axis=-1, keepdims=True)
        normym = ymax * np.linalg.vector_norm(ym / ymax, axis=-1, keepdims=True)
        r = np.vecdot(xm / normxm, ym / normym, axis=-1)  # type: ignore[call-overload]
    return float(np.clip(r, -1.0, 1.0))


def spearman(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Spearman's rho (average ranks for ties) and scipy's two-sided p-value (exact
    permutation p-value for n <= :data:`EXACT_MAX_N`)."""
    xs, ys = paired_finite(x, y)
    if _degenerate(xs, ys, 3):
        return NAN_RESULT
    res = stats.spearmanr(xs, ys)
    if xs.size > EXACT_MAX_N:
        return float(res.statistic), float(res.pvalue)
    # ranks are fixed under re-pairing, so rho of every pairing is Pearson on the ranks
    return float(res.statistic), exact_linear_p(stats.rankdata(xs), stats.rankdata(ys))


def _kendall(x: np.ndarray, y: np.ndarray, variant: Literal["b", "c"]) -> tuple[float, float]:
    xs, ys = paired_finite(x, y)
    if _degenerate(xs, ys, 2):
        return NAN_RESULT
    with warnings.catch_warnings():
        # scipy warns when its exact p-value method falls back; the value itself is unaffected.
        warnings.simplefilter("ignore", RuntimeWarning)
        res = stats.kendalltau(xs, ys, variant=variant)
    p = exact_kendall_p(xs, ys) if xs.size <= EXACT_MAX_N else float(res.pvalue)
    return float(res.statistic), p


def kendall_b(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Kendall's tau-b (ties corrected) as scipy.stats.kendalltau(variant='b')."""
    return _kendall(x, y, "b")


def kendall_c(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Stuart's tau-c as scipy.stats.kendalltau(variant='c')."""
    return _kendall(x, y, "c")


def _check_kendall_like_settings(metric_ties: str, human_margin: float, margin_rule: str) -> None:
    if metric_ties not in METRIC_TIES:
        raise ValueError(f"metric_ties must be one of {METRIC_TIES}, got {metric_ties!r}")
    if margin_rule not in MARGIN_RULES:
        raise ValueError(f"margin_rule must be one of {MARGIN_RULES}, got {margin_rule!r}")
    if not (isinstance(human_margin, int | float) and math.isfinite(human_margin)):
        raise ValueError(f"human_margin must be a finite number, got {human_margin!r}")
    if human_margin < 0:
        raise ValueError(f"human_margin must be >= 0, got {human_margin!r}")


def kendall_like_counts(
    metric: np.ndarray,
    human: np.ndarray,
    *,
    metric_ties: MetricTies = "discordant",
    human_margin: float = 0.0,
    margin_rule: MarginRule = "above",
) -> tuple[np.ndarray, np.ndarray]:
    """Concordant and discordant system pairs inside each item, shape ``(n_items,)`` each.

    A pair of systems with finite scores counts where the human scores differ by more than
    ``human_margin`` (the default, ``margin_rule="above"``: pairs the humans tie are left out, as
    WMT's DARR does), or by at least ``human_margin`` with ``margin_rule="at_least"``, which is
    mt-metrics-eval's ``KendallLike(thresh=human_margin)`` (its default 25 on DA's 0-100 scale;
    with 0 every human tie counts, as discordant). It is concordant when
    the metric orders it as the humans do, else discordant, including a metric tie (it failed to
    separate what humans separated; ``metric_ties="skip"`` leaves those out) and a counted human
    tie.
    """
    m, h = check_matrices(metric, human)
    _check_kendall_like_settings(metric_ties, human_margin, margin_rule)
    ok = np.isfinite(m) & np.isfinite(h)
    # (items, systems, systems) pair tensors; items are columns of the score matrix.
    mt, ht, okt = m.T, h.T, ok.T
    dm = mt[:, :, None] - mt[:, None, :]
    dh = ht[:, :, None] - ht[:, None, :]
    valid = okt[:, :, None] & okt[:, None, :]
    valid &= np.triu(np.ones((m.shape[0], m.shape[0]), dtype=bool), k=1)[None]
    conc, disc = kendall_like_classes(
        dm, dh, metric_ties=metric_ties, human_margin=human_margin, margin_rule=margin_rule
    )
    concordant = (valid & conc).sum(axis=(1, 2))
    discordant = (valid & disc).sum(axis=(1, 2))
    return concordant.astype(float), discordant.astype(float)


def kendall_like(metric: np.ndarray, human: np.ndarray, **settings: Any) -> tuple[float, float]:
    """WMT segment-level Kendall-like tau, pooled over all items of two score matrices.

    ``(C - D) / (C + D)`` summed over every item's pairs (:func:`kendall_like_counts`, with its
    ``settings``); p is NaN.
    Constant input or no countable pair gives NaN (mt-metrics-eval: its tau, or 0; see README).
    """
    m, h = check_matrices(metric, human)
    ok = np.isfinite(m) & np.isfinite(h)
    if is_constant(m[ok]) or is_constant(h[ok]):
        return NAN_RESULT
    c, d = kendall_like_counts(m, h, **settings)
    total = c.sum() + d.sum()
    if total == 0:
        return NAN_RESULT
    return float((c.sum() - d.sum()) / total), float("nan")


def pairwise_accuracy(
    metric: np.ndarray, human: np.ndarray, *, human_ties: HumanTies = "count"
) -> tuple[float, float]:
    """System-level pairwise ranking accuracy (Kocmi et al. 2021) of two ``(n_systems,)`` vectors.

    The share of system pairs whose differences have the same sign on both sides (a tie on one
    side only disagrees). ``human_ties="count"`` takes every pair (mt-metrics-eval's
    ``Agreement``); ``"skip"``, paraeval's earlier rule, leaves out human ties. NaN systems are
    dropped; under 2 systems gives NaN. No p-value: NaN.
    """
    if human_ties not in HUMAN_TIES:
        raise ValueError(f"human_ties must be one of {HUMAN_TIES}, got {human_ties!r}")
    xs, ys = paired_finite(metric, human)
    if xs.size < 2 or (human_ties == "skip" and _degenerate(xs, ys, 2)):
        return NAN_RESULT
    dx = np.sign(xs[:, None] - xs[None, :])
    dy = np.sign(ys[:, None] - ys[None, :])
    upper = np.triu(np.ones((xs.size, xs.size), dtype=bool), k=1)
    counted = upper & (dy != 0) if human_ties == "skip" else upper
    total = int(counted.sum())
    if total == 0:
        return NAN_RESULT
    return float((counted & (dx == dy)).sum() / total), float("nan")


# Kendall-like's forms for the bootstrap (``Coefficient.segment_resampled``: every resample of a
# set) and the permutation test (``segment_batch``: a batch of permuted metric matrices)


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
    gm, gh = Groups(m[ok]), Groups(h[ok])
    c0, d0 = kendall_like_counts(m, h, **settings)
    for sl, _, item_w in item_blocks(res, n_items, chunks(b, n_sys * n_sys * n_items)):
        k = sl.stop - sl.start
        cw = cell_weights(item_w, sys_w[sl] if sys_w is not None else None, k, ci, cs)
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


def kendall_like_segment_batch(
    metric: np.ndarray, human: np.ndarray, **settings: Any
) -> np.ndarray:
    """The WMT Kendall-like tau pooled over items of each matrix of a batch ``metric`` (K, S, I)
    that shares the NaN pattern of ``human`` (S, I)."""
    k, n_sys, n_items = metric.shape
    out = np.empty(k)
    ok = np.isfinite(human)
    w = ok.T.astype(float)
    for sl in chunks(k, n_items * n_sys * n_sys):
        c, d = pair_kendall_like_counts(metric[sl].transpose(0, 2, 1), human.T[None], w, **settings)
        cc, dd = c.sum(1), d.sum(1)
        const = _rows_constant(metric[sl][:, ok]) | _rows_constant(human[ok][None])
        with np.errstate(invalid="ignore", divide="ignore"):
            out[sl] = np.where(const | (cc + dd == 0), np.nan, (cc - dd) / (cc + dd))
    return out


def _rows_constant(x: np.ndarray) -> np.ndarray:
    return (
        np.asarray(x.min(axis=-1) >= x.max(axis=-1)) if x.shape[-1] else np.ones(x.shape[0], bool)
    )


PEARSON = Coefficient(
    "pearson",
    pearson,
    weighted=weighted_pearson,
    pooled=FixedPairs.pearson,
    pooled_by_items=FixedPairs.pearson_by_items,
    statistic=pearson_statistic,
)
SPEARMAN = Coefficient(
    "spearman",
    spearman,
    weighted=weighted_spearman,
    pooled=FixedPairs.spearman,
    pooled_by_items=FixedPairs.spearman_by_items,
    ordinal=True,
)
KENDALL_B = Coefficient(
    "kendall_b",
    kendall_b,
    weighted=weighted_kendall_b,
    pooled=partial(FixedPairs.kendall, variant="b"),
    pooled_by_items=FixedPairs.kendall_b_by_items,
    ordinal=True,
)
KENDALL_C = Coefficient(
    "kendall_c",
    kendall_c,
    weighted=weighted_kendall_c,
    pooled=partial(FixedPairs.kendall, variant="c"),
    ordinal=True,
)


def kendall_like_coefficient(
    *,
    human_margin: float = 0.0,
    margin_rule: MarginRule = "above",
    metric_ties: MetricTies = "discordant",
) -> Coefficient:
    """The ``kendall_like`` entry with these settings (see :func:`kendall_like_counts`): system
    pairs inside items, pooled over all items (segment level) or one value per item (item
    level)."""
    _check_kendall_like_settings(metric_ties, human_margin, margin_rule)
    settings: dict[str, Any] = {
        "human_margin": float(human_margin),
        "margin_rule": margin_rule,
        "metric_ties": metric_ties,
    }
    return Coefficient(
        "kendall_like",
        partial(kendall_like, **settings),
        levels=("segment", "item"),
        vector=False,
        weighted=partial(weighted_kendall_like, **settings),
        segment_resampled=partial(kendall_like_segment_values, **settings),
        segment_batch=partial(kendall_like_segment_batch, **settings),
        williams=False,
        options=tuple(sorted(settings.items())),
        ordinal=True,
    )


def pairwise_accuracy_coefficient(*, human_ties: HumanTies = "count") -> Coefficient:
    """The ``pairwise_accuracy`` entry with these settings (see :func:`pairwise_accuracy`): it
    orders systems, so only the system level has anything to order."""
    if human_ties not in HUMAN_TIES:
        raise ValueError(f"human_ties must be one of {HUMAN_TIES}, got {human_ties!r}")
    return Coefficient(
        "pairwise_accuracy",
        partial(pairwise_accuracy, human_ties=human_ties),
        levels=("system",),
        weighted=partial(weighted_accuracy, human_ties=human_ties),
        williams=False,
        options=(("human_ties", human_ties),),
    )
