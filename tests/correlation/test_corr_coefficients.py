"""Coefficients against scipy and hand-worked examples, including ties, NaN and constants."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

from paraeval.correlation.coefficients import (
    kendall_b,
    kendall_c,
    kendall_like,
    kendall_like_counts,
    pairwise_accuracy,
    pearson,
    pearson_statistic,
    spearman,
)

NAN = float("nan")


def test_hand_worked_four_points() -> None:
    # x = 1 2 3 4, y = 1 3 2 4: deviations (-1.5 -.5 .5 1.5) and (-1.5 .5 -.5 1.5),
    # cross products sum to 2.25 - .25 - .25 + 2.25 = 4, squares sum to 5 each: r = 4/5.
    # Pairs: only (2,3) is discordant, 5 concordant of 6: tau = (5 - 1)/6.
    x = np.array([1.0, 2.0, 3.0, 4.0])
    y = np.array([1.0, 3.0, 2.0, 4.0])
    assert pearson(x, y)[0] == pytest.approx(0.8)
    assert spearman(x, y)[0] == pytest.approx(0.8)
    assert kendall_b(x, y)[0] == pytest.approx(4 / 6)
    assert kendall_c(x, y)[0] == pytest.approx(4 / 6)  # no ties: 2S/(n^2 (m-1)/m) = 8/12


def test_hand_worked_ties_kendall_b_and_c() -> None:
    # x = 1 1 2 3, y = 1 2 2 3: pairs (1,2) tied in x, (2,3) tied in y, the other 4 concordant.
    # tau_b = 4 / sqrt((6-1)(6-1)) = 0.8; tau_c = 2*4 / (4^2 * (3-1)/3) = 0.75 (3 distinct values).
    x = np.array([1.0, 1.0, 2.0, 3.0])
    y = np.array([1.0, 2.0, 2.0, 3.0])
    assert kendall_b(x, y)[0] == pytest.approx(0.8)
    assert kendall_c(x, y)[0] == pytest.approx(0.75)


@pytest.mark.parametrize(
    ("fn", "ref"),
    [
        (pearson, lambda x, y: stats.pearsonr(x, y)),
        (spearman, lambda x, y: stats.spearmanr(x, y)),
        (kendall_b, lambda x, y: stats.kendalltau(x, y, variant="b")),
        (kendall_c, lambda x, y: stats.kendalltau(x, y, variant="c")),
    ],
)
def test_matches_scipy_with_ties_and_nan(fn, ref) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(3)
    x = rng.integers(0, 5, size=40).astype(float)  # heavy ties
    y = np.round(x + rng.normal(size=40))
    x[[3, 17]] = np.nan
    y[[5, 17, 30]] = np.nan
    keep = np.isfinite(x) & np.isfinite(y)
    value, p = fn(x, y)
    expected = ref(x[keep], y[keep])
    assert value == pytest.approx(float(expected.statistic), abs=1e-12)
    assert p == pytest.approx(float(expected.pvalue), rel=1e-9)


# pairwise accuracy on constant input is defined as the field defines it (test_corr_field)
@pytest.mark.parametrize("fn", [pearson, spearman, kendall_b, kendall_c])
def test_constant_input_is_nan_not_scipys_value(fn) -> None:  # type: ignore[no-untyped-def]
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    const = np.full(5, 2.0)
    for a, b in ((x, const), (const, x)):
        value, p = fn(a, b)
        assert math.isnan(value) and math.isnan(p)


@pytest.mark.parametrize("fn", [pearson, spearman, kendall_b, kendall_c])
def test_constant_after_dropping_nan_is_nan(fn) -> None:  # type: ignore[no-untyped-def]
    x = np.array([1.0, 2.0, 3.0, 4.0])
    y = np.array([5.0, np.nan, 5.0, 5.0])  # the only differing value is missing
    assert math.isnan(fn(x, y)[0])
    # the same vector with the missing value filled in is not constant
    assert not math.isnan(fn(x, np.array([5.0, 1.0, 5.0, 5.0]))[0])


def test_too_few_pairs() -> None:
    two = (np.array([1.0, 2.0, np.nan]), np.array([2.0, 1.0, 3.0]))
    assert math.isnan(pearson(*two)[0])
    assert math.isnan(spearman(*two)[0])
    # Kendall is defined on 2 pairs: one discordant pair gives -1
    assert kendall_b(*two)[0] == pytest.approx(-1.0)
    assert math.isnan(kendall_b(np.array([1.0]), np.array([2.0]))[0])


def test_length_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="same number"):
        pearson(np.ones(3), np.ones(4))


# Hand-worked Kendall-like example, 3 systems x 2 items.
# item 0: human 3 2 1, metric .9 .9 .1 -> (s0,s1) tied in metric: discordant; (s0,s2), (s1,s2) C
# item 1: human 1 1 2, metric .5 .2 .1 -> (s0,s1) tied in human: left out by default (|0| is not
# above 0); (s0,s2), (s1,s2) D
# pooled: C = 2, D = 3 -> -0.2; with metric ties skipped: C = 2, D = 2 -> 0.
# WMT / mt-metrics-eval with threshold 0 (margin_rule="at_least": |0| >= 0) count the human tie, as
# discordant: C = 2, D = 4 -> -1/3; with metric ties skipped -0.2.
HUMAN_KL = np.array([[3.0, 1.0], [2.0, 1.0], [1.0, 2.0]])
METRIC_KL = np.array([[0.9, 0.5], [0.9, 0.2], [0.1, 0.1]])
AT_LEAST: dict[str, Any] = {"margin_rule": "at_least"}


def test_kendall_like_hand_worked() -> None:
    c, d = kendall_like_counts(METRIC_KL, HUMAN_KL)
    assert c.tolist() == [2.0, 0.0] and d.tolist() == [1.0, 2.0]
    value, p = kendall_like(METRIC_KL, HUMAN_KL)
    assert value == pytest.approx(-0.2)
    assert math.isnan(p)
    assert kendall_like(METRIC_KL, HUMAN_KL, metric_ties="skip")[0] == pytest.approx(0.0)
    c, d = kendall_like_counts(METRIC_KL, HUMAN_KL, **AT_LEAST)
    assert c.tolist() == [2.0, 0.0] and d.tolist() == [1.0, 3.0]
    assert kendall_like(METRIC_KL, HUMAN_KL, **AT_LEAST)[0] == pytest.approx(-1 / 3)
    skip = kendall_like(METRIC_KL, HUMAN_KL, metric_ties="skip", **AT_LEAST)
    assert skip[0] == pytest.approx(-0.2)


def test_kendall_like_nan_cells_and_margin() -> None:
    metric = METRIC_KL.copy()
    metric[2, 1] = np.nan  # item 1 loses (s0,s2) and (s1,s2); its human tie (s0,s1) stays
    c, d = kendall_like_counts(metric, HUMAN_KL, **AT_LEAST)
    assert c.tolist() == [2.0, 0.0] and d.tolist() == [1.0, 1.0]
    assert kendall_like(metric, HUMAN_KL, **AT_LEAST)[0] == pytest.approx(0.0)
    c, d = kendall_like_counts(metric, HUMAN_KL)
    assert c.tolist() == [2.0, 0.0] and d.tolist() == [1.0, 0.0]
    assert kendall_like(metric, HUMAN_KL)[0] == pytest.approx(1 / 3)
    # a margin of 1.5 skips every item-0 pair except (s0, s2) (human 3 vs 1), which is concordant
    c, d = kendall_like_counts(METRIC_KL, HUMAN_KL, human_margin=1.5)
    assert c.tolist() == [1.0, 0.0] and d.tolist() == [0.0, 0.0]


def test_kendall_like_constant_and_invalid() -> None:
    assert math.isnan(kendall_like(np.ones((3, 2)), HUMAN_KL)[0])
    with pytest.raises(ValueError, match="metric_ties"):
        kendall_like_counts(METRIC_KL, HUMAN_KL, metric_ties="half")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="same shape"):
        kendall_like(METRIC_KL, HUMAN_KL[:, :1])


def test_pairwise_accuracy_hand_worked() -> None:
    # metric .1 .4 .3 .3, human 1 3 2 4: (0,1) (0,2) (0,3) (1,2) agree; (1,3) disagrees;
    # (2,3) is tied in the metric and counts as wrong -> 4/6.
    metric = np.array([0.1, 0.4, 0.3, 0.3])
    assert pairwise_accuracy(metric, np.array([1.0, 3.0, 2.0, 4.0]))[0] == pytest.approx(4 / 6)
    # human 1 3 3 4: (1,2) tied in the human score but not in the metric (.4 vs .3) disagrees:
    # 3 of 6; the earlier rule (human_ties="skip") leaves it out: 3 of the remaining 5
    value, p = pairwise_accuracy(metric, np.array([1.0, 3.0, 3.0, 4.0]))
    assert value == pytest.approx(3 / 6)
    assert math.isnan(p)
    skip = pairwise_accuracy(metric, np.array([1.0, 3.0, 3.0, 4.0]), human_ties="skip")
    assert skip[0] == pytest.approx(3 / 5)
    # a NaN system is dropped: without system 3, pairs (0,1) (0,2) (1,2) all agree
    assert pairwise_accuracy(metric, np.array([1.0, 3.0, 2.0, np.nan]))[0] == pytest.approx(1.0)


def test_pearson_statistic_is_pearsons_value_bit_for_bit() -> None:
    """The value-only form (Williams' metric-metric correlations) equals scipy.stats.pearsonr's
    statistic exactly: sizes from 3 to 2,000, scales from 1e-6 to 1e6, ties, NaN, constants."""
    rng = np.random.default_rng(11)
    checked = 0
    for k in range(600):
        n = int(rng.integers(2, 2000)) if k % 10 else int(rng.integers(2, 6))
        x = rng.normal(size=n) * 10 ** rng.uniform(-6, 6) + rng.normal() * 100
        y = x * rng.uniform(-3, 3) + rng.normal(size=n) * 10 ** rng.uniform(-6, 6)
        if k % 4 == 1:
            y = np.round(y, 1)  # ties, and sometimes a constant
        if k % 4 == 2:
            x[rng.random(n) < 0.2] = np.nan
        if k % 50 == 3:
            y[:] = 7.0
        got, expected = pearson_statistic(x, y), pearson(x, y)[0]
        assert got == expected or (math.isnan(got) and math.isnan(expected)), k
        xs = np.isfinite(x) & np.isfinite(y)
        if xs.sum() >= 3 and np.ptp(x[xs]) > 0 and np.ptp(y[xs]) > 0:
            assert got == float(stats.pearsonr(x[xs], y[xs]).statistic)
            checked += 1
    assert checked > 400
