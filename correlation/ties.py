"""Kendall variants that reward correct ties: tau_23 and acc23 (Deutsch et al. 2023, "Ties
Matter"), with tie calibration, as mt-metrics-eval's ``KendallVariants`` and
``KendallWithTiesOpt`` define them.

A pair is concordant (C), discordant (D), tied in the human score only (T_h), in the metric only
(T_m, scores within ``epsilon``) or in both (T_hm)::

    acc23 = (C + T_hm) / (C + D + T_h + T_m + T_hm)
    tau23 = (C + T_hm - D - T_h - T_m) / (C + D + T_h + T_m + T_hm)

Tie calibration picks the smallest epsilon (0 or a pair's absolute metric difference) maximising
the statistic; at the item level one epsilon serves all items and the statistic is the mean of the
items' own values (items under two scored systems left out), as ``KendallWithTiesOpt(average_by=
"item", sample_rate=1)``. All pairs are enumerated: item and system levels only.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

import numpy as np

from paraeval.correlation.coefficients import (
    NAN_RESULT,
    Coefficient,
    paired_finite,
    register_coefficient,
    register_settings,
)

Variant = Literal["acc23", "tau23"]
VARIANTS: tuple[str, ...] = ("acc23", "tau23")

# value of each kind of pair in the numerator: C, D, T_h, T_m, T_hm
_WEIGHTS: dict[str, tuple[float, float, float, float, float]] = {
    "acc23": (1.0, 0.0, 0.0, 0.0, 1.0),
    "tau23": (1.0, -1.0, -1.0, -1.0, 1.0),
}

# rows of (B, pairs) cumulative sums held at once
_CHUNK_ELEMENTS = 2_000_000


def _kinds(dm: np.ndarray, dh: np.ndarray, epsilon: float) -> np.ndarray:
    """Kind of every pair (0 C, 1 D, 2 T_h, 3 T_m, 4 T_hm) from its metric and human
    differences."""
    tie_m = np.abs(dm) <= epsilon
    tie_h = dh == 0
    agree = np.sign(dm) == np.sign(dh)
    return np.select(
        [tie_m & tie_h, tie_h, tie_m, agree],
        [4, 2, 3, 0],
        default=1,
    )


def _item_pairs(
    m: np.ndarray, h: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(item, metric difference, human difference) of every pair of systems scored on both
    sides inside each item, and the number of such pairs per item."""
    n_sys, n_items = m.shape
    ok = np.isfinite(m) & np.isfinite(h)
    s, t = np.triu_indices(n_sys, k=1)
    both = ok[s] & ok[t]  # (pairs of systems, items)
    pi, item = np.nonzero(both)
    dm = m[s[pi], item] - m[t[pi], item]
    dh = h[s[pi], item] - h[t[pi], item]
    per_item = np.bincount(item, minlength=n_items).astype(float)
    return item, dm, dh, per_item


def item_mean_23(
    metric: np.ndarray,
    human: np.ndarray,
    item_w: np.ndarray | None = None,
    *,
    variant: Variant = "acc23",
    epsilon: float = 0.0,
    calibrate: bool = False,
) -> np.ndarray:
    """Mean over items of tau23 / acc23 between systems inside each item, for every row of item
    multiplicities ``item_w`` (B, n_items) (the unweighted mean, shape (1,), when None).

    With ``calibrate`` each row gets its own best epsilon (see the module docstring); otherwise
    ``epsilon`` is used. NaN where no item has a pair.
    """
    m = np.asarray(metric, dtype=float)
    h = np.asarray(human, dtype=float)
    w = np.ones((1, m.shape[1])) if item_w is None else np.asarray(item_w, dtype=float)
    item, dm, dh, per_item = _item_pairs(m, h)
    has_pairs = per_item > 0
    rows = w @ has_pairs.astype(float)  # items with pairs, counted with their multiplicity
    values = np.asarray(_WEIGHTS[variant])
    inv_pairs = np.where(has_pairs, 1.0 / np.maximum(per_item, 1.0), 0.0)
    kinds = _kinds(dm, dh, 0.0 if calibrate else epsilon)
    # each pair's share of its item's mean value
    share = values[kinds] * inv_pairs[item]
    base = w @ np.bincount(item, weights=share, minlength=m.shape[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        if not calibrate or dm.size == 0:
            return np.where(rows > 0, base / rows, np.nan)
        # Flip pairs to metric ties in order of their metric difference; the value after all
        # pairs up to a threshold are flipped is base + a cumulative sum of per-pair changes.
        order = np.argsort(np.abs(dm), kind="stable")
        diff = np.abs(dm)[order]
        tie_kind = np.where(dh[order] == 0, 4, 3)
        change = (values[tie_kind] - values[kinds[order]]) * inv_pairs[item[order]]
        # the value at a threshold includes every pair with that difference: group ends
        ends = np.flatnonzero(np.append(diff[1:] != diff[:-1], True))
        out = np.empty(w.shape[0])
        step = max(1, _CHUNK_ELEMENTS // max(diff.size, 1))
        for lo in range(0, w.shape[0], step):
            wb = w[lo : lo + step]
            cum = np.cumsum(wb[:, item[order]] * change, axis=1)[:, ends]
            # candidate thresholds: 0 (nothing flipped beyond exact ties) and every difference
            cand = (
                np.concatenate([np.zeros((wb.shape[0], 1)), cum], axis=1)
                + base[lo : lo + step, None]
            )
            out[lo : lo + step] = cand.max(axis=1)
        return np.where(rows > 0, out / rows, np.nan)


def calibrated_epsilon(
    metric: np.ndarray, human: np.ndarray, *, variant: Variant = "acc23"
) -> tuple[float, float]:
    """(best value, smallest epsilon reaching it) of tie calibration at the item level of two
    ``(n_systems, n_items)`` matrices (for a vector, pass it as one column)."""
    m = np.asarray(metric, dtype=float)
    h = np.asarray(human, dtype=float)
    _, dm, _, _ = _item_pairs(m, h)
    if dm.size == 0:
        return float("nan"), float("nan")
    candidates = np.unique(np.concatenate([[0.0], np.abs(dm)]))
    best, best_eps = -np.inf, float("nan")
    for eps in candidates:
        v = float(item_mean_23(m, h, variant=variant, epsilon=float(eps))[0])
        # a tolerance: equal values computed along different paths may differ in the last bit
        if v > best + 1e-12:
            best, best_eps = v, float(eps)
    return best, best_eps


def per_item_23(
    metric: np.ndarray,
    human: np.ndarray,
    *,
    variant: Variant = "acc23",
    epsilon: float = 0.0,
    calibrate: bool = False,
) -> np.ndarray:
    """Each item's own tau23 / acc23 (NaN for an item without a pair), at the fixed ``epsilon``
    or, with ``calibrate``, at the one epsilon calibrated on the whole matrix: the values whose
    mean is the item level. The permutation test swaps these between two metrics, each keeping
    its own epsilon (as mt-metrics-eval's ``PairwisePermutationSigDiff``)."""
    m = np.asarray(metric, dtype=float)
    h = np.asarray(human, dtype=float)
    if calibrate:
        epsilon = calibrated_epsilon(m, h, variant=variant)[1]
        if not np.isfinite(epsilon):
            return np.full(m.shape[1], np.nan)
    item, dm, dh, per_item = _item_pairs(m, h)
    num = np.bincount(
        item, weights=np.asarray(_WEIGHTS[variant])[_kinds(dm, dh, epsilon)], minlength=m.shape[1]
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(per_item > 0, num / per_item, np.nan)


def kendall_23(
    x: np.ndarray,
    y: np.ndarray,
    *,
    variant: Variant = "acc23",
    epsilon: float = 0.0,
    calibrate: bool = False,
) -> tuple[float, float]:
    """tau23 / acc23 of two paired vectors (``x`` the metric, ``y`` the human score); NaN for
    fewer than 2 pairs. No p-value: NaN."""
    xs, ys = paired_finite(x, y)
    if xs.size < 2:
        return NAN_RESULT
    v = item_mean_23(
        xs[:, None], ys[:, None], variant=variant, epsilon=epsilon, calibrate=calibrate
    )
    return float(v[0]), float("nan")


def _weighted_23(
    x: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    *,
    variant: Variant,
    epsilon: float,
) -> np.ndarray:
    """Fixed-epsilon tau23 / acc23 over the last axis of weighted samples (pair tensors)."""
    total = w.sum(axis=-1)
    ww = w[..., :, None] * w[..., None, :]
    kinds = _kinds(x[..., :, None] - x[..., None, :], y[..., :, None] - y[..., None, :], epsilon)
    values = np.asarray(_WEIGHTS[variant])[kinds]
    # the diagonal's w_s^2 ordered pairs stand for w_s (w_s - 1) pairs of copies, tied in both
    num = (ww * values).sum(axis=(-2, -1)) - total * _WEIGHTS[variant][4]
    pairs = total * total - total
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total < 2, np.nan, num / pairs)


def _check(variant: str, epsilon: float, calibrate: bool) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if not isinstance(epsilon, int | float) or not epsilon >= 0:
        raise ValueError(f"epsilon must be a number >= 0, got {epsilon!r}")
    if not isinstance(calibrate, bool):
        raise ValueError(f"calibrate must be true or false, got {calibrate!r}")


def _item_level(
    m: np.ndarray, h: np.ndarray, item_w: np.ndarray | None, **settings: Any
) -> np.ndarray:
    return item_mean_23(m, h, item_w, **settings)


def _coefficient(name: str, variant: Variant, epsilon: float, calibrate: bool) -> Coefficient:
    _check(variant, epsilon, calibrate)
    settings: dict[str, Any] = {
        "variant": variant,
        "epsilon": float(epsilon),
        "calibrate": calibrate,
    }
    return Coefficient(
        name,
        partial(kendall_23, **settings),
        levels=("item", "system"),
        # a calibrated statistic has no per-sample weighted form: its epsilon depends on the
        # whole sample, so resamples go through item_level or the generic path
        weighted=None
        if calibrate
        else partial(_weighted_23, variant=variant, epsilon=float(epsilon)),
        item_level=partial(_item_level, **settings),
        item_values_fixed=partial(per_item_23, **settings),
        williams=False,
        options=(("calibrate", calibrate), ("epsilon", float(epsilon))),
    )


def acc23_coefficient(*, calibrate: bool = True, epsilon: float = 0.0) -> Coefficient:
    """``acc23``: pairwise accuracy with ties (the WMT23 segment-level statistic, with tie
    calibration by default; ``calibrate=false`` uses the fixed ``epsilon``)."""
    return _coefficient("acc23", "acc23", epsilon, calibrate)


def tau23_coefficient(*, calibrate: bool = False, epsilon: float = 0.0) -> Coefficient:
    """``tau_23``: Kendall's tau with ties rewarded and punished (fixed ``epsilon`` by default,
    or tie calibration)."""
    return _coefficient("tau_23", "tau23", epsilon, calibrate)


register_coefficient(acc23_coefficient())
register_settings("acc23", acc23_coefficient)
register_coefficient(tau23_coefficient())
register_settings("tau_23", tau23_coefficient)
