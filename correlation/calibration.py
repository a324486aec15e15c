"""Pairs of systems inside items and tie calibration (Deutsch et al. 2023, "Ties Matter"), as
mt-metrics-eval's ``tau_optimization`` defines it, in one pass over the pairs sorted by their
metric difference.

A pair is concordant (C), discordant (D), tied in the human score only (T_h), in the metric only
(T_m, scores within ``epsilon``) or in both (T_hm); :data:`WEIGHTS` gives each kind's value in
acc23 and tau23. Raising ``epsilon`` past a pair's absolute metric difference turns that pair into
a metric tie, so the statistic at every candidate threshold is its value at 0 plus a cumulative
sum of per-pair changes: the whole search costs one sort, not one pass per candidate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

import numpy as np
from numba import njit

Variant = Literal["acc23", "tau23"]
VARIANTS: tuple[str, ...] = ("acc23", "tau23")

# value of each kind of pair in the numerator: C, D, T_h, T_m, T_hm
WEIGHTS: Mapping[str, tuple[float, float, float, float, float]] = MappingProxyType(
    {
        "acc23": (1.0, 0.0, 0.0, 0.0, 1.0),
        "tau23": (1.0, -1.0, -1.0, -1.0, 1.0),
    }
)

# two thresholds whose values differ by less than this are equal: values reached along different
# summation orders may differ in the last bits, and the smallest such threshold is chosen
TOLERANCE = 1e-12


def pair_kinds(dm: np.ndarray, dh: np.ndarray, epsilon: float) -> np.ndarray:
    """Kind of every pair (0 C, 1 D, 2 T_h, 3 T_m, 4 T_hm) from its metric and human
    differences."""
    tie_m = np.abs(dm) <= epsilon
    tie_h = dh == 0
    agree = np.sign(dm) == np.sign(dh)
    return np.select([tie_m & tie_h, tie_h, tie_m, agree], [4, 2, 3, 0], default=1)


@dataclass(frozen=True)
class ItemPairs:
    """Every pair of systems scored on both sides inside each item: its item, metric difference
    and human difference; ``per_item`` counts the pairs of each item."""

    item: np.ndarray
    dm: np.ndarray
    dh: np.ndarray
    per_item: np.ndarray

    @property
    def inv_pairs(self) -> np.ndarray:
        """1 / pairs of each item (0 for an item without a pair): each pair's share of its item."""
        return np.where(self.per_item > 0, 1.0 / np.maximum(self.per_item, 1.0), 0.0)


def item_pairs(
    metric: np.ndarray,
    human: np.ndarray,
    *,
    sample_rate: float = 1.0,
    rng: np.random.Generator | None = None,
) -> ItemPairs:
    """The pairs of two ``(n_systems, n_items)`` matrices. With ``sample_rate`` below 1 each pair
    is kept with that probability (mt-metrics-eval's ``sample_rate``), drawn from ``rng``."""
    m = np.asarray(metric, dtype=float)
    h = np.asarray(human, dtype=float)
    n_sys, n_items = m.shape
    ok = np.isfinite(m) & np.isfinite(h)
    s, t = np.triu_indices(n_sys, k=1)
    both = ok[s] & ok[t]  # (pairs of systems, items)
    pi, item = np.nonzero(both)
    if sample_rate < 1.0:
        if rng is None:
            raise ValueError("a sample_rate below 1 needs a random generator")
        keep = rng.random(pi.size) < sample_rate
        pi, item = pi[keep], item[keep]
    dm = m[s[pi], item] - m[t[pi], item]
    dh = h[s[pi], item] - h[t[pi], item]
    per_item = np.bincount(item, minlength=n_items).astype(float)
    return ItemPairs(item, dm, dh, per_item)


@dataclass(frozen=True)
class Calibration:
    """The statistic's sum over items at every candidate threshold, in steps: ``base`` at
    threshold 0, then ``change[k]`` when the ``k``-th pair (by absolute metric difference) turns
    into a metric tie; a threshold's value is reached at the last step of its difference
    (``ends``). Steps that change nothing are left out."""

    item: np.ndarray
    change: np.ndarray
    ends: np.ndarray
    threshold: np.ndarray
    base: np.ndarray  # each item's own value at threshold 0 (a share of the item's mean)


def calibration(pairs: ItemPairs, variant: Variant) -> Calibration:
    """The steps of tie calibration over ``pairs`` (see :class:`Calibration`)."""
    values = np.asarray(WEIGHTS[variant])
    kinds = pair_kinds(pairs.dm, pairs.dh, 0.0)
    inv = pairs.inv_pairs
    base = np.bincount(
        pairs.item, weights=values[kinds] * inv[pairs.item], minlength=pairs.per_item.size
    )
    order = np.argsort(np.abs(pairs.dm), kind="stable")
    diff = np.abs(pairs.dm)[order]
    tie_kind = np.where(pairs.dh[order] == 0, 4, 3)
    change = (values[tie_kind] - values[kinds[order]]) * inv[pairs.item[order]]
    # the value at a threshold includes every pair with that difference: a threshold's value is
    # read after the last step of its group that changes anything (a step that changes nothing
    # cannot be the first to reach the maximum)
    moves = change != 0
    group = np.cumsum(np.concatenate([[False], diff[1:] != diff[:-1]]))[moves]
    ends = np.append(group[1:] != group[:-1], True) if group.size else np.zeros(0, dtype=bool)
    return Calibration(
        item=pairs.item[order][moves],
        change=change[moves],
        ends=ends,
        threshold=diff[moves],
        base=base,
    )


def best_threshold(cal: Calibration) -> tuple[float, float]:
    """(the largest sum over items, the smallest threshold reaching it) without resampling."""
    base = float(cal.base.sum())
    values = np.concatenate([[base], base + np.cumsum(cal.change)[cal.ends]])
    thresholds = np.concatenate([[0.0], cal.threshold[cal.ends]])
    best = values.max()
    first = int(np.flatnonzero(values >= best - TOLERANCE)[0])
    return float(values[first]), float(thresholds[first])


def best_weighted(cal: Calibration, item_w: np.ndarray) -> np.ndarray:
    """The largest sum over items at any threshold, for every row of item multiplicities
    ``item_w`` (B, n_items): each resample picks its own threshold."""
    w = np.ascontiguousarray(item_w, dtype=float)
    return _best_rows(w, w @ cal.base, cal.item.astype(np.int64), cal.change, cal.ends)


@njit(cache=True, nogil=True)
def _best_rows(
    w: np.ndarray, base: np.ndarray, item: np.ndarray, change: np.ndarray, ends: np.ndarray
) -> np.ndarray:  # pragma: no cover - compiled
    out = np.empty(w.shape[0])
    for b in range(w.shape[0]):
        acc = base[b]
        best = acc
        for k in range(item.size):
            acc += w[b, item[k]] * change[k]
            if ends[k] and acc > best:
                best = acc
        out[b] = best
    return out
