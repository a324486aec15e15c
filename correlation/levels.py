"""Correlation at one of three levels of a ``(n_systems, n_items)`` score matrix.

- ``segment``: every (system, item) cell with both scores finite, pooled into one pair of vectors.
  ``n`` = cells used, ``n_dropped`` = cells left out.
- ``item``: the coefficient across systems inside each item, averaged over items; items whose own
  coefficient is undefined are skipped (``item_nan="skip"``) or count as 0 (``"zero"``), and are
  counted in ``n_dropped``. No p-value (NaN): the per-item coefficients share systems.
- ``system``: each system's corpus metric score (``system_metric``) or else the mean of its finite
  segment scores, against the mean of its finite human scores. ``n`` = systems used.

``Coefficient.levels`` says where each coefficient is defined; other combinations raise
``ValueError``. In mt-metrics-eval's terms segment is ``average_by="none"`` and item
``average_by="item"`` (``item_nan="zero"`` is its ``replace_nans_with_zeros``).
"""

from __future__ import annotations

import numpy as np

from paraeval.correlation.catalog import get_coefficient
from paraeval.correlation.resamples import UNITS
from paraeval.correlation.values import (
    LEVELS,
    Coefficient,
    CoefficientLike,
    Correlation,
    check_matrices,
    row_nanmean,
)
from paraeval.correlation.weighted import pair_statistic

ITEM_NAN: tuple[str, ...] = ("skip", "zero")
ITEM_AVERAGES: tuple[str, ...] = ("macro", "micro")
"""How the item level averages its per-item values: ``macro``, the plain mean; ``micro``, each
item weighted by its number of scored systems (mt-metrics-eval's ``macro=False``)."""
AUTO_UNIT = "auto"
"""The default resampling unit of a correlation table: items at the segment and item levels,
systems and items together at the system level (Boot-Both: Deutsch et al. 2021 show that
system-level intervals that resample the inputs only do not cover the truth)."""


def level_unit(unit: str, level: str) -> str:
    """The resampling unit ``unit`` means at ``level``: :data:`AUTO_UNIT` resolved, others as
    they are."""
    if unit != AUTO_UNIT:
        return unit
    return "both" if level == "system" else "items"


TABLE_UNITS: tuple[str, ...] = (*UNITS, AUTO_UNIT)
"""The units a correlation table accepts: :data:`UNITS` at every level, or :data:`AUTO_UNIT`."""


def valid_combination(level: str, coefficient: CoefficientLike) -> bool:
    """Whether ``coefficient`` is defined at ``level`` (both names must be known)."""
    return level in check_level_coefficient(level, coefficient, combination=False).levels


def check_level_coefficient(
    level: str, coefficient: CoefficientLike, *, combination: bool = True
) -> Coefficient:
    """The coefficient, or ``ValueError`` naming the valid choices for an unknown or invalid
    level/coefficient."""
    if level not in LEVELS:
        raise ValueError(f"unknown correlation level {level!r}; valid levels: {', '.join(LEVELS)}")
    coef = get_coefficient(coefficient)
    if combination and level not in coef.levels:
        raise ValueError(
            f"coefficient {coef.name!r} is not defined at the {level!r} level; it is defined at: "
            f"{', '.join(coef.levels)}"
        )
    return coef


def system_scores(
    metric: np.ndarray, human: np.ndarray, system_metric: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per-system ``(x, y)`` used at the system level (see the module docstring)."""
    m, h = check_matrices(metric, human)
    if system_metric is None:
        x = row_nanmean(m)
    else:
        x = np.asarray(system_metric, dtype=float).ravel()
        if x.shape != (m.shape[0],):
            raise ValueError(
                f"system_metric needs one score per system ({m.shape[0]}), got shape {x.shape}"
            )
    return x, row_nanmean(h)


def item_values(metric: np.ndarray, human: np.ndarray, coefficient: CoefficientLike) -> np.ndarray:
    """The coefficient across systems inside each item, shape ``(n_items,)``; NaN where undefined.

    For ``kendall_like`` the per-item value is ``(C - D) / (C + D)`` of that item's system pairs;
    a metric constant inside one item is not undefined there (its pairs are discordant, the WMT
    convention), only an item without a countable pair is.
    """
    m, h = check_matrices(metric, human)
    coef = get_coefficient(coefficient)
    # all items at once from (items, systems, systems) pair tensors rather than one scipy call
    # per item; the same numbers (the tests compare with scipy item by item)
    out = np.empty(m.shape[1])
    step = max(1, 2_000_000 // max(1, m.shape[0] ** 2))
    for j in range(0, m.shape[1], step):
        out[j : j + step] = pair_statistic(coef, m.T[j : j + step], h.T[j : j + step], 1.0)
    return out


def correlate(
    metric: np.ndarray,
    human: np.ndarray,
    level: str,
    coefficient: CoefficientLike,
    *,
    system_metric: np.ndarray | None = None,
    item_nan: str = "skip",
    item_average: str = "macro",
) -> Correlation:
    """Correlation of a metric with a human score at ``level`` with ``coefficient`` (a name in
    :data:`~correlation.catalog.COEFFICIENTS`, a :class:`Coefficient`, or any callable ``(x, y)
    -> (value, p_value)`` on paired vectors); see the module docstring for the levels and what
    ``n`` and ``n_dropped`` count. ``system_metric`` (one score per system) replaces the mean of
    segment scores at the system level. ``item_average`` (:data:`ITEM_AVERAGES`) weights the
    item level's per-item values; one statistic of the whole matrix (calibrated acc23) averages
    as mt-metrics-eval's does, whatever it says."""
    coef = check_level_coefficient(level, coefficient)
    check_item_rules(item_nan, item_average)
    m, h = check_matrices(metric, human)

    if level == "segment":
        ok = np.isfinite(m) & np.isfinite(h)
        n = int(ok.sum())
        value, p = coef.fn(m[ok], h[ok]) if coef.vector else coef.fn(m, h)
        return Correlation(float(value), float(p), n, int(ok.size - n))

    if level == "item" and coef.item_level is not None:
        # one statistic of the whole matrix (e.g. one calibrated epsilon for all items)
        ok = np.isfinite(m) & np.isfinite(h)
        used = int((ok.sum(axis=0) >= 2).sum())
        value = float(coef.item_level(m, h, None)[0])
        return Correlation(value, float("nan"), used, int(m.shape[1] - used))

    if level == "item":
        v = item_values(m, h, coef)
        undefined = ~np.isfinite(v)
        n_undefined = int(undefined.sum())
        w = item_weights(m, h, item_average)
        if item_nan == "zero":
            v = np.where(undefined, 0.0, v)
        else:
            v, w = v[~undefined], w[~undefined]
        used = v.size
        value = float((w * v).sum() / w.sum()) if used > 0 and w.sum() > 0 else float("nan")
        return Correlation(value, float("nan"), used, n_undefined)

    x, y = system_scores(m, h, system_metric)
    ok = np.isfinite(x) & np.isfinite(y)
    n = int(ok.sum())
    if coef.matrix_system is not None:
        value = float(coef.matrix_system(m[None], h, {})[0])
        return Correlation(value, float("nan"), n, int(ok.size - n))
    # only vector coefficients are defined at the system level
    value, p = coef.fn(x, y)
    return Correlation(float(value), float(p), n, int(ok.size - n))


def check_item_rules(item_nan: str, item_average: str) -> None:
    """``ValueError`` naming the valid choices for an unknown item-level rule."""
    rules = (("item_nan", item_nan, ITEM_NAN), ("item_average", item_average, ITEM_AVERAGES))
    for key, value, valid in rules:
        if value not in valid:
            raise ValueError(f"{key} must be one of {', '.join(valid)}, got {value!r}")


def item_weights(metric: np.ndarray, human: np.ndarray, item_average: str) -> np.ndarray:
    """Each item's weight in the item-level mean: 1 (macro) or its number of systems scored on
    both sides (micro)."""
    if item_average == "micro":
        return (np.isfinite(metric) & np.isfinite(human)).sum(axis=0).astype(float)
    return np.ones(np.shape(metric)[1])
