"""Bootstrap confidence intervals for a correlation, vectorised over resamples.

A resample draws item columns, system rows, or both (``unit``); its value is exactly what
:func:`correlation.levels.correlate` returns on ``metric[sys_idx][:, item_idx]`` (the tests check
it), computed without building that matrix: a repeated cell is a weight, so the segment level is
one weighting of fixed pooled cells per resample (:class:`correlation.fixed_pairs.FixedPairs`),
and few values per unit use pair tensors ``(..., n, n)`` (:mod:`correlation.weighted`). Undefined
resampled values are NaN and left out of the percentiles.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from paraeval.correlation.catalog import get_coefficient
from paraeval.correlation.fixed_pairs import FixedPairs
from paraeval.correlation.levels import (
    check_item_rules,
    check_level_coefficient,
    correlate,
    item_values,
)
from paraeval.correlation.resamples import (
    Resamples,
    cell_weights,
    chunks,
    counts,
    draw_resamples,
    item_blocks,
    resampled_matrices,
)
from paraeval.correlation.values import (
    Coefficient,
    CoefficientLike,
    Memo,
    check_matrices,
    row_nanmean,
)
from paraeval.correlation.weighted import pair_statistic

SystemMetricFn = Callable[[np.ndarray], np.ndarray]


def _segment_values(
    m: np.ndarray, h: np.ndarray, coef: Coefficient, res: Resamples, memo: Memo | None
) -> np.ndarray:
    n_sys, n_items = m.shape
    b = res.n_resamples
    ok = np.isfinite(m) & np.isfinite(h)
    if not ok.any():
        return np.full(b, np.nan)
    found = coef.segment_resampled(m, h, res) if coef.segment_resampled is not None else None
    if found is not None:
        return np.asarray(found)
    if coef.pooled is None or not coef.vector:
        return explicit_values(m, h, "segment", coef, res)

    sys_w = counts(res.sys_idx, n_sys) if res.sys_idx is not None else None
    cs, ci = np.nonzero(ok)
    fixed = FixedPairs(m[ok], h[ok], n_resamples=b)
    if sys_w is None and res.item_idx is not None and coef.pooled_by_items is not None:
        values = np.full(b, np.nan)
        for sl, _, item_w in item_blocks(res, n_items, memo=memo):
            part = coef.pooled_by_items(fixed, ci, n_items, item_w)
            if part is None:
                break
            values[sl] = part
        else:
            return values
    out = np.full(b, np.nan)
    # small column blocks keep the (cells, resamples) working set in cache
    for sl, _, item_w in item_blocks(res, n_items, chunks(b, cs.size, 600_000), memo):
        sys_part = sys_w[sl] if sys_w is not None else None
        weights = cell_weights(item_w, sys_part, sl.stop - sl.start, ci, cs)
        out[sl] = coef.pooled(fixed, weights)
    return out


def explicit_values(
    m: np.ndarray, h: np.ndarray, level: str, coef: Coefficient, res: Resamples
) -> np.ndarray:
    """The generic path for a coefficient without a vectorised form: every resampled matrix is
    built and passed to :func:`correlation.levels.correlate`."""
    out = np.empty(res.n_resamples)
    for b, mb, hb in resampled_matrices(m, h, res):
        out[b] = correlate(mb, hb, level, coef).value
    return out


def _item_values(
    m: np.ndarray,
    h: np.ndarray,
    coefficient: Coefficient,
    res: Resamples,
    item_nan: str,
    item_average: str,
) -> np.ndarray:
    n_sys, n_items = m.shape
    b = res.n_resamples
    if coefficient.item_level is not None:
        if res.sys_idx is None and res.item_idx is not None:
            return coefficient.item_level(m, h, counts(res.item_idx, n_items))
        return explicit_values(m, h, "item", coefficient, res)
    if res.sys_idx is None:
        v = np.broadcast_to(item_values(m, h, coefficient), (b, n_items))
    else:
        v = np.empty((b, n_items))
        mt, ht = m.T, h.T  # (items, systems)
        for sl in chunks(b, n_items * n_sys * n_sys):
            idx = res.sys_idx[sl]
            xs = mt[:, idx].transpose(1, 0, 2)  # (k, items, systems)
            ys = ht[:, idx].transpose(1, 0, 2)
            v[sl] = pair_statistic(coefficient, xs, ys, np.ones(xs.shape))
    out = np.empty(b)
    # a block of resamples at a time: every row is summed on its own, so the blocks change no
    # number, and the (resamples x items) temporaries stay small
    for sl, _, iw in item_blocks(res, n_items):
        vb = v[sl]
        if iw is None:
            iw = np.ones(vb.shape)
        if item_average == "micro":
            # each item weighted by its scored systems, in the resample's own systems
            ok = (np.isfinite(m) & np.isfinite(h)).astype(float)
            if res.sys_idx is None:
                iw = iw * ok.sum(axis=0)
            else:
                iw = iw * ok.T[:, res.sys_idx[sl]].sum(axis=-1).T
        defined = np.isfinite(vb)
        num = (iw * np.where(defined, vb, 0.0)).sum(1)
        # "zero": undefined items stay in the denominator with value 0
        den = iw.sum(1) if item_nan == "zero" else (iw * defined).sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[sl] = np.where(den > 0, num / den, np.nan)
    return out


def _resampled_means(a: np.ndarray, item_w: np.ndarray) -> np.ndarray:
    ok = np.isfinite(a)
    num = np.einsum("bi,si->bs", item_w, np.where(ok, a, 0.0))
    # counts of integers: exact in any order, so the matrix product gives einsum's numbers
    den = item_w @ ok.T.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.maximum(den, 1e-300), np.nan)


def resampled_row_means(a: np.ndarray, res: Resamples) -> np.ndarray:
    """Each row's mean of its finite values on the items of every resample, shape (B, rows),
    before any resampling of the rows themselves (every resample the rows' own means where
    items are not resampled): the human side of :func:`system_resampled_scores`, the same for
    every metric, so that a caller with many metrics passes it in."""
    b = res.n_resamples
    if res.item_idx is None:
        return np.broadcast_to(row_nanmean(a), (b, a.shape[0]))
    out = np.empty((b, a.shape[0]))
    for sl, _, item_w in item_blocks(res, a.shape[1]):
        assert item_w is not None
        out[sl] = _resampled_means(a, item_w)
    return out


def system_resampled_scores(
    m: np.ndarray,
    h: np.ndarray,
    res: Resamples,
    system_metric: np.ndarray | None = None,
    system_metric_fn: SystemMetricFn | None = None,
    human_means: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-system metric and human scores of every resample, each (B, n_systems), the same for
    every coefficient. A ``system_metric_fn`` with a ``batch(item_idx) -> (B, n_systems)``
    attribute scores blocks of rows at once (a row must not depend on the others).
    ``human_means``: :func:`resampled_row_means` of ``h`` where the caller has it."""
    n_sys, n_items = m.shape
    b = res.n_resamples
    y = resampled_row_means(h, res) if human_means is None else human_means
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
        # a block of resamples at a time (rows are computed independently of each other, so
        # the same numbers): the item multiplicities of all resamples at once are 320 MB at
        # 40,000 items
        for sl, idx, item_w in item_blocks(res, n_items):
            assert idx is not None and item_w is not None
            if batch is not None:
                x[sl] = np.asarray(batch(idx), dtype=float).reshape(-1, n_sys)
            elif system_metric_fn is not None:
                x[sl] = np.stack([np.asarray(system_metric_fn(ix), dtype=float) for ix in idx])
            else:
                x[sl] = _resampled_means(m, item_w)
    else:
        if system_metric is not None:
            base = np.asarray(system_metric, dtype=float)
        elif system_metric_fn is not None:
            base = np.asarray(system_metric_fn(np.arange(n_items)), dtype=float)
        else:
            base = row_nanmean(m)
        x = np.broadcast_to(base, (b, n_sys))
    if res.sys_idx is not None:
        x = np.take_along_axis(x, res.sys_idx, axis=1)
        y = np.take_along_axis(y, res.sys_idx, axis=1)
    return x, y


def system_statistic(coefficient: CoefficientLike, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``coefficient`` between the rows of resampled system scores ``x`` and ``y``: shape (B,)."""
    coefficient = get_coefficient(coefficient)
    b, n_sys = x.shape
    out = np.empty(b)
    for sl in chunks(b, n_sys * n_sys):
        out[sl] = pair_statistic(coefficient, x[sl], y[sl], np.ones(x[sl].shape))
    return out


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
    item_average: str = "macro",
    memo: Memo | None = None,
) -> np.ndarray:
    """The correlation of every resample in ``resamples``, shape (B,); NaN where undefined.
    ``memo``: what a coefficient computes once for all the metrics that share ``resamples``
    (the caller passes one mapping to each of them; None keeps nothing)."""
    coef = check_level_coefficient(level, coefficient)
    check_item_rules(item_nan, item_average)
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
        return _segment_values(m, h, coef, resamples, memo)
    if level == "item":
        return _item_values(m, h, coef, resamples, item_nan, item_average)
    if coef.matrix_system_resampled is not None:
        return np.asarray(
            coef.matrix_system_resampled(m, h, resamples, {} if memo is None else memo)
        )
    if coef.matrix_system is not None:
        return explicit_values(m, h, "system", coef, resamples)
    x, y = system_resampled_scores(m, h, resamples, system_metric, system_metric_fn)
    return system_statistic(coef, x, y)


def bootstrap_distribution(
    metric: np.ndarray,
    human: np.ndarray,
    level: str,
    coefficient: CoefficientLike,
    *,
    rng: np.random.Generator,
    n_resamples: int = 1000,
    unit: str = "items",
    **options: Any,
) -> np.ndarray:
    """Bootstrap distribution (B values, NaN where a resample is undefined) of a correlation;
    ``options`` as :func:`resampled_values` takes them."""
    m, h = check_matrices(metric, human)
    res = draw_resamples(rng, m.shape[0], m.shape[1], n_resamples, unit)
    return resampled_values(m, h, level, coefficient, res, **options)


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
    **options: Any,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``correlate(metric, human, level, coefficient)``.

    ``unit`` resamples item columns (``"items"``), system rows (``"systems"``) or both. At the
    system level each resample recomputes the per-system scores from its items: the mean of the
    segment scores, or ``system_metric_fn(item_indices) -> (n_systems,)`` (corpus scores: BLEU);
    ``options``: as :func:`resampled_values`. Undefined resamples are left out."""
    values = bootstrap_distribution(
        metric, human, level, coefficient, rng=rng, n_resamples=n_resamples, unit=unit, **options
    )
    return percentile_interval(values, confidence)
