"""Levels (segment, item, system) against scipy on small hand-checkable matrices."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from paraeval.correlation import configure
from paraeval.correlation.levels import LEVELS, correlate, system_scores, valid_combination

# 4 systems x 5 items; NaN = no output / no rating
METRIC = np.array(
    [
        [0.1, 0.5, 0.3, 0.9, np.nan],
        [0.2, 0.4, 0.3, 0.8, 0.6],
        [0.4, 0.4, 0.1, 0.7, 0.2],
        [0.3, 0.1, 0.3, 0.6, 0.5],
    ]
)
HUMAN = np.array(
    [
        [1.0, 4.0, 2.0, 5.0, 3.0],
        [2.0, 3.0, 2.0, 4.0, np.nan],
        [4.0, 3.0, 2.0, 3.0, 1.0],
        [3.0, 1.0, 2.0, 2.0, 4.0],
    ]
)
SCIPY = {
    "pearson": lambda x, y: stats.pearsonr(x, y).statistic,
    "spearman": lambda x, y: stats.spearmanr(x, y).statistic,
    "kendall_b": lambda x, y: stats.kendalltau(x, y).statistic,
    "kendall_c": lambda x, y: stats.kendalltau(x, y, variant="c").statistic,
}


@pytest.mark.parametrize("coefficient", list(SCIPY))
def test_segment_level_pools_finite_cells(coefficient: str) -> None:
    ok = np.isfinite(METRIC) & np.isfinite(HUMAN)
    corr = correlate(METRIC, HUMAN, "segment", coefficient)
    assert corr.value == pytest.approx(SCIPY[coefficient](METRIC[ok], HUMAN[ok]), abs=1e-12)
    assert (corr.n, corr.n_dropped) == (18, 2)
    assert 0.0 <= corr.p_value <= 1.0


@pytest.mark.parametrize("coefficient", list(SCIPY))
def test_item_level_mean_of_per_item_values(coefficient: str) -> None:
    # item 2: human constant (2 2 2 2) -> undefined; item 4: only systems 2 and 3 have both
    # scores -> undefined for Pearson/Spearman (n < 3), defined for Kendall (n >= 2)
    min_n = 3 if coefficient in ("pearson", "spearman") else 2
    per_item = []
    for j in range(METRIC.shape[1]):
        ok = np.isfinite(METRIC[:, j]) & np.isfinite(HUMAN[:, j])
        x, y = METRIC[ok, j], HUMAN[ok, j]
        undefined = x.size < min_n or np.all(y == y[0]) or np.all(x == x[0])
        per_item.append(np.nan if undefined else SCIPY[coefficient](x, y))
    values = np.array(per_item)
    n_defined = 3 if min_n == 3 else 4
    assert math.isnan(values[2]) and np.isfinite(values).sum() == n_defined

    skip = correlate(METRIC, HUMAN, "item", coefficient)
    assert skip.value == pytest.approx(np.nanmean(values), abs=1e-12)
    assert (skip.n, skip.n_dropped) == (n_defined, 5 - n_defined)
    assert math.isnan(skip.p_value)

    zero = correlate(METRIC, HUMAN, "item", coefficient, item_nan="zero")
    assert zero.value == pytest.approx(np.nansum(values) / 5, abs=1e-12)
    assert (zero.n, zero.n_dropped) == (5, 5 - n_defined)


def test_item_level_kendall_like_hand_worked() -> None:
    # item with human 3 2 1 / metric .9 .9 .1 -> C 2, D 1 -> 1/3; item with human 1 1 2 /
    # metric .5 .2 .1 -> the human tie (s0, s1) is left out (|0| is not above 0), C 0, D 2 -> -1.
    # Mean -1/3; pooled at the segment level: (2 - 3) / 5.
    human = np.array([[3.0, 1.0], [2.0, 1.0], [1.0, 2.0]])
    metric = np.array([[0.9, 0.5], [0.9, 0.2], [0.1, 0.1]])
    assert correlate(metric, human, "item", "kendall_like").value == pytest.approx(-1 / 3)
    assert correlate(metric, human, "segment", "kendall_like").value == pytest.approx(-0.2)
    # mt-metrics-eval's rule (|0| >= 0) counts the human tie as discordant: pooled (2 - 4) / 6
    field = configure("kendall_like", {"margin_rule": "at_least"})
    assert correlate(metric, human, "segment", field).value == pytest.approx(-1 / 3)
    assert correlate(metric, human, "item", field).value == pytest.approx(-1 / 3)


@pytest.mark.parametrize("coefficient", list(SCIPY))
def test_system_level_means(coefficient: str) -> None:
    x = np.array([np.mean(r[np.isfinite(r)]) for r in METRIC])
    y = np.array([np.mean(r[np.isfinite(r)]) for r in HUMAN])
    corr = correlate(METRIC, HUMAN, "system", coefficient)
    if coefficient in ("pearson", "spearman", "kendall_b", "kendall_c"):
        assert corr.value == pytest.approx(SCIPY[coefficient](x, y), abs=1e-12)
    assert (corr.n, corr.n_dropped) == (4, 0)


def test_system_level_uses_corpus_scores_and_drops_missing_systems() -> None:
    corpus = np.array([0.9, 0.1, 0.5, np.nan])
    y = system_scores(METRIC, HUMAN)[1]
    corr = correlate(METRIC, HUMAN, "system", "pearson", system_metric=corpus)
    assert corr.value == pytest.approx(stats.pearsonr(corpus[:3], y[:3]).statistic)
    assert (corr.n, corr.n_dropped) == (3, 1)
    # pairwise accuracy: corpus .9 .1 .5 vs human means 3, 2.75, 2.6 -> only (0,1), (0,2) agree
    assert y[:3] == pytest.approx([3.0, 2.75, 2.6])
    acc = correlate(METRIC, HUMAN, "system", "pairwise_accuracy", system_metric=corpus)
    assert acc.value == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="one score per system"):
        correlate(METRIC, HUMAN, "system", "pearson", system_metric=np.ones(3))


def test_constant_metric_is_nan_at_every_level() -> None:
    const = np.where(np.isfinite(METRIC), 0.5, np.nan)
    for level in LEVELS:
        corr = correlate(const, HUMAN, level, "pearson")
        assert math.isnan(corr.value), level


@pytest.mark.parametrize(
    ("level", "coefficient"),
    [("system", "kendall_like"), ("segment", "pairwise_accuracy"), ("item", "pairwise_accuracy")],
)
def test_invalid_combinations_raise(level: str, coefficient: str) -> None:
    assert not valid_combination(level, coefficient)
    with pytest.raises(ValueError, match="not defined at the"):
        correlate(METRIC, HUMAN, level, coefficient)


def test_unknown_names_list_the_choices() -> None:
    with pytest.raises(ValueError, match="segment, item, system"):
        correlate(METRIC, HUMAN, "corpus", "pearson")
    with pytest.raises(ValueError, match="kendall_b"):
        correlate(METRIC, HUMAN, "segment", "kendall")
    with pytest.raises(ValueError, match="item_nan"):
        correlate(METRIC, HUMAN, "item", "pearson", item_nan="drop")
    with pytest.raises(ValueError, match="same shape"):
        correlate(METRIC, HUMAN[:, :3], "segment", "pearson")
