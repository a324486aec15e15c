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
from typing import Any

import numpy as np

from paraeval.correlation.calibration import (
    VARIANTS,
    WEIGHTS,
    ItemPairs,
    Variant,
    best_threshold,
    best_weighted,
    calibration,
    item_pairs,
    pair_kinds,
)
from paraeval.correlation.coefficients import paired_finite
from paraeval.correlation.values import NAN_RESULT, Coefficient


def _pairs(m: np.ndarray, h: np.ndarray, sample_rate: float, seed: int) -> ItemPairs:
    """The pairs a statistic uses: all of them, or the sample mt-metrics-eval's ``sample_rate``
    draws (a generator seeded from ``seed``, so a run gives the same sample every time)."""
    rng = np.random.default_rng(seed) if sample_rate < 1.0 else None
    return item_pairs(m, h, sample_rate=sample_rate, rng=rng)


def item_mean_23(
    metric: np.ndarray,
    human: np.ndarray,
    item_w: np.ndarray | None = None,
    *,
    variant: Variant = "acc23",
    epsilon: float = 0.0,
    calibrate: bool = False,
    sample_rate: float = 1.0,
    seed: int = 0,
) -> np.ndarray:
    """Mean over items of tau23 / acc23 between systems inside each item, for every row of item
    multiplicities ``item_w`` (B, n_items) (the unweighted mean, shape (1,), when None).

    With ``calibrate`` each row gets its own best epsilon (see the module docstring); otherwise
    ``epsilon`` is used. NaN where no item has a pair.
    """
    m = np.asarray(metric, dtype=float)
    w = np.ones((1, m.shape[1])) if item_w is None else np.asarray(item_w, dtype=float)
    pairs = _pairs(m, human, sample_rate, seed)
    rows = w @ (pairs.per_item > 0).astype(float)  # items with pairs, with their multiplicity
    with np.errstate(invalid="ignore", divide="ignore"):
        if not calibrate or pairs.dm.size == 0:
            values = np.asarray(WEIGHTS[variant])[pair_kinds(pairs.dm, pairs.dh, epsilon)]
            share = values * pairs.inv_pairs[pairs.item]
            base = w @ np.bincount(pairs.item, weights=share, minlength=m.shape[1])
            return np.where(rows > 0, base / rows, np.nan)
        cal = calibration(pairs, variant)
        out = np.array([best_threshold(cal)[0]]) if item_w is None else best_weighted(cal, w)
        return np.where(rows > 0, out / rows, np.nan)


def calibrated_epsilon(
    metric: np.ndarray,
    human: np.ndarray,
    *,
    variant: Variant = "acc23",
    sample_rate: float = 1.0,
    seed: int = 0,
) -> tuple[float, float]:
    """(best value, smallest epsilon reaching it) of tie calibration at the item level of two
    ``(n_systems, n_items)`` matrices (for a vector, pass it as one column)."""
    pairs = _pairs(metric, human, sample_rate, seed)
    if pairs.dm.size == 0:
        return float("nan"), float("nan")
    total, eps = best_threshold(calibration(pairs, variant))
    return total / float((pairs.per_item > 0).sum()), eps


def pair_values_23(
    metric: np.ndarray,
    human: np.ndarray,
    *,
    variant: Variant = "acc23",
    epsilon: float = 0.0,
    calibrate: bool = False,
    sample_rate: float = 1.0,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(item of each pair, its value under this metric's epsilon, pairs per item) over every
    pair of systems inside each item: what mt-metrics-eval's ``PairwisePermutationSigDiff``
    swaps between two metrics, each keeping its own calibrated epsilon. Two metrics scored on
    the same cells list the same pairs in the same order."""
    eps = epsilon
    if calibrate:
        eps = calibrated_epsilon(
            metric, human, variant=variant, sample_rate=sample_rate, seed=seed
        )[1]
    pairs = item_pairs(metric, human)
    if not np.isfinite(eps):
        return pairs.item, np.full(pairs.item.size, np.nan), pairs.per_item
    values = np.asarray(WEIGHTS[variant])[pair_kinds(pairs.dm, pairs.dh, eps)]
    return pairs.item, values, pairs.per_item


def per_item_23(metric: np.ndarray, human: np.ndarray, **settings: Any) -> np.ndarray:
    """Each item's own tau23 / acc23 (NaN for an item without a pair) under the epsilon of
    :func:`pair_values_23` (``settings``): the values whose mean is the item level, which a
    permutation test over items swaps between two metrics, each keeping its own epsilon."""
    item, values, per_item = pair_values_23(metric, human, **settings)
    num = np.bincount(item, weights=values, minlength=per_item.size)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(per_item > 0, num / per_item, np.nan)


def kendall_23(x: np.ndarray, y: np.ndarray, **settings: Any) -> tuple[float, float]:
    """tau23 / acc23 of two paired vectors (``x`` the metric, ``y`` the human score; ``settings``
    as :func:`item_mean_23`); NaN for fewer than 2 pairs. No p-value: NaN."""
    xs, ys = paired_finite(x, y)
    if xs.size < 2:
        return NAN_RESULT
    return float(item_mean_23(xs[:, None], ys[:, None], **settings)[0]), float("nan")


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
    kinds = pair_kinds(
        x[..., :, None] - x[..., None, :], y[..., :, None] - y[..., None, :], epsilon
    )
    values = np.asarray(WEIGHTS[variant])[kinds]
    # the diagonal's w_s^2 ordered pairs stand for w_s (w_s - 1) pairs of copies, tied in both
    num = (ww * values).sum(axis=(-2, -1)) - total * WEIGHTS[variant][4]
    pairs = total * total - total
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total < 2, np.nan, num / pairs)


def _check(variant: str, epsilon: float, calibrate: bool, sample_rate: float, seed: int) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if not isinstance(epsilon, int | float) or not epsilon >= 0:
        raise ValueError(f"epsilon must be a number >= 0, got {epsilon!r}")
    if not isinstance(calibrate, bool):
        raise ValueError(f"calibrate must be true or false, got {calibrate!r}")
    if not isinstance(sample_rate, int | float) or not 0.0 < sample_rate <= 1.0:
        raise ValueError(f"sample_rate must be a number in (0, 1], got {sample_rate!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")


def _coefficient(
    name: str, variant: Variant, epsilon: float, calibrate: bool, sample_rate: float, seed: int
) -> Coefficient:
    _check(variant, epsilon, calibrate, sample_rate, seed)
    settings: dict[str, Any] = {
        "variant": variant,
        "epsilon": float(epsilon),
        "calibrate": calibrate,
        "sample_rate": float(sample_rate),
        "seed": seed,
    }
    sampled = sample_rate < 1.0
    return Coefficient(
        name,
        partial(kendall_23, **settings),
        levels=("item", "system"),
        # a calibrated statistic has no per-sample weighted form: its epsilon depends on the
        # whole sample, so resamples go through item_level or the generic path
        weighted=None
        if calibrate or sampled
        else partial(_weighted_23, variant=variant, epsilon=float(epsilon)),
        item_level=partial(item_mean_23, **settings),
        item_values_fixed=partial(per_item_23, **settings),
        pair_values=partial(pair_values_23, **settings),
        williams=False,
        options=tuple((k, v) for k, v in sorted(settings.items()) if k != "variant"),
    )


def acc23_coefficient(
    *, calibrate: bool = True, epsilon: float = 0.0, sample_rate: float = 1.0, seed: int = 0
) -> Coefficient:
    """``acc23``: pairwise accuracy with ties (the WMT23 segment-level statistic, with tie
    calibration by default; ``calibrate=false`` uses the fixed ``epsilon``). ``sample_rate``
    below 1 calibrates and scores on that share of the pairs (mt-metrics-eval's device for long
    inputs), drawn from a generator seeded with ``seed``."""
    return _coefficient("acc23", "acc23", epsilon, calibrate, sample_rate, seed)


def tau23_coefficient(
    *, calibrate: bool = False, epsilon: float = 0.0, sample_rate: float = 1.0, seed: int = 0
) -> Coefficient:
    """``tau_23``: Kendall's tau with ties rewarded and punished (fixed ``epsilon`` by default,
    or tie calibration; ``sample_rate`` and ``seed`` as for acc23)."""
    return _coefficient("tau_23", "tau23", epsilon, calibrate, sample_rate, seed)
