"""Soft pairwise accuracy under resampling: the form that keeps the human p-values and the sign
matrices on the set of resamples gives, for every metric sharing the set, the numbers of SPA
computed on each resampled matrix."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from paraeval.correlation.bootstrap import resampled_values
from paraeval.correlation.resamples import draw_resamples
from paraeval.correlation.spa import soft_pairwise_accuracy_value


@pytest.mark.parametrize("unit", ["items", "systems", "both"])
def test_resampled_spa_equals_spa_of_each_resampled_matrix(unit: str) -> None:
    rng = np.random.default_rng(3)
    human = rng.normal(size=(7, 30))
    human[:, rng.random(30) < 0.2] = np.nan  # items not every system has: left out
    metrics = [human + rng.normal(scale=s, size=human.shape) for s in (0.3, 1.0, 3.0)]
    metrics[2][0, 4] = np.nan
    res = draw_resamples(np.random.default_rng(1), 7, 30, 40, unit)
    # float32 sums: one BLAS thread, as the table computes them
    memo: dict[Any, Any] = {}
    with threadpool_limits(1):
        for metric in metrics:
            got = resampled_values(
                metric, human, "system", "soft_pairwise_accuracy", res, memo=memo
            )
            for b in range(res.n_resamples):
                mb, hb = metric, human
                if res.item_idx is not None:
                    mb, hb = mb[:, res.item_idx[b]], hb[:, res.item_idx[b]]
                if res.sys_idx is not None:
                    mb, hb = mb[res.sys_idx[b]], hb[res.sys_idx[b]]
                expected = soft_pairwise_accuracy_value(mb, hb)
                assert got[b] == expected or (np.isnan(got[b]) and np.isnan(expected))
    assert memo  # the human side was kept for the next metric
