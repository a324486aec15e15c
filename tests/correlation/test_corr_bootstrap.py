"""Bootstrap: the vectorised resampled values equal correlate() on explicitly resampled matrices."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest

from paraeval.correlation.bootstrap import (
    bootstrap_ci,
    bootstrap_distribution,
    percentile_interval,
    resampled_values,
    stats_system_metric_fn,
)
from paraeval.correlation.catalog import COEFFICIENTS
from paraeval.correlation.coefficients import kendall_like_counts
from paraeval.correlation.levels import LEVELS, UNITS, correlate, valid_combination
from paraeval.correlation.resamples import counts, draw_resamples, item_blocks


def _small_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    metric = rng.integers(0, 4, size=(5, 9)).astype(float)  # few values: many ties
    human = np.round(metric + rng.normal(size=(5, 9)))
    metric[0, 3] = np.nan
    human[2, 5] = np.nan
    human[:, 7] = 2.0  # an item without human variation
    return metric, human


def _reference(
    m: np.ndarray,
    h: np.ndarray,
    level: str,
    coefficient: str,
    system_metric: np.ndarray | None = None,
    item_nan: str = "skip",
) -> float:
    """correlate(), except that the item level is rebuilt from scipy-based scalar functions item
    by item (correlate's item level shares the batched code with the bootstrap)."""
    if level != "item" or COEFFICIENTS[coefficient].item_level is not None:
        # a statistic of the whole item matrix (one calibrated epsilon) is its own reference;
        # its per-item arithmetic is worked by hand in test_corr_field
        return correlate(
            m, h, level, coefficient, system_metric=system_metric, item_nan=item_nan
        ).value
    values = []
    for j in range(m.shape[1]):
        if coefficient == "kendall_like":
            c, d = kendall_like_counts(m[:, j : j + 1], h[:, j : j + 1])
            values.append((c[0] - d[0]) / (c[0] + d[0]) if c[0] + d[0] > 0 else np.nan)
        else:
            values.append(COEFFICIENTS[coefficient].fn(m[:, j], h[:, j])[0])
    v = np.array(values)
    if item_nan == "zero":
        return float(np.where(np.isnan(v), 0.0, v).mean())
    return float(v[~np.isnan(v)].mean()) if (~np.isnan(v)).any() else float("nan")


def _explicit(
    metric: np.ndarray,
    human: np.ndarray,
    level: str,
    coefficient: str,
    res,  # type: ignore[no-untyped-def]
    system_metric_fn=None,  # type: ignore[no-untyped-def]
) -> np.ndarray:
    """The reference: build every resampled matrix and call correlate() (scipy) on it."""
    out = []
    for b in range(res.n_resamples):
        m, h = metric, human
        sm = None
        if res.item_idx is not None:
            m, h = m[:, res.item_idx[b]], h[:, res.item_idx[b]]
            if system_metric_fn is not None:
                sm = system_metric_fn(res.item_idx[b])
        if res.sys_idx is not None:
            m, h = m[res.sys_idx[b]], h[res.sys_idx[b]]
            if sm is not None:
                sm = sm[res.sys_idx[b]]
        out.append(_reference(m, h, level, coefficient, system_metric=sm))
    return np.array(out)


CASES = [
    (level, coefficient, unit)
    for level, coefficient, unit in itertools.product(LEVELS, COEFFICIENTS, UNITS)
    if valid_combination(level, coefficient)
]


@pytest.mark.parametrize(("level", "coefficient", "unit"), CASES)
def test_vectorised_equals_explicit_resampling(level: str, coefficient: str, unit: str) -> None:
    metric, human = _small_data()
    res = draw_resamples(np.random.default_rng(5), metric.shape[0], metric.shape[1], 25, unit)
    got = resampled_values(metric, human, level, coefficient, res)
    want = _explicit(metric, human, level, coefficient, res)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


@pytest.mark.parametrize("coefficient", ["pearson", "spearman", "kendall_b", "kendall_c"])
def test_constant_resamples_are_nan(coefficient: str) -> None:
    # only item 0 varies: every resample that misses it is constant -> NaN, never scipy's value
    metric = np.zeros((3, 4))
    metric[:, 0] = [1.0, 2.0, 3.0]
    human = np.arange(12.0).reshape(3, 4)
    res = draw_resamples(np.random.default_rng(0), 3, 4, 40, "items")
    got = resampled_values(metric, human, "segment", coefficient, res)
    want = _explicit(metric, human, "segment", coefficient, res)
    assert res.item_idx is not None
    missed = np.all(res.item_idx != 0, axis=1)
    assert missed.any() and (~missed).any()
    assert np.isnan(got[missed]).all()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


@pytest.mark.parametrize("coefficient", ["spearman", "kendall_b", "kendall_c"])
def test_larger_tied_segment_pool(coefficient: str) -> None:
    # 600 cells, 7 distinct metric values: exercises every merge level and the tie corrections
    rng = np.random.default_rng(2)
    metric = rng.integers(0, 7, size=(20, 30)).astype(float)
    human = np.round(metric / 2 + rng.normal(size=(20, 30)))
    metric[rng.random((20, 30)) < 0.05] = np.nan
    res = draw_resamples(np.random.default_rng(9), 20, 30, 12, "both")
    got = resampled_values(metric, human, "segment", coefficient, res)
    want = _explicit(metric, human, "segment", coefficient, res)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


@pytest.mark.parametrize("n_resamples", [50, 130])  # within one block of resamples, across three
def test_spearman_by_items_equals_the_cell_weight_path(n_resamples: int) -> None:
    """Under item resampling Spearman takes a compiled pass over tie groups; its sums are exact,
    so it gives the very numbers of the (cells, resamples) path, and scipy's within rounding."""
    from paraeval.correlation.fixed_pairs import FixedPairs
    from paraeval.correlation.resamples import cell_weights

    rng = np.random.default_rng(21)
    metric = rng.integers(0, 9, size=(12, 40)).astype(float)
    human = np.round(metric / 3 + rng.normal(size=(12, 40)))
    metric[rng.random((12, 40)) < 0.05] = np.nan
    human[:, 3] = 1.0
    res = draw_resamples(np.random.default_rng(4), 12, 40, n_resamples, "items")
    assert res.item_idx is not None
    ok = np.isfinite(metric) & np.isfinite(human)
    cs, ci = np.nonzero(ok)
    fixed = FixedPairs(metric[ok], human[ok])
    item_w = counts(res.item_idx, 40)
    fast = fixed.spearman_by_items(ci, 40, item_w)
    slow = fixed.spearman(cell_weights(item_w, None, n_resamples, ci, cs))
    np.testing.assert_array_equal(fast, slow)
    want = _explicit(metric, human, "segment", "spearman", res)
    np.testing.assert_allclose(
        resampled_values(metric, human, "segment", "spearman", res), want, rtol=0, atol=1e-9
    )
    # a pool whose resamples can all be constant in x: NaN, as on the other path
    flat = FixedPairs(np.ones(ok.sum()), human[ok])
    assert np.isnan(flat.spearman_by_items(ci, 40, item_w)).all()


def test_system_metric_fn_recomputes_corpus_scores() -> None:
    # a ratio-of-sums corpus score (like BLEU's), from per-segment sufficient statistics
    rng = np.random.default_rng(4)
    num = rng.integers(0, 5, size=(6, 15)).astype(float)
    den = rng.integers(5, 9, size=(6, 15)).astype(float)
    human = num / den + rng.normal(scale=0.3, size=(6, 15))

    def corpus(ix: np.ndarray) -> np.ndarray:
        return np.asarray(num[:, ix].sum(axis=1) / den[:, ix].sum(axis=1))

    metric = num / den
    res = draw_resamples(np.random.default_rng(1), 6, 15, 30, "both")
    got = resampled_values(
        metric,
        human,
        "system",
        "pearson",
        res,
        system_metric=corpus(np.arange(15)),
        system_metric_fn=corpus,
    )
    want = _explicit(metric, human, "system", "pearson", res, system_metric_fn=corpus)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


def test_stats_system_metric_fn_builds_corpus_scores_per_resample() -> None:
    # two systems, three items, statistics (matches, total) per segment: corpus = sum/sum
    stats_a = np.array([[1.0, 4.0], [3.0, 4.0], [0.0, 2.0]])
    stats_b = np.array([[2.0, 2.0], [1.0, 5.0], [2.0, 3.0]])
    fn = stats_system_metric_fn([stats_a, stats_b], lambda st: st[:, 0].sum() / st[:, 1].sum())
    np.testing.assert_allclose(fn(np.array([0, 1, 2])), [4 / 10, 5 / 10])
    # item 1 drawn twice, item 2 once: (3+3+0)/(4+4+2) and (1+1+2)/(5+5+3)
    np.testing.assert_allclose(fn(np.array([1, 1, 2])), [6 / 10, 4 / 13])


def test_corpus_scores_without_a_function_cannot_resample_items() -> None:
    metric, human = _small_data()
    corpus = np.array([0.3, 0.1, 0.9, 0.4, 0.2])
    with pytest.raises(ValueError, match="system_metric_fn"):
        bootstrap_ci(
            metric,
            human,
            "system",
            "pearson",
            rng=np.random.default_rng(0),
            n_resamples=10,
            system_metric=corpus,
        )
    # resampling systems only keeps each system's corpus score: allowed
    lo, hi = bootstrap_ci(
        metric,
        human,
        "system",
        "pearson",
        rng=np.random.default_rng(0),
        n_resamples=10,
        unit="systems",
        system_metric=corpus,
    )
    assert lo <= hi
    # a corpus score that IS the segment mean needs no function
    means = np.array([np.nanmean(r) for r in metric])
    bootstrap_ci(
        metric,
        human,
        "system",
        "pearson",
        rng=np.random.default_rng(0),
        n_resamples=10,
        system_metric=means,
    )


def test_same_seed_same_interval_and_other_seed_differs() -> None:
    rng = np.random.default_rng(0)
    human = rng.normal(size=(8, 60))
    metric = human + rng.normal(size=(8, 60))
    kwargs: dict[str, Any] = {"n_resamples": 200, "unit": "both"}
    first = bootstrap_distribution(
        metric, human, "segment", "kendall_b", rng=np.random.default_rng(42), **kwargs
    )
    again = bootstrap_distribution(
        metric, human, "segment", "kendall_b", rng=np.random.default_rng(42), **kwargs
    )
    other = bootstrap_distribution(
        metric, human, "segment", "kendall_b", rng=np.random.default_rng(43), **kwargs
    )
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    ci1 = bootstrap_ci(
        metric, human, "segment", "kendall_b", rng=np.random.default_rng(42), **kwargs
    )
    assert ci1 == percentile_interval(first)


@pytest.mark.parametrize(
    ("level", "coefficient"),
    [
        ("segment", "pearson"),
        ("segment", "kendall_b"),
        ("item", "spearman"),
        ("item", "kendall_like"),
        ("system", "pearson"),
        ("system", "pairwise_accuracy"),
    ],
)
def test_interval_contains_estimate_on_well_behaved_data(level: str, coefficient: str) -> None:
    rng = np.random.default_rng(8)
    quality = np.linspace(0, 3, 10)[:, None]
    human = quality + rng.normal(size=(10, 80))
    metric = human + rng.normal(scale=0.7, size=(10, 80))
    value = correlate(metric, human, level, coefficient).value
    lo, hi = bootstrap_ci(
        metric,
        human,
        level,
        coefficient,
        rng=np.random.default_rng(1),
        n_resamples=300,
        confidence=0.95,
    )
    assert lo <= value <= hi
    assert lo < hi or coefficient == "pairwise_accuracy"


def test_percentile_interval_ignores_nan_and_checks_confidence() -> None:
    values = np.array([np.nan, 1.0, 2.0, 3.0, 4.0, 5.0, np.nan])
    assert percentile_interval(values, 0.5) == pytest.approx((2.0, 4.0))
    assert all(math.isnan(v) for v in percentile_interval(np.array([np.nan])))
    with pytest.raises(ValueError, match="confidence"):
        percentile_interval(values, 95)


def test_counts_and_unit_validation() -> None:
    idx = np.array([[0, 0, 2], [1, 2, 2]])
    np.testing.assert_array_equal(counts(idx, 3), [[2, 0, 1], [0, 1, 2]])
    with pytest.raises(ValueError, match="items, systems, both"):
        draw_resamples(np.random.default_rng(0), 2, 2, 5, "cells")


@pytest.mark.parametrize("item_nan", ["skip", "zero"])
@pytest.mark.parametrize(
    ("level", "coefficient", "unit"),
    [case for case in CASES if case[0] != "segment" and case[2] != "items"],
)
def test_three_systems_degenerate_resamples(
    level: str, coefficient: str, unit: str, item_nan: str
) -> None:
    # with 3 systems a system resample is often one system repeated: undefined values appear at
    # the system level and inside items; both must match the explicit computation
    rng = np.random.default_rng(6)
    human = rng.integers(0, 3, size=(3, 6)).astype(float)
    metric = human + rng.integers(0, 2, size=(3, 6))
    res = draw_resamples(np.random.default_rng(2), 3, 6, 40, unit)
    got = resampled_values(metric, human, level, coefficient, res, item_nan=item_nan)
    assert res.sys_idx is not None
    want = []
    for b in range(40):
        m, h = metric[res.sys_idx[b]], human[res.sys_idx[b]]
        if res.item_idx is not None:
            m, h = m[:, res.item_idx[b]], h[:, res.item_idx[b]]
        want.append(_reference(m, h, level, coefficient, item_nan=item_nan))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
    # counted human ties (kendall_like's default) and tie-in-both agreement (pairwise accuracy)
    # make a repeated system a defined case for those two
    if (level == "system" or item_nan == "skip") and coefficient not in FIELD_DEFINED:
        assert np.isnan(want).any()


FIELD_DEFINED = ("kendall_like", "pairwise_accuracy", "acc23", "tau_23", "soft_pairwise_accuracy")


@pytest.mark.parametrize("level", ["segment", "item", "system"])
def test_no_rated_cells_gives_nan_interval(level: str) -> None:
    metric = np.arange(12.0).reshape(3, 4)
    human = np.full((3, 4), np.nan)
    lo, hi = bootstrap_ci(
        metric, human, level, "pearson", rng=np.random.default_rng(0), n_resamples=10
    )
    assert math.isnan(lo) and math.isnan(hi)


@pytest.mark.parametrize("ties", [True, False])
def test_item_pair_matrices_equal_merge_sort_and_explicit_kendall(
    ties: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kendall's tau-b under item resampling from item x item pair counts equals both the
    weighted merge sort and scipy on the explicitly resampled matrix, with ties and NaN cells."""
    import paraeval.correlation.fixed_pairs as fixed_pairs

    rng = np.random.default_rng(12)
    metric = rng.normal(size=(15, 40))
    if ties:
        metric = np.round(metric * 2)
    human = np.round(metric / 2 + rng.normal(size=metric.shape))
    metric[rng.random(metric.shape) < 0.05] = np.nan
    human[0, :3] = np.nan
    res = draw_resamples(np.random.default_rng(3), 15, 40, 30, "items")
    _, items = np.nonzero(np.isfinite(metric + human))
    assert fixed_pairs._item_pairs_pay_off(np.bincount(items, minlength=40), 30)
    fast = resampled_values(metric, human, "segment", "kendall_b", res)
    monkeypatch.setattr(fixed_pairs, "_item_pairs_pay_off", lambda *a: False)
    merge = resampled_values(metric, human, "segment", "kendall_b", res)
    want = _explicit(metric, human, "segment", "kendall_b", res)
    np.testing.assert_allclose(fast, merge, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast, want, rtol=0, atol=1e-9)


@pytest.mark.parametrize("path", ["sweep", "direct"])
@pytest.mark.parametrize("data", ["both tied", "x continuous", "y continuous", "signed zeros"])
@pytest.mark.parametrize("sizes", ["even", "uneven"])
def test_item_pair_counts_equal_a_brute_force_count(
    sizes: str, data: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ways of counting (the sweep over the ranks of the variable with fewer distinct
    values, and the direct (item, slot) pass) count every ordered pair of cells once, with ties
    in x, in y and in both, for items of equal and of very different sizes."""
    from paraeval.correlation import _pairs

    monkeypatch.setattr(_pairs, "_sweep_pays_off", lambda *_: path == "sweep")
    rng = np.random.default_rng(31)
    n_items = 9
    cells = (
        rng.integers(5, 7, size=n_items)
        if sizes == "even"
        else np.array([1, 30, 2, 2, 1, 3, 2, 1, 2])
    )
    item = np.repeat(np.arange(n_items), cells)
    rng.shuffle(item)
    x = np.round(rng.normal(size=item.size) * 2)
    y = np.round(x / 2 + rng.normal(size=item.size))
    if data == "x continuous":
        x = x + rng.normal(size=item.size)
    elif data == "y continuous":
        y = y + rng.normal(size=item.size)
    elif data == "signed zeros":  # -0.0 and 0.0 are one value
        x = np.where(x == 0, np.where(rng.random(item.size) < 0.5, -0.0, 0.0), x)
    got = _pairs.item_pair_matrices(x, y, item, n_items)
    want = np.zeros((4, n_items, n_items))
    for c in range(item.size):
        for d in range(item.size):
            dx, dy = x[d] - x[c], y[d] - y[c]
            i, j = item[c], item[d]
            want[0, i, j] += c != d and dx * dy < 0
            want[1, i, j] += dx == 0
            want[2, i, j] += dy == 0
            want[3, i, j] += dx == 0 and dy == 0
    np.testing.assert_array_equal(got, want)


def test_item_pairs_are_not_used_when_the_item_layout_would_be_mostly_padding() -> None:
    import paraeval.correlation.fixed_pairs as fixed_pairs

    assert fixed_pairs._item_pairs_pay_off(np.full(400, 36), 1000)
    lopsided = np.ones(2000, dtype=np.int64)
    lopsided[0] = 5000  # a (2000 x 5000) layout for 6999 cells
    assert not fixed_pairs._item_pairs_pay_off(lopsided, 1000)


@pytest.mark.parametrize("coefficient", ["pearson", "spearman", "kendall_b"])
def test_a_constant_metric_gives_nan_for_every_resample(coefficient: str) -> None:
    # e.g. iBLEU at alpha 0.5 when the references are the sources: 0 everywhere
    rng = np.random.default_rng(6)
    metric = np.zeros((6, 20))
    human = np.round(rng.normal(size=(6, 20)))
    res = draw_resamples(np.random.default_rng(2), 6, 20, 40, "items")
    assert np.isnan(resampled_values(metric, human, "segment", coefficient, res)).all()
    assert np.isnan(resampled_values(human, metric, "segment", coefficient, res)).all()


@pytest.mark.parametrize("n_items", [37, 40_000, 65_536, 70_000])
def test_narrow_item_indices_are_the_int64_draws(n_items: int) -> None:
    """Indices stored in uint16 (or int32), drawn in blocks of rows: numpy's own int64 draws
    of one call, and the generator left where that call leaves it (the system indices drawn
    next are the same too)."""
    twin = np.random.default_rng(11)
    want = twin.integers(0, n_items, size=(60, n_items))
    want_sys = twin.integers(0, 5, size=(60, 5))
    rng = np.random.default_rng(11)
    res = draw_resamples(rng, 5, n_items, 60, "both")
    assert res.item_idx is not None and res.sys_idx is not None
    assert res.item_idx.dtype == (np.uint16 if n_items <= 65_536 else np.int32)
    np.testing.assert_array_equal(res.item_idx, want)
    np.testing.assert_array_equal(res.sys_idx, want_sys)
    assert rng.integers(0, 2**62) == twin.integers(0, 2**62)


def test_counts_in_row_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    import paraeval.correlation.resamples as resamples

    idx = np.random.default_rng(2).integers(0, 50, size=(23, 50)).astype(np.uint16)
    want = np.stack([np.bincount(row, minlength=50) for row in idx]).astype(float)
    monkeypatch.setattr(resamples, "CHUNK_ELEMENTS", 4 * 50)  # blocks of 4 rows, last of 3
    got = counts(idx, 50)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, want)


def test_human_means_passed_in_give_the_explicit_values() -> None:
    """The system level's human side, made once by the caller for every metric of a table
    (resampled_row_means), gives the numbers of the explicit resampling for each metric."""
    from paraeval.correlation.bootstrap import (
        resampled_row_means,
        system_resampled_scores,
        system_statistic,
    )

    metric, human = _small_data()
    res = draw_resamples(np.random.default_rng(8), metric.shape[0], metric.shape[1], 30, "items")
    means = resampled_row_means(human, res)
    for m in (metric, metric[::-1] * 2.0 + 1.0):  # two metrics, the same ratings
        given = system_statistic(
            "pearson", *system_resampled_scores(m, human, res, None, None, means)
        )
        np.testing.assert_array_equal(given, resampled_values(m, human, "system", "pearson", res))
        np.testing.assert_allclose(
            given, _explicit(m, human, "system", "pearson", res), rtol=1e-12, atol=1e-12
        )


def test_the_sweep_is_chosen_for_rating_scales_and_not_for_two_continuous_variables() -> None:
    from paraeval.correlation import _pairs

    # ParaBank-Eval's shape: 14,323 cells over 400 items, 1,061 distinct mean ratings
    assert _pairs._sweep_pays_off(14_323, 1_061, 400)
    assert not _pairs._sweep_pays_off(14_323, 10_000, 400)  # both nearly continuous
    assert not _pairs._sweep_pays_off(2_000_000, 20_000, 400)  # a table of 32 MB


@pytest.mark.parametrize("block_bytes", [2**23, 64])  # blocks of 64 resamples; of one
def test_spearman_by_items_equals_the_cell_weights_path(
    block_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spearman's sums under item resampling (one compiled pass over the tie groups) give every
    metric the numbers of the (cells, resamples) path, whatever the block of resamples."""
    from paraeval.correlation import _pairs
    from paraeval.correlation.fixed_pairs import FixedPairs
    from paraeval.correlation.resamples import cell_weights

    monkeypatch.setattr(_pairs, "_SPEARMAN_BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(22)
    human = np.round(rng.normal(size=(10, 30)), 1)
    res = draw_resamples(np.random.default_rng(5), 10, 30, 70, "items")
    assert res.item_idx is not None
    item_w = counts(res.item_idx, 30)
    _, ci = np.nonzero(np.ones((10, 30), dtype=bool))
    cs = np.repeat(np.arange(10), 30)
    for k in range(3):
        metric = np.round(human + rng.normal(scale=1.0 + k, size=human.shape), 1)
        fixed = FixedPairs(metric.ravel(), human.ravel())
        fast = fixed.spearman_by_items(ci, 30, item_w)
        slow = fixed.spearman(cell_weights(item_w, None, 70, ci, cs))
        np.testing.assert_array_equal(fast, slow)


def test_spearman_blocks_narrow_where_the_tie_groups_are_many() -> None:
    from paraeval.correlation import _pairs

    assert _pairs.spearman_block(3000, 1000) == 64  # ParaBank-Eval's scale: 64 resamples
    assert 1 < _pairs.spearman_block(40_000, 10_000) < 64
    assert _pairs.spearman_block(10**6, 10**6) == 1  # mid-ranks of one resample: 16 MB


def test_item_blocks_give_the_indices_and_multiplicities_of_any_slices() -> None:
    res = draw_resamples(np.random.default_rng(3), 4, 20, 15, "items")
    assert res.item_idx is not None
    slices = [slice(0, 4), slice(4, 11), slice(11, 15)]
    got = list(item_blocks(res, 20, slices))
    assert [sl for sl, _, _ in got] == slices
    for sl, idx, weights in got:
        np.testing.assert_array_equal(idx, res.item_idx[sl])
        np.testing.assert_array_equal(weights, counts(res.item_idx[sl], 20))
