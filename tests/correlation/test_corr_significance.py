"""Williams' test, the paired permutation test and significance clusters."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

from paraeval.correlation.significance import permutation_test, significance_clusters, williams_test


def test_williams_steiger_worked_example() -> None:
    # Steiger (1980), the example reproduced in the psych::r.test documentation: n = 103,
    # r12 = .5 (M1 with verbal ability), r13 = .4 (F1 with verbal ability), r23 = .1.
    # The expected t is derived by hand from Williams' formula (Graham & Baldwin 2014, eq. 1),
    # not copied from the paper, whose exact printed p we could not check:
    #   K = 1 - .25 - .16 - .01 + 2(.5)(.4)(.1) = 0.62
    #   denominator = 2(0.62)(102/100) + ((.9)^2/4)(.9)^3 = 1.2648 + 0.1476225 = 1.4124225
    #   numerator = (.5 - .4) sqrt(102 * 1.1) = 0.1 * sqrt(112.2) = 1.0592450
    #   t = 1.0592450 / sqrt(1.4124225) = 0.891280 with n - 3 = 100 degrees of freedom
    # (Steiger reports T2 of about .89 for this example: not significant.)
    t = 1.0592450 / math.sqrt(1.4124225)
    assert t == pytest.approx(0.891280, abs=1e-6)
    p = williams_test(0.5, 0.4, 0.1, 103)
    assert p == pytest.approx(stats.t.sf(t, 100), rel=1e-6)
    assert 0.18 < p < 0.19  # one-sided; two-sided about .375


def test_williams_p_is_exactly_scipys_t_survival_function() -> None:
    rng = np.random.default_rng(7)
    for _ in range(300):
        r12, r13, r23 = rng.uniform(-0.95, 0.95, 3)
        n = int(rng.integers(4, 20_000))
        k = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23
        denom = 2 * k * (n - 1) / (n - 3) + ((r12 + r13) ** 2 / 4) * (1 - r23) ** 3
        if denom <= 0:
            continue
        t = (r12 - r13) * math.sqrt((n - 1) * (1 + r23)) / math.sqrt(denom)
        assert williams_test(r12, r13, r23, n) == float(stats.t.sf(t, n - 3))


def test_williams_direction_and_degenerate_cases() -> None:
    p_better = williams_test(0.6, 0.3, 0.5, 200)
    p_worse = williams_test(0.3, 0.6, 0.5, 200)
    assert p_better < 0.001
    assert p_better + p_worse == pytest.approx(1.0)
    assert williams_test(0.5, 0.5, 1.0, 50) == 0.5  # a metric against itself: no evidence
    assert math.isnan(williams_test(0.5, 0.4, 0.1, 3))
    assert math.isnan(williams_test(float("nan"), 0.4, 0.1, 30))


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    human = rng.normal(size=(12, 30)) + np.linspace(0, 2, 12)[:, None]
    strong = human + 0.5 * rng.normal(size=(12, 30))
    noise = rng.normal(size=(12, 30))
    return human, strong, noise


@pytest.mark.parametrize(
    ("level", "coefficient", "unit"),
    [
        ("segment", "pearson", "items"),
        ("segment", "kendall_b", "both"),
        ("segment", "spearman", "systems"),
        ("segment", "kendall_like", "items"),
        ("item", "kendall_b", "items"),
        ("item", "pearson", "both"),
        ("system", "pearson", "systems"),
        ("system", "kendall_b", "items"),
    ],
)
def test_permutation_self_is_one_and_strong_vs_noise_is_small(
    level: str, coefficient: str, unit: str
) -> None:
    human, strong, noise = _data()
    rng = np.random.default_rng(0)
    p_self = permutation_test(
        strong, strong, human, level, coefficient, rng=rng, n_resamples=200, unit=unit
    )
    assert p_self == 1.0
    p = permutation_test(
        strong, noise, human, level, coefficient, rng=rng, n_resamples=200, unit=unit
    )
    assert p < 0.05


def test_permutation_is_seeded_and_one_sided_option() -> None:
    human, strong, noise = _data(1)
    kw: dict[str, Any] = {"n_resamples": 100, "unit": "items"}
    p1 = permutation_test(
        noise, strong, human, "segment", "pearson", rng=np.random.default_rng(3), **kw
    )
    p2 = permutation_test(
        noise, strong, human, "segment", "pearson", rng=np.random.default_rng(3), **kw
    )
    assert p1 == p2
    # the worse metric first: two-sided says "different", one-sided "A better" says no
    assert p1 < 0.05
    p_greater = permutation_test(
        noise,
        strong,
        human,
        "segment",
        "pearson",
        rng=np.random.default_rng(3),
        alternative="greater",
        **kw,
    )
    assert p_greater > 0.9


def test_permutation_hand_checkable_two_items() -> None:
    # 2 items x 3 systems, unit=items: only 4 swap patterns exist. Which of them is at least as
    # extreme as the observed difference is worked out here pattern by pattern (the identity and
    # the full swap always are); p must be (1 + hits)/(1 + K) over the same seeded masks.
    from paraeval.correlation.levels import correlate

    human = np.array([[1.0, 2.0], [2.0, 1.0], [3.0, 3.0]])
    a = np.array([[1.0, 2.5], [2.0, 1.5], [3.5, 3.0]])
    b = np.array([[3.0, 1.0], [1.0, 3.0], [2.0, 2.0]])

    def z(m: np.ndarray) -> np.ndarray:
        return (m - m.mean()) / m.std()

    za, zb = z(a), z(b)
    observed = (
        correlate(a, human, "segment", "pearson").value
        - correlate(b, human, "segment", "pearson").value
    )
    extreme = {}
    for pattern in [(0, 0), (0, 1), (1, 0), (1, 1)]:
        mask = np.array(pattern, dtype=bool)[None, :]
        xa, xb = np.where(mask, zb, za), np.where(mask, za, zb)
        d = (
            correlate(xa, human, "segment", "pearson").value
            - correlate(xb, human, "segment", "pearson").value
        )
        extreme[pattern] = abs(d) >= abs(observed) - 1e-12
    rng = np.random.default_rng(0)
    n = 400
    p = permutation_test(a, b, human, "segment", "pearson", rng=rng, n_resamples=n)
    masks = np.random.default_rng(0).random((n, 1, 2)) < 0.5
    hits = sum(extreme[(int(m[0, 0]), int(m[0, 1]))] for m in masks)
    assert p == pytest.approx((1 + hits) / (1 + n))


def test_permutation_input_checks() -> None:
    human, strong, noise = _data()
    with pytest.raises(ValueError, match="items, systems, both, cells"):
        permutation_test(
            strong, noise, human, "segment", "pearson", rng=np.random.default_rng(0), unit="cell"
        )
    with pytest.raises(ValueError, match="unit='systems'"):
        permutation_test(
            strong,
            noise,
            human,
            "system",
            "pearson",
            rng=np.random.default_rng(0),
            system_metric_a=np.ones(12),
            system_metric_b=np.arange(12.0),
        )


def test_clusters_follow_mt_metrics_eval_rule() -> None:
    values = {"a": 0.9, "b": 0.85, "c": 0.5, "d": 0.45, "e": float("nan")}
    # b is not significantly worse than a; c is significantly worse than a (but not than b):
    # c starts cluster 2. d is not worse than c -> 2.
    pvalues = {
        ("a", "b"): 0.30,
        ("a", "c"): 0.01,
        ("a", "d"): 0.001,
        ("b", "c"): 0.20,
        ("b", "d"): 0.01,
        ("c", "d"): 0.40,
    }
    assert significance_clusters(values, pvalues) == {"a": 1, "b": 1, "c": 2, "d": 2}
    # with a stricter alpha nothing is significant except a-d, b-d is 0.01 -> not < 0.005
    assert significance_clusters(values, pvalues, alpha=0.005) == {"a": 1, "b": 1, "c": 1, "d": 2}
    # p equal to alpha is significant (mt-metrics-eval compares with <=)
    assert significance_clusters({"x": 0.9, "y": 0.8}, {("x", "y"): 0.05}) == {"x": 1, "y": 2}
    # keys are looked up in either order
    flipped = {(k[1], k[0]): v for k, v in pvalues.items()}
    assert significance_clusters(values, flipped) == {"a": 1, "b": 1, "c": 2, "d": 2}


def _swap_masks(seed: int, n: int, n_sys: int, n_items: int, unit: str) -> np.ndarray:
    """The swap masks the test draws: a cell is swapped under Perm-Both ("both") when exactly
    one of its system row and its item column was swapped."""
    rng = np.random.default_rng(seed)
    if unit == "both":
        return (rng.random((n, n_sys, 1)) < 0.5) ^ (rng.random((n, 1, n_items)) < 0.5)
    shape = {"items": (n, 1, n_items), "systems": (n, n_sys, 1), "cells": (n, n_sys, n_items)}
    return rng.random(shape[unit]) < 0.5


@pytest.mark.parametrize("coefficient", ["pearson", "spearman", "kendall_b", "kendall_c"])
@pytest.mark.parametrize("unit", ["items", "systems", "both", "cells"])
def test_permutation_matches_explicit_swaps(coefficient: str, unit: str) -> None:
    # the vectorised test (weighted subsets of the stacked data) against a loop that builds each
    # swapped pair of matrices and calls correlate() (scipy); tied values and missing cells
    from paraeval.correlation.levels import correlate

    rng = np.random.default_rng(4)
    human = rng.integers(0, 4, size=(5, 8)).astype(float)
    a = human + rng.integers(0, 3, size=(5, 8))
    b = rng.integers(0, 4, size=(5, 8)).astype(float)
    a[0, 1] = np.nan
    human[3, 6] = np.nan
    ok = np.isfinite(a) & np.isfinite(b) & np.isfinite(human)
    za = np.where(ok, a, np.nan)
    zb = np.where(ok, b, np.nan)
    za = (za - np.nanmean(za)) / np.nanstd(za)
    zb = (zb - np.nanmean(zb)) / np.nanstd(zb)
    h = np.where(ok, human, np.nan)
    n = 60
    masks = _swap_masks(7, n, 5, 8, unit)

    def delta(xa: np.ndarray, xb: np.ndarray) -> float:
        return (
            correlate(xa, h, "segment", coefficient).value
            - correlate(xb, h, "segment", coefficient).value
        )

    observed = delta(za, zb)
    perm = np.array([delta(np.where(m, zb, za), np.where(m, za, zb)) for m in masks])
    perm = perm[np.isfinite(perm)]
    hits = int((np.abs(perm) >= abs(observed) - 1e-12).sum())
    p = permutation_test(
        a, b, human, "segment", coefficient, rng=np.random.default_rng(7), n_resamples=n, unit=unit
    )
    assert p == pytest.approx((1 + hits) / (1 + perm.size))


@pytest.mark.parametrize("level", ["segment", "item", "system"])
def test_permutation_without_common_cells_is_nan(level: str) -> None:
    human, strong, noise = _data()
    missing = np.full(human.shape, np.nan)
    p = permutation_test(
        strong, noise, missing, level, "kendall_b", rng=np.random.default_rng(0), n_resamples=10
    )
    assert math.isnan(p)


@pytest.mark.parametrize("item_nan", ["skip", "zero"])
@pytest.mark.parametrize("unit", ["items", "systems", "both", "cells"])
@pytest.mark.parametrize(
    ("level", "coefficient"),
    [
        ("item", "kendall_b"),
        ("item", "pearson"),
        ("item", "kendall_like"),
        ("segment", "kendall_like"),
        ("system", "spearman"),
        ("system", "pairwise_accuracy"),
    ],
)
def test_permutation_other_levels_match_explicit_swaps(
    level: str, coefficient: str, unit: str, item_nan: str
) -> None:
    from paraeval.correlation.levels import correlate

    rng = np.random.default_rng(5)
    human = rng.integers(0, 3, size=(4, 7)).astype(float)
    a = human + rng.integers(0, 2, size=(4, 7))
    b = rng.integers(0, 3, size=(4, 7)).astype(float)
    human[1, 2] = np.nan
    ok = np.isfinite(a) & np.isfinite(b) & np.isfinite(human)
    # missing cells are left out of all three matrices, then both metrics are z-scored
    za = np.where(ok, (a - a[ok].mean()) / a[ok].std(), np.nan)
    zb = np.where(ok, (b - b[ok].mean()) / b[ok].std(), np.nan)
    h = np.where(ok, human, np.nan)
    n = 40
    masks = _swap_masks(1, n, 4, 7, unit)

    def corr(x: np.ndarray) -> float:
        return correlate(x, h, level, coefficient, item_nan=item_nan).value

    observed = corr(za) - corr(zb)
    perm = np.array([corr(np.where(m, zb, za)) - corr(np.where(m, za, zb)) for m in masks])
    perm = perm[np.isfinite(perm)]
    hits = int((np.abs(perm) >= abs(observed) - 1e-12).sum())
    p = permutation_test(
        a,
        b,
        human,
        level,
        coefficient,
        rng=np.random.default_rng(1),
        n_resamples=n,
        unit=unit,
        item_nan=item_nan,
    )
    assert p == pytest.approx((1 + hits) / (1 + perm.size))
