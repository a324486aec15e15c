"""The significance table: every pair of metrics compared on their correlation with each human
aspect (Williams' test or a permutation test), with clusters of metrics not distinguishable from
the best."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import math
from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np

from paraeval.correlation.bootstrap import is_segment_mean
from paraeval.correlation.levels import check_level_coefficient, correlate, system_scores
from paraeval.correlation.significance import (
    EarlyStop,
    check_test,
    permutation_test,
    significance_clusters,
    williams_test,
)
from paraeval.correlation.table import check_shapes
from paraeval.correlation.values import Coefficient, CoefficientLike, check_matrices

SIGNIFICANCE_COLUMNS: tuple[str, ...] = (
    *("aspect", "level", "coefficient", "metric_a", "metric_b", "r_a", "r_b", "adjusted_a"),
    *("adjusted_b", "p_value", "method", "cluster_a", "cluster_b"),
)


def _segment_williams_inputs(
    a: tuple[str, np.ndarray],
    b: tuple[str, np.ndarray],
    h: np.ndarray,
    coefficient: Coefficient,
    values: Mapping[str, float],
    masked: dict[tuple[str, bytes], float],
) -> tuple[float, float, float, int]:
    """(r_a, r_b, r_ab, n) on the cells where all three scores exist; ``a`` and ``b`` are (name,
    scores). ``values``: each metric's correlation with ``h`` on all its cells; ``masked``: the
    call's correlations on fewer cells so far, by metric and cells."""
    (name_a, ma), (name_b, mb) = a, b
    ok = np.isfinite(ma) & np.isfinite(mb) & np.isfinite(h)
    if ok.all():
        # nothing masked: r_a and r_b are those of the whole matrices, shared by every pair
        return values[name_a], values[name_b], _segment_value(ma, mb, coefficient), int(ok.sum())
    ma, mb, h = (np.where(ok, v, np.nan) for v in (ma, mb, h))
    # the cells left out are mostly the human's missing ratings, the same for every pair: r_a
    # and r_b recur across pairs
    cells = ok.tobytes()
    r = []
    for name, m in ((name_a, ma), (name_b, mb)):
        key = (name, cells)
        if key not in masked:
            masked[key] = _segment_value(m, h, coefficient)
        r.append(masked[key])
    return r[0], r[1], _segment_value(ma, mb, coefficient), int(ok.sum())


def _system_williams_inputs(
    a: np.ndarray,
    b: np.ndarray,
    h: np.ndarray,
    coefficient: Coefficient,
    sys_a: np.ndarray | None,
    sys_b: np.ndarray | None,
) -> tuple[float, float, float, int]:
    """(r_a, r_b, r_ab, n) on the systems where all three scores exist."""
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
    item_average: str = "macro",
    system_metrics: Mapping[str, np.ndarray] | None = None,
    alternative: str = "two-sided",
    lower_is_better: Collection[str] = (),
    early_stop: EarlyStop | None = None,
    progress: Callable[[int], object] | None = None,
    draws: dict[tuple[str, ...], np.ndarray] | None = None,
) -> list[dict[str, Any]]:
    """All metric pairs per aspect, with columns :data:`SIGNIFICANCE_COLUMNS`; ``progress(1)``
    as each pair's test completes.

    Metrics are compared by their agreement with the human score, whatever their direction: the
    scores of a metric in ``lower_is_better`` (TER, WMD) are negated for the comparison, as WMT
    and mt-metrics-eval do, so that a strong negative correlation counts as strong agreement.
    ``r_a``/``r_b`` keep their printed sign; ``adjusted_a``/``adjusted_b`` say whose scores were
    negated. In each row ``metric_a`` is the metric that agrees more (direction-adjusted
    ``r_a >= r_b``).

    - ``method="williams"``: Williams' one-sided p that r_a > r_b, all three correlations on the
      cells (segment level) or systems where both metrics and the human score exist
      (:func:`correlation.significance.check_test` says where it applies).
    - ``method="permutation"``: :func:`correlation.significance.permutation_test` with ``unit``,
      ``n_resamples``, ``alternative`` and ``early_stop``; ``draws``, a dict the caller owns,
      receives each pair's null differences d* (direction-adjusted, A the row's ``metric_a``)
      under the key (aspect, level, coefficient, metric_a, metric_b): what an overall ranking
      over several tests combines.

    ``cluster_a``/``cluster_b`` come from :func:`significance_clusters` over all metrics of the
    aspect with these p-values (None for a metric whose correlation is NaN).
    """
    coef = check_level_coefficient(level, coefficient)
    check_test(method, level, coef, unit)
    check_shapes(metrics, humans)
    if method == "permutation":
        coef = _per_metric_once(coef)
    flip = {n: -1.0 if n in lower_is_better else 1.0 for n in metrics}
    metrics = {n: flip[n] * np.asarray(m, dtype=float) for n, m in metrics.items()}
    system_metrics = {
        n: flip[n] * np.asarray(s, dtype=float) for n, s in (system_metrics or {}).items()
    }
    names = list(metrics)
    rows: list[dict[str, Any]] = []
    # soft pairwise accuracy is of the segment scores whatever the system scores are
    by_system = level == "system" and coef.matrix_system is None
    sm = {n: system_metrics.get(n) if by_system else None for n in names}
    items = {"item_nan": item_nan, "item_average": item_average}
    perm = {"rng": rng, "n_resamples": n_resamples, "unit": unit, "alternative": alternative}
    perm |= {"early_stop": early_stop, **items}
    for aspect, human in humans.items():
        h = check_matrices(human, human)[0]
        values = {
            n: correlate(metrics[n], h, level, coef, system_metric=sm[n], **items).value
            for n in names
        }
        # each metric's correlation with the human on the cells a pair keeps, by the cells
        masked: dict[tuple[str, bytes], float] = {}
        pair_rows: list[dict[str, Any]] = []
        pvalues: dict[tuple[str, str], float] = {}
        for a, b in itertools.combinations(names, 2):
            if _order_key(values[b]) > _order_key(values[a]):
                a, b = b, a
            ma, mb = metrics[a], metrics[b]
            if method == "williams":
                if level == "segment":
                    ra, rb, rab, n = _segment_williams_inputs(
                        (a, ma), (b, mb), h, coef, values, masked
                    )
                else:
                    ra, rb, rab, n = _system_williams_inputs(ma, mb, h, coef, sm[a], sm[b])
                p = williams_test(ra, rb, rab, n)
            else:
                ra, rb = values[a], values[b]
                kept: list[np.ndarray] = []
                corpus = _permutable_system_scores(ma, mb, sm[a], sm[b], unit, a, b)
                p = permutation_test(ma, mb, h, level, coef, null_draws=kept, **corpus, **perm)
                if draws is not None:
                    draws[(aspect, level, coef.name, a, b)] = np.concatenate([np.empty(0), *kept])
            pvalues[(a, b)] = p
            pair = (aspect, level, coef.name, a, b, flip[a] * ra, flip[b] * rb)
            adjusted = (flip[a] < 0, flip[b] < 0, p, method)
            pair_rows.append(dict(zip(SIGNIFICANCE_COLUMNS, (*pair, *adjusted), strict=False)))
            if progress is not None:
                progress(1)
        clusters = significance_clusters(values, pvalues, alpha)
        for row in pair_rows:
            row["cluster_a"] = clusters.get(row["metric_a"])
            row["cluster_b"] = clusters.get(row["metric_b"])
        rows.extend(pair_rows)
    return rows


def _per_metric_once(coef: Coefficient) -> Coefficient:
    """``coef`` with its per-metric forms (each metric's own calibrated threshold and the pair
    or item values under it) computed once per metric in this call rather than once per pair of
    metrics: every pair a metric is in asks for the same numbers."""
    if coef.pair_values is None and coef.item_values_fixed is None:
        return coef

    def once(fn: Callable[[np.ndarray, np.ndarray], Any]) -> Callable[..., Any]:
        seen: dict[bytes, Any] = {}

        def call(m: np.ndarray, h: np.ndarray) -> Any:
            key = hashlib.blake2b(m.tobytes() + h.tobytes(), digest_size=16).digest()
            if key not in seen:
                seen[key] = fn(m, h)
            return seen[key]

        return call

    fns = {"pair_values": coef.pair_values, "item_values_fixed": coef.item_values_fixed}
    return dataclasses.replace(coef, **{k: fn and once(fn) for k, fn in fns.items()})


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
) -> dict[str, np.ndarray | None]:
    """Corpus scores to permute (``permutation_test``'s arguments), none where the segment
    means are the same numbers."""
    if all(s is None or is_segment_mean(m, s) for m, s in ((ma, sa), (mb, sb))):
        return {}
    if unit != "systems":
        raise ValueError(
            f"the system-level scores of {name_a!r} or {name_b!r} are corpus scores, not segment "
            "means; swapping items cannot rebuild them: use unit='systems' for the permutation test"
        )
    xa = sa if sa is not None else system_scores(ma, ma)[0]
    xb = sb if sb is not None else system_scores(mb, mb)[0]
    return {"system_metric_a": xa, "system_metric_b": xb}
