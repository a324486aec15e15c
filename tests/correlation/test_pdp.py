"""Pairwise Difference Pearson: mt-metrics-eval's pinned test numbers, the definition over
explicitly listed pairs, and its resampled and batched forms against the plain one."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from paraeval.correlation import COEFFICIENTS, correlate, permutation_test
from paraeval.correlation.bootstrap import resampled_values
from paraeval.correlation.pdp import pdp
from paraeval.correlation.resamples import draw_resamples


def test_mt_metrics_eval_pinned_values() -> None:
    # stats_test.py testPearsonPdp: Correlation(2, gold, metric) is 2 systems x 3 items;
    # average_by="item", pdp=True -> 0.926
    gold = np.array([1, 2, 3, 4, 5, 6], dtype=float).reshape(2, 3)
    metric = np.array([2, 1, 4, 3, 3, 7], dtype=float).reshape(2, 3)
    assert pdp(metric, gold)[0] == pytest.approx(0.926, abs=5e-4)
    # testPdpWithAveragingAndNones: a missing gold score drops its item's pairs -> 0.968
    gold = np.array([1, 5, np.nan, 10, 2, 12], dtype=float).reshape(2, 3)
    metric = np.array([3, 15, 1, 20, 4, 24], dtype=float).reshape(2, 3)
    assert correlate(metric, gold, "segment", "pdp").value == pytest.approx(0.968, abs=5e-4)


def _by_definition(m: np.ndarray, h: np.ndarray) -> float:
    """Pearson's r over both orders of every pair inside each item (and the zero self-pairs),
    as mt-metrics-eval enumerates them."""
    dh, dm = [], []
    for i in range(m.shape[1]):
        ok = np.isfinite(m[:, i]) & np.isfinite(h[:, i])
        x, y = m[ok, i], h[ok, i]
        for s, t in itertools.product(range(x.size), repeat=2):
            dm.append(x[s] - x[t])
            dh.append(y[s] - y[t])
    return float(np.corrcoef(dh, dm)[0, 1])


def test_equals_pearson_over_the_listed_pairwise_differences() -> None:
    rng = np.random.default_rng(4)
    for _ in range(30):
        h = rng.normal(size=(5, 7)) * 10 + 50
        m = h + rng.normal(size=h.shape) * 5
        m[rng.random(m.shape) < 0.15] = np.nan
        assert pdp(m, h)[0] == pytest.approx(_by_definition(m, h), abs=1e-12)
    # one pair in all, or a metric constant inside every item: NaN
    assert np.isnan(pdp(np.array([[1.0], [2.0]]), np.array([[3.0], [1.0]]))[0])
    assert np.isnan(pdp(np.ones((3, 4)), rng.normal(size=(3, 4)))[0])
    assert COEFFICIENTS["pdp"].levels == ("segment",)


@pytest.mark.parametrize("unit", ["items", "both"])
def test_resampled_values_equal_the_resampled_matrices(unit: str) -> None:
    rng = np.random.default_rng(8)
    h = rng.normal(size=(6, 20))
    m = h + rng.normal(size=h.shape)
    res = draw_resamples(np.random.default_rng(1), 6, 20, 30, unit)
    got = resampled_values(m, h, "segment", "pdp", res)
    for b in range(res.n_resamples):
        mb, hb = m[:, res.item_idx[b]], h[:, res.item_idx[b]]  # type: ignore[index]
        if res.sys_idx is not None:
            mb, hb = mb[res.sys_idx[b]], hb[res.sys_idx[b]]
        assert got[b] == pytest.approx(pdp(mb, hb)[0], abs=1e-12)


def test_permutation_test_uses_the_batched_form() -> None:
    rng = np.random.default_rng(3)
    h = rng.normal(size=(5, 30))
    good = h + rng.normal(scale=0.3, size=h.shape)
    bad = rng.normal(size=h.shape)
    p = permutation_test(good, bad, h, "segment", "pdp", rng=rng, n_resamples=200, unit="cells")
    assert p == pytest.approx(1 / 201)
    assert permutation_test(good, good, h, "segment", "pdp", rng=rng, n_resamples=50) == 1.0
