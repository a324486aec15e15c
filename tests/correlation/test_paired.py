"""Paired bootstrap and approximate randomization (correlation/paired.py) against sacrebleu's own
paired tests (``sacrebleu.significance``), p-value for p-value."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from sacrebleu.metrics.bleu import BLEU as SacreBLEU
from sacrebleu.metrics.chrf import CHRF as SacreCHRF
from sacrebleu.metrics.ter import TER as SacreTER
from sacrebleu.significance import _paired_ar_test, _paired_bs_test

from paraeval.correlation.paired import (
    ArMasks,
    MeanScores,
    StatsScores,
    ar_mask_bits,
    ar_masks,
    bootstrap_indices,
    p_value,
    paired_bs_clusters,
    paired_bs_p,
    resample_counts,
)
from paraeval.metrics._sacre_batched import bleu_scores, chrf_scores, ter_scores

WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "on",
    "mat",
    "rug",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "red",
    "blue",
    "house",
]
SEED = 7


def _texts(n: int, seed: int) -> tuple[list[str], list[str], list[str]]:
    """References and two systems that each keep most of a reference's words."""
    rng = random.Random(seed)
    refs = [" ".join(rng.choices(WORDS, k=rng.randint(4, 12))) for _ in range(n)]

    def system(keep: float) -> list[str]:
        return [" ".join(w for w in r.split() if rng.random() < keep) or "the" for r in refs]

    return refs, system(0.9), system(0.6)


def _sacrebleu_p(
    test: Callable[..., Any],
    metric: Any,
    base: list[str],
    other: list[str],
    refs: list[str],
    n: int,
) -> float:
    bl_stats = metric._extract_corpus_statistics(base, [refs])
    info = {"m": (bl_stats, metric._aggregate_and_compute(bl_stats))}
    _, results = test(info, "other", other, [refs], {"m": metric}, n_samples=n, seed=SEED)
    return float(results["m"].p_value)


@pytest.mark.parametrize(
    ("metric", "fn"),
    [(SacreBLEU(), bleu_scores), (SacreCHRF(), chrf_scores), (SacreTER(), ter_scores)],
)
def test_paired_tests_equal_sacrebleu(metric: Any, fn: Callable[..., np.ndarray]) -> None:
    refs, base, other = _texts(40, seed=3)
    stats = {
        name: np.asarray(metric._extract_corpus_statistics(hyps, [refs]), dtype=float)
        for name, hyps in (("base", base), ("other", other))
    }
    scores = StatsScores(stats, lambda rows: fn(rows, metric))
    n_bs, n_ar = 300, 500
    idx = bootstrap_indices(len(refs), n_bs, SEED)
    counts = resample_counts(idx)
    res = {s: scores.bootstrap(s, idx, counts) for s in stats}
    p_bs = paired_bs_p(res["base"], res["other"], scores.point("base"), scores.point("other"))
    p_ar = scores.ar("base", "other", ArMasks(ar_masks(len(refs), n_ar, SEED)))
    assert p_bs == _sacrebleu_p(_paired_bs_test, metric, base, other, refs, n_bs)
    assert p_ar == _sacrebleu_p(_paired_ar_test, metric, base, other, refs, n_ar)
    # the corpus-function path (one call per resample) is the same test
    generic = StatsScores(stats, None, lambda rows: float(fn(rows.sum(axis=0), metric)[0]))
    assert generic.ar("base", "other", ArMasks(ar_masks(len(refs), 50, SEED))) == scores.ar(
        "base", "other", ArMasks(ar_masks(len(refs), 50, SEED))
    )


def test_resampling_plans_are_sacrebleus_draws() -> None:
    idx = bootstrap_indices(25, 10, SEED)
    want = np.random.default_rng(SEED).choice(25, size=(10, 25), replace=True)
    assert np.array_equal(idx, want)
    counts = resample_counts(idx)
    assert np.array_equal(counts[3], np.bincount(idx[3], minlength=25))
    keep = ar_masks(25, 10, SEED)
    assert np.array_equal(keep, np.random.default_rng(SEED).integers(2, size=(10, 25), dtype=bool))


def test_p_value_is_sacrebleus_formula() -> None:
    # (#{stat > real} + 1) / (N + 1): 2 of 4 statistics exceed 0.5
    assert p_value(np.array([0.1, 0.6, 0.5, 0.9]), 0.5) == 3 / 5
    assert np.isnan(paired_bs_p(np.zeros(3), np.zeros(3), float("nan"), 1.0))


def test_mean_scores_bootstrap_is_the_mean_of_each_resample() -> None:
    rng = np.random.default_rng(0)
    values = {"a": rng.random(30), "b": rng.random(30)}
    values["b"][4] = np.nan
    scores = MeanScores(values)
    idx = bootstrap_indices(30, 20, SEED)
    got = scores.bootstrap("b", idx, resample_counts(idx))
    want = [np.nanmean(values["b"][row]) for row in idx]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert scores.point("b") == pytest.approx(np.nanmean(values["b"]), rel=1e-15)


def test_clusters_on_a_hand_built_example() -> None:
    """a and b differ by noise, c is far behind, d ties a exactly: {a, b, d} then {c}."""
    rng = np.random.default_rng(0)
    a = rng.normal(0.6, 0.1, 60)
    values = {"a": a, "b": a + rng.normal(0, 0.01, 60), "c": a - 0.3, "d": a.copy()}
    scores = MeanScores(values)
    idx = bootstrap_indices(60, 200, SEED)
    counts = resample_counts(idx)
    points = {s: scores.point(s) for s in values}
    res = {s: scores.bootstrap(s, idx, counts) for s in values}
    rank, cluster = paired_bs_clusters(points, res, True, 0.05)
    assert cluster == {"a": 1.0, "b": 1.0, "d": 1.0, "c": 2.0}
    assert rank["c"] == 4.0 and sorted(rank.values()) == [1.0, 2.0, 3.0, 4.0]
    # lower is better: c is now the best, alone
    rank_low, cluster_low = paired_bs_clusters(points, res, False, 0.05)
    assert rank_low["c"] == 1.0 and cluster_low["c"] == 1.0 and cluster_low["a"] == 2.0


def test_clusters_are_runs_of_consecutive_ranks() -> None:
    """b is surely behind a, c only noisily: c may not join a's cluster over b's head, so cluster
    numbers follow rank (c with b, not with a)."""
    n = 1000
    noise = np.random.default_rng(0).normal(0.0, 1.0, n)
    points = {"a": 1.0, "b": 0.9, "c": 0.8}
    res = {"a": np.full(n, 1.0), "b": np.full(n, 0.9), "c": 0.8 + noise}
    assert paired_bs_p(res["a"], res["b"], 1.0, 0.9) < 0.05
    assert paired_bs_p(res["a"], res["c"], 1.0, 0.8) >= 0.05
    rank, cluster = paired_bs_clusters(points, res, True, 0.05)
    assert rank == {"a": 1.0, "b": 2.0, "c": 3.0}
    assert cluster == {"a": 1.0, "b": 2.0, "c": 2.0}


def test_nist_summed_rows_equal_its_corpus_function_per_resample() -> None:
    """NIST's float statistics: the compiled in-order sums plus ``corpus_from_sums`` give the
    numbers of ``corpus_from_stats`` called on every resample and every shuffle."""
    from paraeval.metrics.nist import NIST

    refs, base, other = _texts(60, seed=5)
    nist = NIST()
    stats = {
        name: nist.score(hyps, [[r] for r in refs]).stats
        for name, hyps in (("base", base), ("other", other))
    }
    assert stats["base"] is not None and not np.array_equal(stats["base"], np.round(stats["base"]))

    def corpus(rows: np.ndarray) -> float:
        return nist.corpus_from_stats(rows)["nist"]

    fast = StatsScores(stats, None, corpus, sums=nist.corpus_from_sums)
    slow = StatsScores(stats, None, corpus)
    idx = bootstrap_indices(60, 200, SEED)
    counts = resample_counts(idx)
    for s in stats:
        got = fast.bootstrap(s, idx, counts)
        want = slow.bootstrap(s, idx, counts)
        assert np.array_equal(got, want)
        assert np.array_equal(got, [corpus(stats[s][row]) for row in idx])
    masks = ArMasks(ar_masks(60, 300, SEED))
    assert fast.ar("base", "other", masks) == slow.ar("base", "other", masks)
    # lengths of zero and a hypothesis shorter than its references reach every branch
    totals = np.array(
        [[1.5, 0.5, 2, 0, 0, 3, 0, 0, 0, 0, 7, 4], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 3]]
    )
    totals[:, 2:] = np.round(totals[:, 2:])
    for row, value in zip(totals, nist.corpus_from_sums(totals), strict=True):
        assert value == corpus(row[None, :])


def test_bootstrap_indices_at_40000_items_are_sacrebleus_draws() -> None:
    # int32 storage: the int64 indices of sacrebleu's rng.choice, value for value
    idx = bootstrap_indices(40_000, 30, SEED)
    assert idx.dtype == np.int32
    want = np.random.default_rng(SEED).choice(40_000, size=(30, 40_000), replace=True)
    np.testing.assert_array_equal(idx, want)


@pytest.mark.parametrize("n_items", [37, 40_000])
def test_ar_mask_bits_are_the_packed_masks(n_items: int) -> None:
    # more trials than one block (2048 rows), items not a multiple of 8 or 32
    trials = 2100 if n_items < 1000 else 2050
    keep = ar_masks(n_items, trials, SEED)
    np.testing.assert_array_equal(ar_mask_bits(n_items, trials, SEED), np.packbits(keep, axis=1))
    drawn = ArMasks.draw(n_items, trials, SEED)
    assert drawn.shape == keep.shape
    np.testing.assert_array_equal(drawn.keep, keep)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_batched_bleu_scores_are_sacrebleus_for_each_setting(dtype: type) -> None:
    """The batched BLEU of many statistic rows is sacrebleu's score of each row, for every
    smoothing and order; another smoothing is another score."""
    refs, base, _ = _texts(30, seed=5)
    stats: np.ndarray = np.asarray(
        SacreBLEU()._extract_corpus_statistics(base, [refs]), dtype=dtype
    )
    # single segments (some without a 4-gram match: smoothing shows) and sums of the first rows
    rows = np.vstack([stats, np.cumsum(stats, axis=0)[::3]])
    settings = [
        SacreBLEU(),
        SacreBLEU(smooth_method="floor", smooth_value=0.2),
        SacreBLEU(smooth_method="add-k"),
        SacreBLEU(smooth_method="add-k", smooth_value=1.0),
        SacreBLEU(smooth_method="none", effective_order=True),
    ]
    for metric in settings:
        got = bleu_scores(rows, metric)
        expected = [metric._compute_score_from_stats(list(row)).score for row in rows]
        np.testing.assert_array_equal(got, np.asarray(expected, dtype=np.float64))
    assert len({tuple(bleu_scores(rows, m)) for m in settings[:3]}) == 3
