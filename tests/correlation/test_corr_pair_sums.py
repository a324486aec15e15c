"""The compiled Kendall pair sums (``_pairs.kendall_pair_sums``) against the broadcast
(rows, n, n) products they replace, and the weighted tau-b through them against scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from paraeval.correlation._pairs import kendall_pair_sums
from paraeval.correlation.weighted import integer_pair_sums, weighted_kendall_b


def _broadcast_sums(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, ...]:
    ww = w[..., :, None] * w[..., None, :]
    sx = np.sign(x[..., :, None] - x[..., None, :])
    sy = np.sign(y[..., :, None] - y[..., None, :])
    return (
        (ww * sx * sy).sum(axis=(-2, -1)),
        (ww * (sx == 0)).sum(axis=(-2, -1)),
        (ww * (sy == 0)).sum(axis=(-2, -1)),
    )


@pytest.mark.parametrize("seed", range(40))
def test_pair_sums_equal_the_broadcast_products(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows, n = int(rng.integers(1, 30)), int(rng.integers(1, 40))
    # ties in both variables (few distinct values) and in neither (continuous scores)
    x = rng.integers(0, 4, (rows, n)).astype(float) if seed % 2 else rng.normal(size=(rows, n))
    y = rng.integers(0, 5, (rows, n)).astype(float)
    w = rng.integers(0, 4, (rows, n)).astype(float) if seed % 3 else np.ones((rows, n))
    got = kendall_pair_sums(x, y, w)
    for a, b in zip(got, _broadcast_sums(x, y, w), strict=True):
        assert np.array_equal(a, b)


def test_other_inputs_take_the_broadcast_path() -> None:
    x, y = np.arange(6.0)[None], np.array([[1.0, 0, 3, 2, 5, 4]])
    assert integer_pair_sums(x, y, np.ones((1, 6))) is not None
    assert integer_pair_sums(x, y, np.full((1, 6), 0.5)) is None  # weights not integers
    assert integer_pair_sums(np.where(x > 2, np.nan, x), y, np.ones((1, 6))) is None


@pytest.mark.parametrize("seed", range(10))
def test_unit_weights_give_scipy_tau_b(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, (5, 20)).astype(float)
    y = rng.normal(size=(5, 20)).round(1)
    got = weighted_kendall_b(x, y, np.ones_like(x))
    want = [stats.kendalltau(a, b).statistic for a, b in zip(x, y, strict=True)]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_item_weight_forms_in_float32_equal_float64(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from paraeval.correlation import _pairs

    rng = np.random.default_rng(seed)
    n_items, per_item = 30, int(rng.integers(2, 12))
    item = np.repeat(np.arange(n_items), per_item)
    x = rng.normal(size=item.size).round(1)
    y = rng.integers(0, 5, item.size).astype(float)
    mats = _pairs.item_pair_matrices(x, y, item, n_items)
    cells = np.bincount(item, minlength=n_items).astype(float)
    k = rng.multinomial(n_items, np.ones(n_items) / n_items, size=200).astype(float)
    assert _pairs._exact_in_float32(k, mats)
    fast = _pairs.kendall_b_from_item_weights(mats, cells, k)
    monkeypatch.setattr(_pairs, "_exact_in_float32", lambda k, m: False)
    assert np.array_equal(fast, _pairs.kendall_b_from_item_weights(mats, cells, k), equal_nan=True)


def test_float32_only_below_its_exact_range() -> None:
    from paraeval.correlation._pairs import _exact_in_float32

    k = np.ones((2, 4))
    assert _exact_in_float32(k, np.full((4, 4, 4), 1000.0))
    assert not _exact_in_float32(k, np.full((4, 4, 4), 2.0**23))  # 4 * 2**23 = 2**25
    assert not _exact_in_float32(k * 0.5, np.ones((4, 4, 4)))


def _broadcast_midranks(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    less = (x[..., None, :] < x[..., :, None]).astype(float)
    equal = (x[..., None, :] == x[..., :, None]).astype(float)
    below = np.einsum("...st,...t->...s", less, w)
    tied = np.einsum("...st,...t->...s", equal, w)
    return below + (tied + 1.0) / 2.0


@pytest.mark.parametrize("seed", range(30))
def test_midranks_equal_the_broadcast_products(seed: int) -> None:
    from paraeval.correlation.weighted import pair_midranks

    rng = np.random.default_rng(seed)
    rows, n = int(rng.integers(1, 30)), int(rng.integers(1, 40))
    x = rng.integers(0, 5, (rows, n)).astype(float) if seed % 2 else rng.normal(size=(rows, n))
    if seed % 5 == 0:
        x[0, 0] = np.nan  # compares false both ways, as in the broadcast form
    w = rng.integers(0, 4, (rows, n)).astype(float) if seed % 3 else np.ones((rows, n))
    assert np.array_equal(pair_midranks(x, w), _broadcast_midranks(x, w), equal_nan=True)


def test_midranks_of_unit_weights_are_scipys() -> None:
    from paraeval.correlation.weighted import pair_midranks

    rng = np.random.default_rng(7)
    x = rng.integers(0, 6, (4, 25)).astype(float)
    want = np.stack([stats.rankdata(row) for row in x])
    assert np.array_equal(pair_midranks(x, np.ones_like(x)), want)
    # fractional weights keep the broadcast form
    w = np.full(x.shape, 0.5)
    assert np.array_equal(pair_midranks(x, w), _broadcast_midranks(x, w))
