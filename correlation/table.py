"""The correlation table the pipeline writes: every correlation with its interval, from
``metrics`` (name -> ``(n_systems, n_items)`` matrix) and ``humans`` (aspect -> matrix), as plain
rows (dicts) ready for a CSV writer (the pairwise tests: :mod:`correlation.metric_comparison`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np
from scipy import stats

from paraeval.correlation.bootstrap import (
    SystemMetricFn,
    percentile_interval,
    resampled_row_means,
    resampled_values,
    system_resampled_scores,
    system_statistic,
)
from paraeval.correlation.catalog import get_coefficient
from paraeval.correlation.levels import (
    AUTO_UNIT,
    TABLE_UNITS,
    check_level_coefficient,
    correlate,
    level_unit,
    valid_combination,
)
from paraeval.correlation.resamples import (
    WEIGHT_BLOCK_ELEMENTS,
    Resamples,
    draw_resamples,
    resamples_nbytes,
    weight_blocks,
)
from paraeval.correlation.values import LEVELS, Coefficient, CoefficientLike, Memo

# map(fn, jobs) of the caller's choosing: the builtin runs the jobs in turn, an executor's map
# runs them on its workers (numpy releases the GIL inside the kernels that dominate)
MapFn = Callable[[Callable[[Any], list[dict[str, Any]]], Iterable[Any]], Iterator[Any]]

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
INTERVALS: tuple[str, ...] = ("bootstrap", "fisher")

# Bonett & Wright (2000) as nlpstats' ``fisher``: z = atanh(r) has standard error c / sqrt(n - b)
_FISHER: Mapping[str, tuple[float, bool]] = MappingProxyType(
    {
        "pearson": (3.0, False),
        "spearman": (3.0, True),
        "kendall_b": (4.0, False),
    }
)


def fisher_interval(
    r: float, n: int, coefficient: str, confidence: float = 0.95
) -> tuple[float, float]:
    """Fisher z interval of a correlation ``r`` on ``n`` pairs (nlpstats' ``fisher``).

    ``tanh(atanh(r) -+ z_{1-alpha/2} c / sqrt(n - b))`` with b = 3, c = 1 for Pearson; b = 3,
    c = sqrt(1 + r^2 / 2) for Spearman; b = 4, c = sqrt(0.437) for Kendall's tau-b. NaN for
    other coefficients, for n <= b and for a NaN r.
    """
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


def check_shapes(
    metrics: Mapping[str, np.ndarray], humans: Mapping[str, np.ndarray]
) -> tuple[int, int]:
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
    return [
        (
            k,
            level,
            combos,
            draw_resamples(rng, n_sys, n_items, n_resamples, unit_here) if ci else None,
        )
        for k in range(n_aspects)
        for level, combos, unit_here in _level_combos(levels, coefficients, unit)
    ]


def _level_combos(
    levels: Sequence[str], coefficients: Sequence[CoefficientLike], unit: str
) -> list[tuple[str, list[Coefficient], str]]:
    """(level, the coefficients defined there, its resampling unit) of each level with any."""
    coefs = [get_coefficient(c) for c in coefficients]
    out = [
        (lv, [c for c in coefs if valid_combination(lv, c)], level_unit(unit, lv)) for lv in levels
    ]
    return [row for row in out if row[1]]


def table_nbytes(
    n_aspects: int,
    levels: Sequence[str],
    coefficients: Sequence[CoefficientLike],
    n_sys: int,
    n_items: int,
    n_resamples: int,
    unit: str = AUTO_UNIT,
    workers: int = 1,
) -> int:
    """Peak bytes of :func:`correlation_table`'s resampling (the estimate the config check uses):
    every set of resamples (one per aspect and level, all drawn before any work:
    :func:`~correlation.resamples.resamples_nbytes`), the human side of each system-level set
    (resamples x systems, float64), the item multiplicities a segment-level set keeps for its
    metrics where they fit one block, and what each worker thread makes for one job: a block of
    item multiplicities and the few temporaries of its size, the resampled metric scores
    (resamples x systems), the resampled values and their finite copy (resamples), and, for a
    coefficient with an item level of its own (acc23, tau_23), the item multiplicities of every
    resample at once. Not counted: what grows with the data alone, not with ``n_resamples`` (the
    item-pair matrices Kendall's tau takes over few items)."""
    held = job = 0
    for level, combos, unit_here in _level_combos(levels, coefficients, unit):
        held += n_aspects * resamples_nbytes(n_resamples, n_sys, n_items, unit_here)
        if level == "system":
            held += n_aspects * 8 * n_resamples * n_sys
        elif level == "segment" and len(weight_blocks(n_resamples, n_items)) == 1:
            held += n_aspects * 8 * n_resamples * n_items * (unit_here != "systems")
        own_items = level == "item" and any(c.item_level is not None for c in combos)
        job = max(
            job,
            4 * 8 * WEIGHT_BLOCK_ELEMENTS
            + 8 * n_resamples * (2 * n_sys + 3)
            + (8 * n_resamples * n_items if own_items else 0),
        )
    return held + workers * job


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
    unit: str = AUTO_UNIT,
    item_nan: str = "skip",
    item_average: str = "macro",
    rng: np.random.Generator,
    system_metric_fns: Mapping[str, SystemMetricFn] | None = None,
    map: MapFn = map,
    interval: str = "bootstrap",
) -> list[dict[str, Any]]:
    """One row per (metric, aspect, level, coefficient) with columns :data:`CORRELATION_COLUMNS`.

    ``coefficients``: names, :class:`Coefficient` values or callables ``(x, y) -> (value, p)``;
    undefined level/coefficient pairs are skipped. ``system_metrics[name]``: the
    corpus score per system for the system level, recomputed by ``system_metric_fns[name]
    (item_indices)`` under item resampling where it is not the segment mean.

    One (aspect, level) shares its resamples, so intervals are paired. ``unit``: what a resample
    draws (:data:`UNITS`); the default :data:`AUTO_UNIT` draws items at the segment and item
    levels and systems and items together at the system level (Boot-Both). A system-level
    interval whose resamples all give one value is NaN, never of zero width. ``ci=False`` (NaN
    bounds) and ``interval="fisher"`` (:func:`fisher_interval`) draw nothing. ``map`` runs the
    jobs (one per metric, aspect and level): an executor's ``map`` gives the same rows.
    """
    n_sys, n_items = check_shapes(metrics, humans)
    for level in levels:
        if level not in LEVELS:
            raise ValueError(f"unknown correlation level {level!r}; valid levels: {LEVELS}")
    for coefficient in coefficients:
        check_level_coefficient("segment", coefficient, combination=False)
    if unit not in TABLE_UNITS:
        valid = ", ".join(TABLE_UNITS)
        raise ValueError(f"unknown resampling unit {unit!r}; valid units: {valid}")
    if interval not in INTERVALS:
        raise ValueError(f"unknown interval {interval!r}; valid intervals: {', '.join(INTERVALS)}")
    fisher = ci and interval == "fisher"
    system_metrics = system_metrics or {}
    system_metric_fns = system_metric_fns or {}
    items = {"item_nan": item_nan, "item_average": item_average}

    # order-only rows on segments and items: a metric whose scores order like an earlier one's
    # (iBLEU where the references are the sources, a rescaled column) takes that one's rows
    ordinal = any(lv in ORDINAL_LEVELS for lv in levels) and any(
        get_coefficient(c).ordinal for c in coefficients
    )
    leader: dict[str, str] = {}
    if ordinal:
        first: dict[bytes, str] = {}
        for name, m in metrics.items():
            leader[name] = first.setdefault(order_key(m), name)

    def metric_rows(
        name: str,
        aspect: str,
        human: np.ndarray,
        level: str,
        combos: list[Coefficient],
        res: Resamples | None,
        human_means: np.ndarray | None,
        memo: Memo,
    ) -> list[dict[str, Any]]:
        metric = metrics[name]
        sm = system_metrics.get(name) if level == "system" else None
        out: list[dict[str, Any]] = []
        # the resampled system scores are the same for every coefficient: recomputing corpus
        # scores per resample is the costly part, so it is done once
        xy = (
            system_resampled_scores(
                metric, human, res, sm, system_metric_fns.get(name), human_means
            )
            if res is not None and level == "system"
            else None
        )
        for coefficient in combos:
            key = (name, aspect, level, coefficient.name)
            if coefficient.ordinal and level in ORDINAL_LEVELS and leader.get(name, name) != name:
                # filled in from the leader's row once every job is done
                out.append(
                    {**dict(zip(CORRELATION_COLUMNS, key, strict=False)), _FROM: leader[name]}
                )
                continue
            corr = correlate(metric, human, level, coefficient, system_metric=sm, **items)
            lo = hi = float("nan")
            if fisher:
                n = _fisher_n(metric, human, level, corr.n)
                lo, hi = fisher_interval(corr.value, n, coefficient.name, confidence)
            elif xy is not None and coefficient.matrix_system is None:
                lo, hi = percentile_interval(system_statistic(coefficient, *xy), confidence)
            elif res is not None:
                opts = {"system_metric": sm, "system_metric_fn": system_metric_fns.get(name)}
                values = resampled_values(
                    metric, human, level, coefficient, res, memo=memo, **opts, **items
                )
                lo, hi = percentile_interval(values, confidence)
            if level == "system" and not lo < hi:
                # every resample gave one value (too few systems, or only items resampled):
                # an interval of zero width would claim a certainty the data do not have
                lo = hi = float("nan")
            computed = (corr.value, lo, hi, corr.p_value, corr.n, corr.n_dropped)
            out.append(dict(zip(CORRELATION_COLUMNS, (*key, *computed), strict=True)))
        return out

    jobs: list[tuple[Any, ...]] = []
    drawn = draw_table_resamples(
        rng, len(humans), levels, coefficients, n_sys, n_items, n_resamples, unit, ci and not fisher
    )
    for k, level, combos, res in drawn:
        aspect, human = list(humans.items())[k]
        # the human side of the system level's resamples, the same for every metric
        means = resampled_row_means(human, res) if res is not None and level == "system" else None
        # what a coefficient computes once for every metric of this set of resamples
        memo: Memo = {}
        jobs.extend((name, aspect, human, level, combos, res, means, memo) for name in metrics)
    parts = list(map(lambda job: metric_rows(*job), jobs))
    return _with_leaders_rows([row for part in parts for row in part])


# A row to be copied from the row of the metric named here (same aspect, level, coefficient)
_FROM = "_ordered_like"
ORDINAL_LEVELS = ("segment", "item")


def _with_leaders_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with each placeholder replaced by its leader's row under its own metric name."""
    computed = {
        (r["metric"], r["aspect"], r["level"], r["coefficient"]): r for r in rows if _FROM not in r
    }
    return [
        {**computed[(r[_FROM], r["aspect"], r["level"], r["coefficient"])], "metric": r["metric"]}
        if _FROM in r
        else r
        for r in rows
    ]


def order_key(matrix: np.ndarray) -> bytes:
    """The order of ``matrix``'s scores: its shape, where its NaN and infinite cells lie and the
    dense rank of every other cell. Two matrices share it exactly when one is a strictly
    increasing function of the other."""
    a = np.asarray(matrix, dtype=float)
    finite = np.isfinite(a)
    ranks = np.where(np.isnan(a), -1, np.where(a > 0, -2, -3)).astype(np.int64)
    ranks[finite] = np.unique(a[finite], return_inverse=True)[1]
    return repr(a.shape).encode() + ranks.tobytes()
