"""Micro averaging at the item level (mt-metrics-eval's ``AverageCorrelation(macro=False)``):
each item's value weighted by its scored systems, in the table, the bootstrap and the permutation
test."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from paraeval.correlation import correlate, correlation_table, permutation_test
from paraeval.correlation.bootstrap import resampled_values
from paraeval.correlation.resamples import draw_resamples


def test_mt_metrics_eval_micro_averaging_case() -> None:
    # stats_test.py testMicroAveraging: gold [1, None, 3, 4, 5, 6], metric [2, 1, 8, 3, 5, 6] as
    # 2 rows averaged by row; weights 2 and 3 (the scored entries). Pearson on two values is NaN
    # here (a listed deviation), so the case is worked with Kendall's tau-b, whose value on two
    # values is defined in both. paraeval's item level averages columns: the rows are passed as
    # columns.
    gold = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]]).T
    metric = np.array([[2.0, 1.0, 8.0], [3.0, 5.0, 6.0]]).T
    t1 = stats.kendalltau([1, 3], [2, 8]).statistic
    t2 = stats.kendalltau([4, 5, 6], [3, 5, 6]).statistic
    micro = correlate(metric, gold, "item", "kendall_b", item_average="micro")
    macro = correlate(metric, gold, "item", "kendall_b")
    assert micro.value == pytest.approx((2 * t1 + 3 * t2) / 5)
    assert macro.value == pytest.approx((t1 + t2) / 2)
    assert micro.n == macro.n == 2
    with pytest.raises(ValueError, match="item_average must be one of"):
        correlate(metric, gold, "item", "kendall_b", item_average="mean")


def _matrices() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    h = rng.normal(size=(6, 15))
    m = h + rng.normal(size=h.shape)
    # items with different numbers of scored systems, so the weights matter
    h[rng.random(h.shape) < 0.3] = np.nan
    return m, h


@pytest.mark.parametrize("unit", ["items", "both"])
def test_resamples_weigh_items_by_their_resampled_systems(unit: str) -> None:
    m, h = _matrices()
    res = draw_resamples(np.random.default_rng(2), 6, 15, 25, unit)
    got = resampled_values(m, h, "item", "pearson", res, item_average="micro")
    for b in range(res.n_resamples):
        mb, hb = m[:, res.item_idx[b]], h[:, res.item_idx[b]]  # type: ignore[index]
        if res.sys_idx is not None:
            mb, hb = mb[res.sys_idx[b]], hb[res.sys_idx[b]]
        expected = correlate(mb, hb, "item", "pearson", item_average="micro").value
        assert got[b] == pytest.approx(expected, abs=1e-12, nan_ok=True)


def test_table_and_permutation_test_take_the_setting() -> None:
    m, h = _matrices()
    rows = {
        avg: correlation_table(
            {"m": m},
            {"h": h},
            levels=("item",),
            coefficients=("pearson",),
            item_average=avg,
            rng=np.random.default_rng(0),
            n_resamples=50,
        )[0]
        for avg in ("macro", "micro")
    }
    assert rows["micro"]["value"] == correlate(m, h, "item", "pearson", item_average="micro").value
    assert rows["micro"]["value"] != pytest.approx(rows["macro"]["value"])
    # the permutation test swaps whole items: its exact p enumerates every swap pattern of the
    # per-item values, weighted by the items' scored systems
    m, h = m[:, :10], h[:, :10]
    other = np.random.default_rng(9).normal(size=m.shape) + 0.5 * np.nan_to_num(h)
    # per-item values under paraeval's NaN policy (Pearson on two values is NaN)
    va = np.array([correlate(m[:, [i]], h[:, [i]], "item", "pearson").value for i in range(10)])
    vb = np.array([correlate(other[:, [i]], h[:, [i]], "item", "pearson").value for i in range(10)])
    w = (np.isfinite(m) & np.isfinite(h)).sum(axis=0).astype(float)
    ok = np.isfinite(va) & np.isfinite(vb)
    term = (w * (va - vb))[ok] / w[ok].sum()
    signs = np.array(list(itertools.product([1.0, -1.0], repeat=int(ok.sum()))))
    exact = float(np.mean(np.abs(signs @ term) >= abs(term.sum()) - 1e-12))
    k = 20_000
    p = permutation_test(
        m,
        other,
        h,
        "item",
        "pearson",
        rng=np.random.default_rng(1),
        n_resamples=k,
        item_average="micro",
    )
    assert p == pytest.approx(exact, abs=4 * np.sqrt(exact * (1 - exact) / k) + 1e-4)
    macro = permutation_test(
        m, other, h, "item", "pearson", rng=np.random.default_rng(1), n_resamples=k
    )
    assert macro != p
