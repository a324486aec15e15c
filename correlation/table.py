"""The two tables the pipeline writes: every correlation with its interval, and pairwise tests.

Both take ``metrics`` (name -> ``(n_systems, n_items)`` matrix) and ``humans`` (aspect -> matrix of
the same shape) and return plain rows (dicts) ready for a CSV writer.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import xxhash

from paraeval.blas import on_one_blas_thread
from paraeval.correlation.bootstrap import (
    Resamples,
    SystemMetricFn,
    draw_resamples,
    is_segment_mean,
    percentile_interval,
    resampled_values,
    system_resampled_scores,
    system_statistic,
)
from paraeval.correlation.coefficients import Coefficient, CoefficientLike, get_coefficient
from paraeval.correlation.levels import (
    LEVELS,
    UNITS,
    check_level_coefficient,
    check_matrices,
    correlate,
    system_scores,
    valid_combination,
)
from paraeval.correlation.significance import permutation_test, significance_clusters, williams_test
from paraeval.memo import Memo, array_key

CORRELATION_COLUMNS: tuple[str, ...] = (
    "metric",
    "aspect",
    "level",
    "coefficient",
    "value",
    "ci_low",
    "ci_high",
    "p_value",
    "n",
    "n_dropped",
)
SIGNIFICANCE_COLUMNS: tuple[str, ...] = (
    "aspect",
    "level",
    "coefficient",
    "metric_a",
    "metric_b",
    "r_a",
    "r_b",
    "p_value",
    "method",
    "cluster_a",
    "cluster_b",
)
METHODS: tuple[str, ...] = ("williams", "permutation")
INTERVALS: tuple[str, ...] = ("bootstrap", "fisher")

# Bonett & Wright (2000) as nlpstats' ``fisher``: z = atanh(r) has standard error c / sqrt(n - b)
_FISHER: dict[str, tuple[float, bool]] = {
    "pearson": (3.0, False),
    "spearman": (3.0, True),
    "kendall_b": (4.0, False),
}


def fisher_interval(
    r: float, n: int, coefficient: str, confidence: float = 0.95
) -> tuple[float, float]:
    """Fisher z interval of a correlation ``r`` on ``n`` pairs (nlpstats' ``fisher``).

    ``tanh(atanh(r) -+ z_{1-alpha/2} c / sqrt(n - b))`` with b = 3, c = 1 for Pearson; b = 3,
    c = sqrt(1 + r^2 / 2) for Spearman; b = 4, c = sqrt(0.437) for Kendall's tau-b. NaN for
    other coefficients, for n <= b and for a NaN r.
    """
    from scipy import stats

    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if coefficient not in _FISHER or not math.isfinite(r):
        return float("nan"), float("nan")
    b, spearman_c = _FISHER[coefficient]
    if n <= b:
        return float("nan"), float("nan")
    c = math.sqrt(1.0 + r * r / 2.0) if spearman_c else (math.sqrt(0.437) if b == 4.0 else 1.0)
    z = float(stats.norm.ppf(1.0 - (1.0 - confidence) / 2.0))
    with np.errstate(divide="ignore"):
        zr = float(np.arctanh(r))
    half = z * c / math.sqrt(n - b)
    return float(np.tanh(zr - half)), float(np.tanh(zr + half))


def _fisher_n(metric: np.ndarray, human: np.ndarray, level: str, n: int) -> int:
    """The n of the Fisher interval: the pairs at the segment and system levels; at the item
    level (a mean of per-item values) the largest number of systems in one item, as nlpstats."""
    if level != "item":
        return n
    ok = np.isfinite(metric) & np.isfinite(human)
    return int(ok.sum(axis=0).max(initial=0))


def _shape(metrics: Mapping[str, np.ndarray], humans: Mapping[str, np.ndarray]) -> tuple[int, int]:
    if not metrics or not humans:
        raise ValueError("need at least one metric and one human aspect")
    shapes = {name: np.shape(a) for name, a in [*metrics.items(), *humans.items()]}
    first = next(iter(shapes.values()))
    odd = {name: s for name, s in shapes.items() if s != first or len(s) != 2}
    if odd:
        raise ValueError(
            f"all score matrices must share one (n_systems, n_items) shape {first}; "
            f"differing: {odd}"
        )
    return first[0], first[1]


def draw_table_resamples(
    rng: np.random.Generator,
    n_aspects: int,
    levels: Sequence[str],
    coefficients: Sequence[CoefficientLike],
    n_sys: int,
    n_items: int,
    n_resamples: int,
    unit: str,
    ci: bool = True,
) -> list[tuple[int, str, list[Coefficient], Resamples | None]]:
    """The resamples :func:`correlation_table` uses, one set per (aspect index, level), drawn in
    its fixed order before any work starts (the rows do not depend on workers). A caller that
    serves every row from a cache calls this to leave ``rng`` in the state the table would."""
    coefs = [get_coefficient(c) for c in coefficients]
    out: list[tuple[int, str, list[Coefficient], Resamples | None]] = []
    for k in range(n_aspects):
        for level in levels:
            combos = [c for c in coefs if valid_combination(level, c)]
            if not combos:
                continue
            res = draw_resamples(rng, n_sys, n_items, n_resamples, unit) if ci else None
            out.append((k, level, combos, res))
    return out


@on_one_blas_thread
def correlation_table(
    metrics: Mapping[str, np.ndarray],
    humans: Mapping[str, np.ndarray],
    *,
    levels: Sequence[str] = ("segment", "system"),
    coefficients: Sequence[CoefficientLike] = ("pearson", "spearman", "kendall_b"),
    system_metrics: Mapping[str, np.ndarray] | None = None,
    ci: bool = True,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    unit: str = "items",
    item_nan: str = "skip",
    rng: np.random.Generator,
    system_metric_fns: Mapping[str, SystemMetricFn] | None = None,
    workers: int | None = None,
    interval: str = "bootstrap",
) -> list[dict[str, Any]]:
    """One row per (metric, aspect, level, coefficient) with columns :data:`CORRELATION_COLUMNS`.

    ``coefficients`` are registered names, :class:`Coefficient` objects or callables
    ``(x, y) -> (value, p)``. Level/coefficient pairs that are not defined
    (``Coefficient.levels``: ``pairwise_accuracy`` below the system level, ``kendall_like`` at the
    system level) are skipped. ``system_metrics[name]`` is the metric's
    corpus-level score per system, used at the system level; when items are resampled and it is
    not the plain segment mean, ``system_metric_fns[name](item_indices)`` must recompute it.

    All metrics and coefficients of one (aspect, level) share the same resamples, so their
    intervals are paired. ``ci=False`` leaves ``ci_low``/``ci_high`` NaN and draws nothing.
    ``interval="fisher"`` gives Fisher z intervals (:func:`fisher_interval`; Pearson, Spearman
    and Kendall's tau-b only, NaN for the others) and draws nothing either.
    ``workers`` threads (default: up to 4 CPUs) compute metrics in parallel; the rows are the
    same for any number of workers.
    """
    n_sys, n_items = _shape(metrics, humans)
    for level in levels:
        if level not in LEVELS:
            raise ValueError(f"unknown correlation level {level!r}; valid levels: {LEVELS}")
    for coefficient in coefficients:
        check_level_coefficient("segment", coefficient, combination=False)
    if unit not in UNITS:
        raise ValueError(f"unknown resampling unit {unit!r}; valid units: {', '.join(UNITS)}")
    if interval not in INTERVALS:
        raise ValueError(f"unknown interval {interval!r}; valid intervals: {', '.join(INTERVALS)}")
    fisher = ci and interval == "fisher"
    system_metrics = system_metrics or {}
    system_metric_fns = system_metric_fns or {}

    if workers is None:
        workers = min(4, os.cpu_count() or 1)
    # order-only rows on segments and items, kept by the order of the metric's scores
    ordinal_levels = [lv for lv in levels if lv in _ORDINAL_LEVELS]
    ordinal = bool(ordinal_levels) and any(get_coefficient(c).ordinal for c in coefficients)
    order_keys = {name: order_key(m) for name, m in metrics.items()} if ordinal else {}
    human_keys = {a: array_key(h) for a, h in humans.items()} if ordinal else {}

    def metric_rows(
        name: str,
        aspect: str,
        human: np.ndarray,
        level: str,
        combos: list[Coefficient],
        res: Resamples | None,
    ) -> list[dict[str, Any]]:
        metric = metrics[name]
        sm = system_metrics.get(name) if level == "system" else None
        out = []
        # the resampled system scores are the same for every coefficient: recomputing corpus
        # scores per resample is the costly part, so it is done once
        xy = (
            system_resampled_scores(metric, human, res, sm, system_metric_fns.get(name))
            if res is not None and level == "system"
            else None
        )
        for coefficient in combos:
            key: tuple[Any, ...] | None = None
            if ordinal and coefficient.ordinal and level in _ORDINAL_LEVELS:
                key = (
                    order_keys[name],
                    human_keys[aspect],
                    _resamples_key(res),
                    level,
                    coefficient,
                    item_nan,
                    confidence,
                    fisher,
                )
                kept = _ORDINAL.get(key)
                if kept is not None:
                    out.append({"metric": name, "aspect": aspect, **kept})
                    continue
            corr = correlate(metric, human, level, coefficient, system_metric=sm, item_nan=item_nan)
            lo = hi = float("nan")
            if fisher:
                lo, hi = fisher_interval(
                    corr.value,
                    _fisher_n(metric, human, level, corr.n),
                    coefficient.name,
                    confidence,
                )
            elif xy is not None and coefficient.matrix_system is None:
                lo, hi = percentile_interval(system_statistic(coefficient, *xy), confidence)
            elif res is not None:
                values = resampled_values(
                    metric,
                    human,
                    level,
                    coefficient,
                    res,
                    system_metric=sm,
                    system_metric_fn=system_metric_fns.get(name),
                    item_nan=item_nan,
                )
                lo, hi = percentile_interval(values, confidence)
            out.append(
                {
                    "metric": name,
                    "aspect": aspect,
                    "level": level,
                    "coefficient": coefficient.name,
                    "value": corr.value,
                    "ci_low": lo,
                    "ci_high": hi,
                    "p_value": corr.p_value,
                    "n": corr.n,
                    "n_dropped": corr.n_dropped,
                }
            )
            if key is not None:
                row = out[-1]
                _ORDINAL.put(key, {k: v for k, v in row.items() if k not in ("metric", "aspect")})
        return out

    jobs: list[tuple[str, str, np.ndarray, str, list[Coefficient], Resamples | None]] = []
    drawn = draw_table_resamples(
        rng, len(humans), levels, coefficients, n_sys, n_items, n_resamples, unit, ci and not fisher
    )
    for k, level, combos, res in drawn:
        aspect, human = list(humans.items())[k]
        jobs.extend((name, aspect, human, level, combos, res) for name in metrics)
    if workers <= 1 or len(jobs) <= 1:
        parts = [metric_rows(*job) for job in jobs]
    else:
        # numpy releases the GIL inside the array kernels that dominate, so threads scale
        with ThreadPoolExecutor(max_workers=workers) as pool:
            parts = list(pool.map(lambda job: metric_rows(*job), jobs))
    return [row for part in parts for row in part]


# Rows of an ordinal coefficient (``Coefficient.ordinal``) by the order of the metric's scores,
# the human scores, the resamples and the settings: the jobs of an α sweep, whose iBLEU column and
# group average change values but rarely order, and a column that orders like another (iBLEU is
# (2α - 1) x BLEU where the references are the sources) compute these rows once per order.
_ORDINAL_LEVELS = ("segment", "item")
_ORDINAL: Memo[tuple[Any, ...], dict[str, Any]] = Memo(
    "correlation.ordinal_rows", max_entries=50_000
)


def order_key(matrix: np.ndarray) -> str:
    """An in-process key of the order of ``matrix``'s scores: where its NaN and infinite cells
    lie and the dense rank of every other cell. Two matrices share it exactly when one is a
    strictly increasing function of the other."""
    a = np.asarray(matrix, dtype=float)
    finite = np.isfinite(a)
    ranks = np.where(np.isnan(a), -1, np.where(a > 0, -2, -3)).astype(np.int64)
    ranks[finite] = np.unique(a[finite], return_inverse=True)[1]
    return array_key(ranks)


def _resamples_key(res: Resamples | None) -> tuple[Any, ...]:
    if res is None:
        return ()
    item = "" if res.item_idx is None else array_key(res.item_idx)
    system = "" if res.sys_idx is None else array_key(res.sys_idx)
    return (item, system, res.n_resamples)


def _williams_inputs(
    a: np.ndarray,
    b: np.ndarray,
    h: np.ndarray,
    level: str,
    coefficient: Coefficient,
    sys_a: np.ndarray | None,
    sys_b: np.ndarray | None,
    keys: tuple[str, str, str] | None = None,
) -> tuple[float, float, float, int]:
    """(r_a, r_b, r_ab, n) on the cells (or systems) where all three scores exist. ``keys``:
    the digests of a, b and h, for the memo of single correlations."""
    if level == "segment":
        ok = np.isfinite(a) & np.isfinite(b) & np.isfinite(h)
        if keys is not None and ok.all():
            # nothing masked: r_a and r_b are those of the whole matrices, shared by every pair
            ra = _memo_correlate(a, h, (keys[0], keys[2]), level, coefficient)
            rb = _memo_correlate(b, h, (keys[1], keys[2]), level, coefficient)
            return ra, rb, _segment_value(a, b, coefficient), int(ok.sum())
        a, b, h = (np.where(ok, v, np.nan) for v in (a, b, h))
        if keys is not None:
            # the cells left out are mostly the human's missing ratings, the same for every
            # pair: r_a and r_b recur across pairs, kept by the content of the matrices and mask
            mask = array_key(ok)
            ra = _memo_segment_value(a, h, (keys[0], keys[2], mask), coefficient)
            rb = _memo_segment_value(b, h, (keys[1], keys[2], mask), coefficient)
        else:
            ra = _segment_value(a, h, coefficient)
            rb = _segment_value(b, h, coefficient)
        rab = _segment_value(a, b, coefficient)
        return ra, rb, rab, int(ok.sum())
    xa, y = system_scores(a, h, sys_a)
    xb, _ = system_scores(b, h, sys_b)
    ok = np.isfinite(xa) & np.isfinite(xb) & np.isfinite(y)
    xa, xb, y = xa[ok][:, None], xb[ok][:, None], y[ok][:, None]
    # one item column: the system level is then the segment level of the per-system scores
    ra = _segment_value(xa, y, coefficient)
    rb = _segment_value(xb, y, coefficient)
    rab = _segment_value(xa, xb, coefficient)
    return ra, rb, rab, int(ok.sum())


def _segment_value(x: np.ndarray, y: np.ndarray, coefficient: Coefficient) -> float:
    """``correlate(x, y, "segment", coefficient).value``, from the coefficient's value-only
    form where it has one."""
    if coefficient.statistic is None or not coefficient.vector:
        return correlate(x, y, "segment", coefficient).value
    m, h = check_matrices(x, y)
    ok = np.isfinite(m) & np.isfinite(h)
    return float(coefficient.statistic(m[ok], h[ok]))


def _memo_segment_value(
    x: np.ndarray, y: np.ndarray, keys: tuple[str, str, str], coefficient: Coefficient
) -> float:
    """:func:`_segment_value` of ``x`` and ``y`` masked by ``keys[2]``'s mask, kept by the
    digests of the unmasked matrices and of the mask."""
    key = (keys[0], keys[1], f"segment|mask:{keys[2]}", coefficient, "")
    found = _SINGLE.get(key)
    if found is None:
        found = _SINGLE.put(key, _segment_value(x, y, coefficient))
    return found


# Williams inputs by the content of the three score matrices: the pairs of a sweep job whose two
# columns did not change since an earlier job in this process are not recomputed.
_WILLIAMS: Memo[tuple[str, str, str, str, Coefficient], tuple[float, float, float, int]] = Memo(
    "correlation.williams", max_entries=50_000
)


# single correlations by the content of their two matrices, with the same reuse across jobs
_SINGLE: Memo[tuple[str, str, str, Coefficient, str], float] = Memo(
    "correlation.single", max_entries=50_000
)


def _memo_correlate(
    x: np.ndarray,
    y: np.ndarray,
    keys: tuple[str, str],
    level: str,
    coefficient: Coefficient,
    system_metric: np.ndarray | None = None,
    item_nan: str | None = None,
) -> float:
    key = (*keys, level, coefficient, "" if item_nan is None else item_nan)
    found = _SINGLE.get(key)
    if found is None:
        extra: dict[str, Any] = {} if item_nan is None else {"item_nan": item_nan}
        result = correlate(x, y, level, coefficient, system_metric=system_metric, **extra)
        found = _SINGLE.put(key, result.value)
    return found


def _digest(matrix: np.ndarray, system_metric: np.ndarray | None) -> str:
    h = xxhash.xxh3_128()  # an in-process key
    for part in (matrix, system_metric):
        if part is not None:
            a = np.ascontiguousarray(part, dtype=float)
            h.update(repr(a.shape).encode())
            h.update(a.data)
        h.update(b"|")
    return h.hexdigest()


@on_one_blas_thread
def significance_table(
    metrics: Mapping[str, np.ndarray],
    humans: Mapping[str, np.ndarray],
    *,
    level: str,
    coefficient: CoefficientLike,
    method: str = "williams",
    rng: np.random.Generator,
    n_resamples: int = 1000,
    unit: str = "items",
    alpha: float = 0.05,
    item_nan: str = "skip",
    system_metrics: Mapping[str, np.ndarray] | None = None,
    alternative: str = "two-sided",
) -> list[dict[str, Any]]:
    """All metric pairs per aspect, with columns :data:`SIGNIFICANCE_COLUMNS`.

    In each row ``metric_a`` is the metric with the higher correlation (``r_a >= r_b``).

    - ``method="williams"``: ``p_value`` is Williams' one-sided p that r_a > r_b, with r_a, r_b
      and the metric-metric correlation computed on the cells (segment level) or systems (system
      level) where both metrics and the human score exist; ``r_a``/``r_b`` are those values.
      Williams' test is derived for Pearson's r; the other correlation coefficients (Spearman,
      Kendall's tau-b/c: ``Coefficient.williams``) are plugged in as they are, and any other
      coefficient (pairwise accuracy, Kendall-like, acc23 ...) is a ``ValueError`` naming the
      permutation test. It has no form for the item level (a mean of per-item correlations):
      ``ValueError``.
    - ``method="permutation"``: :func:`correlation.significance.permutation_test` with ``unit``,
      ``n_resamples`` and ``alternative``; ``r_a``/``r_b`` are the ``correlate`` values.

    ``cluster_a``/``cluster_b`` come from :func:`significance_clusters` over all metrics of the
    aspect with these p-values (None for a metric whose correlation is NaN).
    """
    coef = check_level_coefficient(level, coefficient)
    if method not in METHODS:
        raise ValueError(f"unknown significance method {method!r}; valid methods: {METHODS}")
    if method == "williams" and not coef.williams:
        raise ValueError(
            f"Williams' test compares two dependent correlation coefficients (Pearson-like); "
            f"{coef.name!r} is not one: use method='permutation' for it"
        )
    if method == "williams" and level == "item":
        raise ValueError(
            "Williams' test needs one correlation over n paired observations; the item level "
            "averages per-item correlations: use method='permutation' there"
        )
    _shape(metrics, humans)
    system_metrics = system_metrics or {}
    names = list(metrics)
    rows: list[dict[str, Any]] = []
    sm = {n: system_metrics.get(n) if level == "system" else None for n in names}
    digests = {n: _digest(metrics[n], sm[n]) for n in names}
    for aspect, human in humans.items():
        h = check_matrices(human, human)[0]
        h_digest = _digest(h, None)
        values = {
            n: _memo_correlate(
                metrics[n], h, (digests[n], h_digest), level, coef, sm[n], item_nan=item_nan
            )
            for n in names
        }
        pair_rows: list[dict[str, Any]] = []
        pvalues: dict[tuple[str, str], float] = {}
        for first, second in itertools.combinations(names, 2):
            a, b = first, second
            if _order_key(values[b]) > _order_key(values[a]):
                a, b = b, a
            ma, mb = np.asarray(metrics[a], float), np.asarray(metrics[b], float)
            if method == "williams":
                key = (digests[a], digests[b], h_digest, level, coef)
                found = _WILLIAMS.get(key)
                if found is None:
                    found = _WILLIAMS.put(
                        key,
                        _williams_inputs(
                            ma, mb, h, level, coef, sm[a], sm[b], (digests[a], digests[b], h_digest)
                        ),
                    )
                ra, rb, rab, n = found
                p = williams_test(ra, rb, rab, n)
            else:
                ra, rb = values[a], values[b]
                sa, sb = _permutable_system_scores(ma, mb, sm[a], sm[b], unit, a, b)
                p = permutation_test(
                    ma,
                    mb,
                    h,
                    level,
                    coef,
                    rng=rng,
                    n_resamples=n_resamples,
                    unit=unit,
                    alternative=alternative,
                    item_nan=item_nan,
                    system_metric_a=sa,
                    system_metric_b=sb,
                )
            pvalues[(a, b)] = p
            pair_rows.append(
                {
                    "aspect": aspect,
                    "level": level,
                    "coefficient": coef.name,
                    "metric_a": a,
                    "metric_b": b,
                    "r_a": ra,
                    "r_b": rb,
                    "p_value": p,
                    "method": method,
                }
            )
        clusters = significance_clusters(values, pvalues, alpha)
        for row in pair_rows:
            row["cluster_a"] = clusters.get(row["metric_a"])
            row["cluster_b"] = clusters.get(row["metric_b"])
        rows.extend(pair_rows)
    return rows


def _order_key(v: float) -> float:
    return v if math.isfinite(v) else -math.inf


def _permutable_system_scores(
    ma: np.ndarray,
    mb: np.ndarray,
    sa: np.ndarray | None,
    sb: np.ndarray | None,
    unit: str,
    name_a: str,
    name_b: str,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Corpus scores to permute, or None where the segment means are the same numbers."""
    plain = all(s is None or is_segment_mean(m, s) for m, s in ((ma, sa), (mb, sb)))
    if plain:
        return None, None
    if unit != "systems":
        raise ValueError(
            f"the system-level scores of {name_a!r} or {name_b!r} are corpus scores, not segment "
            "means; swapping items cannot rebuild them: use unit='systems' for the permutation test"
        )
    xa = sa if sa is not None else system_scores(ma, ma)[0]
    xb = sb if sb is not None else system_scores(mb, mb)[0]
    return xa, xb
