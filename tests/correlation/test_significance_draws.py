"""The permutation draws a significance table keeps for the overall ranking, and the batched soft
pairwise accuracy its permutations use."""

from __future__ import annotations

import numpy as np
import pytest

from paraeval.correlation import correlate, significance_table
from paraeval.correlation.significance import EarlyStop, permutation_test
from paraeval.correlation.spa import (
    pairwise_p_values,
    sign_matrix,
    soft_pairwise_accuracy_batch,
    soft_pairwise_accuracy_value,
)


def _data(n_sys: int = 6, n_items: int = 40) -> tuple[dict[str, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(7)
    human = rng.normal(size=(n_sys, n_items)) + np.arange(n_sys)[:, None]
    good = human + rng.normal(scale=0.5, size=human.shape)
    weak = human + rng.normal(scale=2.0, size=human.shape)
    # "ter" is lower-better: negated, it agrees as well as "good" and more than "weak"
    ter = -(human + rng.normal(scale=0.7, size=human.shape))
    return {"weak": weak, "ter": ter, "good": good}, human


@pytest.mark.parametrize(
    ("level", "coefficient", "unit"),
    [
        ("segment", "pearson", "cells"),
        ("system", "pearson", "systems"),
        ("system", "soft_pairwise_accuracy", "cells"),
        ("item", "acc23", "pairs"),
    ],
)
def test_draws_reproduce_each_rows_p_value(level: str, coefficient: str, unit: str) -> None:
    metrics, human = _data()
    draws: dict[tuple[str, ...], np.ndarray] = {}
    k = 60
    rows = significance_table(
        metrics,
        {"human_x": human},
        level=level,
        coefficient=coefficient,
        method="permutation",
        rng=np.random.default_rng(0),
        n_resamples=k,
        unit=unit,
        alternative="greater",
        lower_is_better={"ter"},
        draws=draws,
    )
    assert len(draws) == len(rows) == 3
    for row in rows:
        d = draws[("human_x", level, coefficient, row["metric_a"], row["metric_b"])]
        assert d.shape == (k,)
        # oriented as the row and direction-adjusted: r_a/r_b keep their printed sign
        ra = -row["r_a"] if row["adjusted_a"] else row["r_a"]
        rb = -row["r_b"] if row["adjusted_b"] else row["r_b"]
        assert ra >= rb
        hits = int((d >= ra - rb - 1e-12).sum())
        assert row["p_value"] == pytest.approx((1 + hits) / (1 + k), abs=1e-15)
    assert any(r["adjusted_a"] or r["adjusted_b"] for r in rows)


def test_williams_keeps_no_draws_and_early_stopping_keeps_the_blocks_run() -> None:
    metrics, human = _data()
    draws: dict[tuple[str, ...], np.ndarray] = {}
    args = {"level": "segment", "coefficient": "pearson", "rng": np.random.default_rng(0)}
    significance_table(metrics, {"h": human}, method="williams", draws=draws, **args)
    assert draws == {}
    kept: list[np.ndarray] = []
    a, b = metrics["good"], metrics["weak"]
    early = EarlyStop(block_size=10, early_min=0.0, early_max=0.0)
    p = permutation_test(
        a, b, human, "segment", "pearson", rng=np.random.default_rng(0), n_resamples=100,
        unit="cells", alternative="greater", early_stop=early, null_draws=kept,
    )  # fmt: skip
    # p > early_max = 0 after the first block: it stops there, and kept what it counted
    assert [len(x) for x in kept] == [10]
    observed = correlate(a, human, "segment", "pearson").value
    observed -= correlate(b, human, "segment", "pearson").value
    assert p == pytest.approx((1 + int((kept[0] >= observed - 1e-12).sum())) / 11, abs=1e-15)


def test_batched_spa_is_the_spa_of_each_matrix() -> None:
    rng = np.random.default_rng(3)
    human = rng.normal(size=(6, 40))
    human[0, 3] = np.nan  # item 3 is left out
    human[5] = np.nan  # a system without any score is left out
    a = human + rng.normal(size=human.shape)
    b = human + rng.normal(size=human.shape)
    hybrids = np.where(rng.random((20, *human.shape)) < 0.5, b, a)
    hybrids[:, ~np.isfinite(human)] = np.nan
    memo: dict = {}  # shared by the batches of one test: the signs and human p-values made once
    got = np.concatenate(
        [soft_pairwise_accuracy_batch(hybrids[:7], human, memo),
         soft_pairwise_accuracy_batch(hybrids[7:], human, memo)]
    )  # fmt: skip
    # each matrix on its own, its p-values as mt-metrics-eval's pce computes them
    keep = np.ix_(np.arange(5), np.delete(np.arange(40), 3))
    signs = sign_matrix(39)
    i, j = np.triu_indices(5, k=1)
    ph = pairwise_p_values(human[keep], signs)[i, j]
    expected = [1 - np.abs(ph - pairwise_p_values(m[keep], signs)[i, j]).mean() for m in hybrids]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    assert [soft_pairwise_accuracy_value(m, human) for m in hybrids] == got.tolist()
    assert np.ptp(got) > 0
    assert np.isnan(soft_pairwise_accuracy_batch(hybrids[:2, :1], human[:1])).all()
