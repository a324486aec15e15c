"""Is metric A's correlation with a human score significantly higher than metric B's?

- :func:`williams_test`: Williams' (1959) t-test for two dependent correlations that share one
  variable (the human score), in the form used for MT metrics by Graham & Baldwin (2014).
- :func:`permutation_test`: the paired permutation test of Deutsch et al. (2021): both metrics are
  z-scored, then inside each resampling unit the two metrics' scores are swapped with probability
  0.5, and the difference of correlations is recomputed.
- :func:`significance_clusters`: mt-metrics-eval style ranks ("significance clusters").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from scipy import special

from paraeval.correlation.fixed_pairs import FixedPairs
from paraeval.correlation.levels import (
    check_item_rules,
    check_level_coefficient,
    correlate,
    item_values,
    item_weights,
)
from paraeval.correlation.resamples import CHUNK_ELEMENTS, chunks
from paraeval.correlation.values import (
    Coefficient,
    CoefficientLike,
    Memo,
    check_matrices,
    row_nanmean,
)
from paraeval.correlation.weighted import pair_statistic

ALTERNATIVES: tuple[str, ...] = ("two-sided", "greater")
METHODS: tuple[str, ...] = ("williams", "permutation")
PERMUTATION_UNITS: tuple[str, ...] = ("items", "systems", "both", "cells", "pairs")
"""What one permutation swaps between the two metrics: whole item columns (Perm-Inputs), whole
system rows (Perm-Systems), system rows and then item columns (Perm-Both of Deutsch et al. 2021
and nlpstats: a cell ends up swapped when exactly one of its row and column was), every cell
on its own (mt-metrics-eval's ``PermutationSigDiff`` on pooled scores), or every pair of systems
inside an item, each metric keeping its own tie threshold (mt-metrics-eval's
``PairwisePermutationSigDiff``; item-level coefficients over pairs: acc23, tau_23)."""


@dataclass(frozen=True)
class EarlyStop:
    """mt-metrics-eval's early stopping of a permutation test: after every ``block_size``
    permutations the test stops when the p-value so far is below ``early_min`` (clearly
    significant) or above ``early_max`` (clearly not). The permutations are drawn as without
    it, so the blocks run are the same draws as the first blocks of the full test."""

    block_size: int = 100
    early_min: float = 0.02
    early_max: float = 0.5

    def __post_init__(self) -> None:
        size = self.block_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"block_size must be an integer >= 1, got {self.block_size!r}")
        if not 0.0 <= self.early_min <= self.early_max <= 1.0:
            raise ValueError(
                "early stopping needs 0 <= early_min <= early_max <= 1, got "
                f"{self.early_min!r} and {self.early_max!r}"
            )


def check_test(method: str, level: str, coefficient: Coefficient, unit: str) -> None:
    """``ValueError`` saying what to use instead where ``method`` (:data:`METHODS`) cannot
    compare two metrics' ``coefficient`` at ``level`` (with ``unit`` for a permutation test)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if method == "williams" and not coefficient.williams:
        raise ValueError(
            "Williams' test compares two dependent correlation coefficients (Pearson-like); "
            f"{coefficient.name!r} is not one: use method=permutation for it"
        )
    if method == "williams" and level == "item":
        raise ValueError(
            "Williams' test needs one correlation over n paired observations; the item level "
            "averages per-item correlations: use method=permutation there"
        )
    if method == "williams":
        return
    if unit not in PERMUTATION_UNITS:
        raise ValueError(
            f"unknown permutation unit {unit!r}; valid units: {', '.join(PERMUTATION_UNITS)}"
        )
    if unit == "pairs" and (level != "item" or coefficient.pair_values is None):
        raise ValueError(
            "unit=pairs swaps pairs of systems inside items: it needs the item level and a "
            f"coefficient over such pairs (acc23, tau_23), not {coefficient.name!r} at the "
            f"{level} level"
        )


def williams_test(r12: float, r13: float, r23: float, n: int) -> float:
    """One-sided p-value that r12 > r13, where 1 is the human score and 2, 3 are two metrics.

    Williams' t with n - 3 degrees of freedom (Graham & Baldwin 2014, eq. 1)::

        t = (r12 - r13) sqrt((n - 1)(1 + r23))
            / sqrt(2 K (n - 1)/(n - 3) + ((r12 + r13)^2 / 4)(1 - r23)^3)
        K = 1 - r12^2 - r13^2 - r23^2 + 2 r12 r13 r23

    NaN where a correlation is NaN or n <= 3. Two identical metrics (r23 = 1, r12 = r13) give 0.5:
    the data carry no evidence either way.
    """
    if n <= 3 or not all(math.isfinite(v) for v in (r12, r13, r23)):
        return float("nan")
    k = 1.0 - r12 * r12 - r13 * r13 - r23 * r23 + 2.0 * r12 * r13 * r23
    denom = 2.0 * k * (n - 1) / (n - 3) + ((r12 + r13) ** 2 / 4.0) * (1.0 - r23) ** 3
    num = (r12 - r13) * math.sqrt((n - 1) * (1.0 + r23))
    if denom <= 0.0:
        return 0.5 if num == 0.0 else float("nan")
    t = num / math.sqrt(denom)
    # stats.t.sf(t, n - 3) is this function behind argument checks that cost more than it; a
    # run tests hundreds of pairs
    return float(special.stdtr(n - 3, -t))


def _standardize(a: np.ndarray) -> np.ndarray:
    ok = np.isfinite(a)
    if not ok.any():
        return a
    sd = float(a[ok].std())
    return (a - float(a[ok].mean())) / (sd if sd > 0 else 1.0)


def _batch_statistic(
    metric: np.ndarray,
    human: np.ndarray,
    level: str,
    coefficient: Coefficient,
    item_nan: str,
    system_metric: np.ndarray | None = None,
    weights: np.ndarray | None = None,
    memo: Memo | None = None,
) -> np.ndarray:
    """The correlation of each matrix of a batch ``metric`` (K, S, I) with ``human`` (S, I).

    All matrices share the NaN pattern of ``human``; ``system_metric`` (K, S) replaces the row
    means at the system level; ``memo``: shared by the batches of one test.
    """
    k, n_sys, n_items = metric.shape
    out = np.empty(k)
    if level == "segment":
        # coefficients with a pooled form use the stacked-data path and do not come here
        if coefficient.segment_batch is not None:
            return coefficient.segment_batch(metric, human)
        return np.array([correlate(mk, human, level, coefficient).value for mk in metric])

    if level == "item" and coefficient.item_level is not None:
        return np.array([correlate(mk, human, level, coefficient).value for mk in metric])

    if level == "item":
        w = np.isfinite(human).T.astype(float)
        for sl in chunks(k, n_items * n_sys * n_sys):
            v = pair_statistic(coefficient, metric[sl].transpose(0, 2, 1), human.T[None], w)
            out[sl] = _item_mean(v, item_nan, weights)
        return out

    if coefficient.matrix_system is not None:
        return np.asarray(coefficient.matrix_system(metric, human, {} if memo is None else memo))
    x = system_metric if system_metric is not None else row_nanmean(metric)
    y = row_nanmean(human)
    for sl in chunks(k, n_sys * n_sys):
        out[sl] = pair_statistic(coefficient, x[sl], y[None], 1.0)
    return out


def _item_mean(v: np.ndarray, item_nan: str, weights: np.ndarray | None = None) -> np.ndarray:
    """Mean over the last axis under the item-level NaN rule (see correlation.levels), each item
    weighted by ``weights`` (micro averaging) where given."""
    defined = np.isfinite(v)
    w = np.ones(v.shape[-1]) if weights is None else weights
    total = (w * np.where(defined, v, 0.0)).sum(axis=-1)
    count = w.sum() if item_nan == "zero" else (w * defined).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(total / count)


def permutation_test(
    metric_a: np.ndarray,
    metric_b: np.ndarray,
    human: np.ndarray,
    level: str,
    coefficient: CoefficientLike,
    *,
    rng: np.random.Generator,
    n_resamples: int = 1000,
    unit: str = "items",
    alternative: str = "two-sided",
    item_nan: str = "skip",
    item_average: str = "macro",
    system_metric_a: np.ndarray | None = None,
    system_metric_b: np.ndarray | None = None,
    early_stop: EarlyStop | None = None,
    null_draws: list[np.ndarray] | None = None,
) -> float:
    """Paired permutation test of corr(A, human) - corr(B, human) (Deutsch et al. 2021).

    Only cells where both metrics and the human score exist are used. Both metrics are z-scored
    over them (so that swapping scores between scales is meaningful; every coefficient here is
    invariant to it), then each permutation swaps A and B inside every unit of
    :data:`PERMUTATION_UNITS` with probability 0.5. At the system level the scores are the means of
    the z-scored segment scores, or, with ``system_metric_a/b`` and ``unit="systems"``, those
    corpus scores z-scored over systems (they cannot be rebuilt after swapping items).

    p = (1 + #{|d*| >= |d|}) / (1 + K) (``"two-sided"``) or (1 + #{d* >= d}) / (1 + K)
    (``"greater"``: A is better), K the permutations with a defined difference; the +1 counts the
    observed assignment, so p is never 0 (mt-metrics-eval reports #/K). A metric tested against
    itself gets p = 1. ``early_stop`` stops at a block boundary once the answer is clear
    (:class:`EarlyStop`); None runs all ``n_resamples``. ``null_draws``, a list the caller owns,
    receives the K differences d* counted (one array per block).
    """
    coef = check_level_coefficient(level, coefficient)
    check_test("permutation", level, coef, unit)
    if alternative not in ALTERNATIVES:
        raise ValueError(
            f"alternative must be one of {', '.join(ALTERNATIVES)}, got {alternative!r}"
        )
    check_item_rules(item_nan, item_average)
    a, h = check_matrices(metric_a, human)
    b, _ = check_matrices(metric_b, human)
    ok = np.isfinite(a) & np.isfinite(b) & np.isfinite(h)
    if int(ok.sum()) < 2:
        return float("nan")
    a = _standardize(np.where(ok, a, np.nan))
    b = _standardize(np.where(ok, b, np.nan))
    h = np.where(ok, h, np.nan)
    n_sys, n_items = h.shape
    weights = item_weights(a, h, item_average) if item_average == "micro" else None
    if unit == "pairs" and coef.pair_values is not None:
        test = (rng, n_resamples, alternative, item_nan, early_stop, null_draws)
        return _pairs_test(coef.pair_values, a, b, h, *test)

    sys_a = sys_b = None
    if level == "system" and (system_metric_a is not None or system_metric_b is not None):
        if system_metric_a is None or system_metric_b is None:
            raise ValueError("pass system-level scores for both metrics or for neither")
        if unit != "systems":
            raise ValueError(
                "corpus-level system scores can only be permuted by system (unit='systems')"
            )
        sys_a = _standardize(np.asarray(system_metric_a, dtype=float).ravel())
        sys_b = _standardize(np.asarray(system_metric_b, dtype=float).ravel())

    pooled: FixedPairs | None = None
    pooled_fn = coef.pooled if coef.vector else None
    if level == "segment" and pooled_fn is not None:
        # The permuted metric takes each cell from A or from B, so it is a 0/1-weighted subset
        # of the fixed stacked data [A; B] against [human; human]; the bootstrap's vectorised
        # weighted coefficients then score all permutations at once (O(n log n) for Kendall).
        pooled = FixedPairs(np.concatenate([a[ok], b[ok]]), np.concatenate([h[ok], h[ok]]))

    per_item: tuple[np.ndarray, np.ndarray] | None = None
    if level == "item" and unit == "items" and coef.item_level is None:
        # whole items swap, so every item keeps A's or B's own per-item value
        per_item = (item_values(a, h, coef), item_values(b, h, coef))
    elif level == "item" and unit == "items" and coef.item_values_fixed is not None:
        # a statistic of the whole matrix (one calibrated epsilon): each metric keeps the choice
        # made on its own scores (unit "pairs" swaps single pairs under the same rule)
        per_item = (coef.item_values_fixed(a, h), coef.item_values_fixed(b, h))

    memo: Memo = {}

    def deltas(mask: np.ndarray) -> np.ndarray:
        """Differences for swap masks broadcastable to (K, S, I); True = swapped."""
        if per_item is not None:
            va, vb = per_item
            swap = np.broadcast_to(mask[:, 0, :], (mask.shape[0], n_items))
            return _item_mean(np.where(swap, vb, va), item_nan, weights) - _item_mean(
                np.where(swap, va, vb), item_nan, weights
            )
        if pooled is not None and pooled_fn is not None:
            cells = np.broadcast_to(mask, (mask.shape[0], n_sys, n_items))[:, ok]
            keep_a = np.concatenate([~cells, cells], axis=1).T.astype(np.int32)
            keep_b = np.ascontiguousarray(1 - keep_a)
            return np.asarray(pooled_fn(pooled, keep_a) - pooled_fn(pooled, keep_b))
        xa = np.where(mask, b[None], a[None])
        xb = np.where(mask, a[None], b[None])
        sa = sb = None
        if sys_a is not None and sys_b is not None:
            m2 = mask[:, :, 0]
            sa = np.where(m2, sys_b[None], sys_a[None])
            sb = np.where(m2, sys_a[None], sys_b[None])
        da = _batch_statistic(xa, h, level, coef, item_nan, sa, weights, memo)
        db = _batch_statistic(xb, h, level, coef, item_nan, sb, weights, memo)
        return np.asarray(da - db)

    observed = float(deltas(np.zeros((1, 1, 1), dtype=bool))[0])
    if not math.isfinite(observed):
        return float("nan")
    per = 2 * int(ok.sum()) if pooled is not None else 4 * n_sys * n_items
    if unit == "both":
        # Perm-Both: swap whole systems, then whole items of the result; a cell is swapped when
        # exactly one of the two swaps touched it. Every system swap is drawn before any item
        # swap, as one call each would draw them
        systems = _swaps(rng, (n_resamples, n_sys, 1))
        items = _Draws(lambda k: _swaps(rng, (k, 1, n_items)), n_resamples, n_items)
        draws = items

        def mask_rows(rows: slice) -> np.ndarray:
            return systems[rows] ^ items.take(rows)
    else:
        shape = {"items": (1, n_items), "systems": (n_sys, 1), "cells": (n_sys, n_items)}[unit]
        draws = _Draws(lambda k: _swaps(rng, (k, *shape)), n_resamples, shape[0] * shape[1])
        mask_rows = draws.take

    rule = (alternative, early_stop, draws.finish, null_draws)
    return _p_value(observed, n_resamples, lambda rows: deltas(mask_rows(rows)), per, *rule)


class _Draws:
    """The rows of one random draw (``draw(k)`` makes the next ``k`` rows), made when the test
    reaches them, in order: a generator's draws of doubles, and of binomials, continue from one
    call to the next, so they are the rows one call for all of them would make. :meth:`finish`
    draws the rows never reached (a test stopped early), so that the generator ends in the state
    the one call leaves it in, and the tests after it draw what they drew before."""

    def __init__(self, draw: Callable[[int], np.ndarray], n_rows: int, per_row: int) -> None:
        self.draw, self.n_rows, self.done = draw, n_rows, 0
        self.step = max(1, CHUNK_ELEMENTS // max(per_row, 1))

    def take(self, rows: slice) -> np.ndarray:
        if rows.start != self.done:
            raise RuntimeError("permutations are drawn in order")
        self.done = rows.stop
        return self.draw(rows.stop - rows.start)

    def finish(self) -> None:
        while self.done < self.n_rows:
            k = min(self.step, self.n_rows - self.done)
            self.draw(k)
            self.done += k


def _swaps(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """``rng.random(shape) < 0.5`` without the doubles of the whole shape: a block of rows at a
    time (the same numbers: see :class:`_Draws`)."""
    out = np.empty(shape, dtype=bool)
    per_row = int(np.prod(shape[1:]))
    for sl in chunks(shape[0], per_row):
        out[sl] = rng.random((sl.stop - sl.start, *shape[1:])) < 0.5
    return out


def permutation_nbytes(n_resamples: int, n_systems: int, n_items: int, unit: str) -> int:
    """Peak bytes of :func:`permutation_test`'s permutations (the estimate the config check
    uses): the system swaps of Perm-Both held whole, every difference (float64), and a block of
    drawn swaps with its working copies (a few float64 arrays of ``CHUNK_ELEMENTS``)."""
    held = n_resamples * (n_systems if unit == "both" else 0) + 16 * n_resamples
    return held + 8 * 8 * CHUNK_ELEMENTS


def _p_value(
    observed: float,
    n_resamples: int,
    deltas: Callable[[slice], np.ndarray],
    per_row: int,
    alternative: str,
    early_stop: EarlyStop | None,
    finish: Callable[[], None],
    null_draws: list[np.ndarray] | None,
    align: int = 1,
) -> float:
    """The permutation p-value from the differences ``deltas(rows)`` of the permutations in
    ``rows``, block by block when stopping early; ``finish()`` after the last block run. Each
    block is taken a few rows at a time (:func:`chunks` of ``per_row`` elements, ``align``), the
    swaps drawn as they are reached: memory bounded whatever n_resamples."""
    # a tolerance so that rounding in a recomputed but mathematically equal difference counts
    tol = 1e-12
    size = early_stop.block_size if early_stop is not None else n_resamples
    extreme = used = 0
    for lo in range(0, n_resamples, size):
        parts = chunks(min(size, n_resamples - lo), per_row, align=align)
        d = np.concatenate([deltas(slice(lo + sl.start, lo + sl.stop)) for sl in parts])
        d = d[np.isfinite(d)]
        if null_draws is not None:
            null_draws.append(d)
        hits = (
            np.abs(d) >= abs(observed) - tol if alternative == "two-sided" else d >= observed - tol
        )
        extreme += int(hits.sum())
        used += d.size
        if early_stop is not None and used:
            p = (1 + extreme) / (1 + used)
            if p < early_stop.early_min or p > early_stop.early_max:
                break
    finish()
    return float((1 + extreme) / (1 + used))


def _pairs_test(
    pair_values: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]],
    a: np.ndarray,
    b: np.ndarray,
    h: np.ndarray,
    rng: np.random.Generator,
    n_resamples: int,
    alternative: str,
    item_nan: str,
    early_stop: EarlyStop | None,
    null_draws: list[np.ndarray] | None,
) -> float:
    """mt-metrics-eval's ``PairwisePermutationSigDiff``: every pair of systems inside an item
    takes A's or B's value (each under its own tie threshold) with probability 0.5.

    The difference of item-level means is a sum over pairs of ``share * (value_a - value_b)``,
    each term's sign flipped when its pair is swapped. Pairs with the same term are
    exchangeable, so the number of unswapped pairs in each group of equal terms is one binomial
    draw: the same distribution as flipping every pair, at the cost of a few groups."""
    item, va, per_item = pair_values(a, h)
    _, vb, _ = pair_values(b, h)
    if item.size == 0 or not (np.isfinite(va).all() and np.isfinite(vb).all()):
        return float("nan")
    n_used = int((per_item > 0).sum()) if item_nan == "skip" else per_item.size
    term = (va - vb) / (per_item[item] * n_used)
    observed = float(term.sum())
    values, counts = np.unique(term[term != 0], return_counts=True)
    draws = _Draws(
        lambda k: rng.binomial(counts, 0.5, size=(k, counts.size)), n_resamples, counts.size
    )

    def deltas(rows: slice) -> np.ndarray:
        return np.asarray((2 * draws.take(rows) - counts) @ values, dtype=float)

    # whole multiples of 256 rows: a block's product then equals those rows of one product
    rule = (alternative, early_stop, draws.finish, null_draws, 256)
    return _p_value(observed, n_resamples, deltas, counts.size, *rule)


def significance_clusters(
    values: Mapping[str, float],
    pvalues: Mapping[tuple[str, str], float],
    alpha: float = 0.05,
) -> dict[str, int]:
    """Rank metrics into significance clusters, as mt-metrics-eval's ``AssignRanks``.

    Walking down the metrics best first, one starts a new cluster when some member of the current
    cluster is significantly better (p <= alpha), else joins it. ``pvalues[(a, b)]`` is the
    p-value that a beats b (either key order is looked up; missing or NaN: not significant).
    Metrics with a NaN value get no cluster.
    """
    ranked = sorted(
        (m for m, v in values.items() if math.isfinite(v)), key=lambda m: -float(values[m])
    )
    clusters: dict[str, int] = {}
    rank, start = 1, 0
    for i, metric in enumerate(ranked):
        for above in ranked[start:i]:
            p = pvalues.get((above, metric), pvalues.get((metric, above), float("nan")))
            if math.isfinite(p) and p <= alpha:
                rank += 1
                start = i
                break
        clusters[metric] = rank
    return clusters
