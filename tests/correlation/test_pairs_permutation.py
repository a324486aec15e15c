"""Tie calibration in one sorted pass (against a brute-force search over every candidate
threshold), its bootstrap form (against explicitly resampled matrices), mt-metrics-eval's
``sample_rate``, the pairwise permutation test (``unit="pairs"``, mt-metrics-eval's
``PairwisePermutationSigDiff``) against the exact enumeration of every swap, and early stopping."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from paraeval.correlation import configure, correlate, permutation_test
from paraeval.correlation.calibration import WEIGHTS, item_pairs, pair_kinds
from paraeval.correlation.significance import EarlyStop
from paraeval.correlation.ties import calibrated_epsilon, item_mean_23


def _item_value(m: np.ndarray, h: np.ndarray, eps: float, variant: str = "acc23") -> float:
    """acc23/tau23 averaged over items at one threshold, pair by pair from the definition (items
    with fewer than two scored systems left out, as mt-metrics-eval filters them)."""
    values = []
    for i in range(m.shape[1]):
        ok = np.isfinite(m[:, i]) & np.isfinite(h[:, i])
        x, y = m[ok, i], h[ok, i]
        num = den = 0.0
        for s, t in itertools.combinations(range(x.size), 2):
            dm, dh = x[s] - x[t], y[s] - y[t]
            tie_m, tie_h = abs(dm) <= eps, dh == 0
            if tie_m and tie_h:
                kind = 4
            elif tie_h:
                kind = 2
            elif tie_m:
                kind = 3
            else:
                kind = 0 if np.sign(dm) == np.sign(dh) else 1
            num += WEIGHTS[variant][kind]
            den += 1
        if den:
            values.append(num / den)
    return float(np.mean(values)) if values else float("nan")


def _brute_force(m: np.ndarray, h: np.ndarray, variant: str = "acc23") -> tuple[float, float]:
    """tau_optimization's search: 0 and every absolute metric difference, the first best."""
    diffs = [0.0]
    for i in range(m.shape[1]):
        ok = np.isfinite(m[:, i]) & np.isfinite(h[:, i])
        x = m[ok, i]
        diffs += [abs(x[s] - x[t]) for s, t in itertools.combinations(range(x.size), 2)]
    best, best_eps = -np.inf, float("nan")
    for eps in sorted(set(diffs)):
        v = _item_value(m, h, eps, variant)
        if v > best + 1e-12:
            best, best_eps = v, eps
    return (best, best_eps) if np.isfinite(best) else (float("nan"), float("nan"))


def _matrices(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n_sys, n_items = int(rng.integers(2, 7)), int(rng.integers(1, 9))
    # coarse scores: many metric and human ties, so calibration has something to choose
    m = rng.integers(0, 6, (n_sys, n_items)) / float(rng.choice([1, 3, 7]))
    h = rng.integers(0, 4, (n_sys, n_items)).astype(float)
    m[rng.random(m.shape) < 0.1] = np.nan
    h[rng.random(h.shape) < 0.1] = np.nan
    return m, h


@pytest.mark.parametrize("variant", ["acc23", "tau23"])
def test_calibration_equals_the_search_over_every_threshold(variant: str) -> None:
    rng = np.random.default_rng(7)
    for _ in range(60):
        m, h = _matrices(rng)
        expected = _brute_force(m, h, variant)
        got = calibrated_epsilon(m, h, variant=variant)  # type: ignore[arg-type]
        if np.isfinite(expected[0]):
            assert got[0] == pytest.approx(expected[0], abs=1e-12)
            assert got[1] == pytest.approx(expected[1])
        else:
            assert np.isnan(got[0])
        value = item_mean_23(m, h, variant=variant, calibrate=True)  # type: ignore[arg-type]
        assert np.allclose(value, [expected[0]], equal_nan=True, atol=1e-12)


def test_each_resample_calibrates_its_own_threshold() -> None:
    # the compiled pass over item multiplicities equals calibrating each resampled matrix
    rng = np.random.default_rng(11)
    for _ in range(20):
        m, h = _matrices(rng)
        idx = rng.integers(0, m.shape[1], size=(6, m.shape[1]))
        w = np.stack([np.bincount(row, minlength=m.shape[1]) for row in idx]).astype(float)
        got = item_mean_23(m, h, w, calibrate=True)
        expected = [_brute_force(m[:, row], h[:, row])[0] for row in idx]
        assert np.allclose(got, expected, equal_nan=True, atol=1e-12)


def test_sample_rate_one_is_the_exact_computation_and_below_one_a_seeded_sample() -> None:
    rng = np.random.default_rng(3)
    m = rng.normal(size=(8, 30)).round(1)
    h = rng.integers(0, 5, (8, 30)).astype(float)
    exact = configure("acc23", {})
    assert correlate(m, h, "item", configure("acc23", {"sample_rate": 1.0})).value == (
        correlate(m, h, "item", exact).value
    )
    half = configure("acc23", {"sample_rate": 0.5, "seed": 5})
    again = configure("acc23", {"sample_rate": 0.5, "seed": 5})
    other = configure("acc23", {"sample_rate": 0.5, "seed": 6})
    v = correlate(m, h, "item", half).value
    assert v == correlate(m, h, "item", again).value
    assert v != correlate(m, h, "item", other).value
    # the sampled value is the calibration over the kept pairs: rebuild them with the same draw
    pairs = item_pairs(m, h, sample_rate=0.5, rng=np.random.default_rng(5))
    assert 0.35 < pairs.dm.size / item_pairs(m, h).dm.size < 0.65
    best = -np.inf
    for eps in np.unique(np.concatenate([[0.0], np.abs(pairs.dm)])):
        kinds = pair_kinds(pairs.dm, pairs.dh, float(eps))
        per = np.bincount(pairs.item, weights=np.asarray(WEIGHTS["acc23"])[kinds], minlength=30)
        ok = pairs.per_item > 0
        best = max(best, float(np.mean(per[ok] / pairs.per_item[ok])))
    assert v == pytest.approx(best, abs=1e-12)
    with pytest.raises(ValueError, match="sample_rate"):
        configure("acc23", {"sample_rate": 0.0})


# mt-metrics-eval's PairwisePermutationSigDiffTest fixture: 4 systems x 2 items
GOLD = np.array([1, 3, 3, 3, 1, 2, 1, 2], dtype=float).reshape(4, 2)
METRIC1 = np.array([2, 4, 6, 6, 2, 6, 3, 7], dtype=float).reshape(4, 2)
METRIC2 = np.array([1, 5, 4, 4, 4, 3, 2, 1], dtype=float).reshape(4, 2)


def _exact_pairs_p(a: np.ndarray, b: np.ndarray, h: np.ndarray) -> tuple[float, float]:
    """(observed A - B, the share of all 2^pairs swap patterns with a difference at least as
    large): each metric's pair kinds at its own calibrated threshold, a swapped pair taking the
    other metric's kind, as PairwisePermutationSigDiff combines its PairwiseDiffs."""
    eps_a = calibrated_epsilon(a, h)[1]
    eps_b = calibrated_epsilon(b, h)[1]
    pa, pb = item_pairs(a, h), item_pairs(b, h)
    va = np.asarray(WEIGHTS["acc23"])[pair_kinds(pa.dm, pa.dh, eps_a)]
    vb = np.asarray(WEIGHTS["acc23"])[pair_kinds(pb.dm, pb.dh, eps_b)]
    n_items = int((pa.per_item > 0).sum())

    def mean(values: np.ndarray) -> float:
        per = np.bincount(pa.item, weights=values, minlength=pa.per_item.size)
        ok = pa.per_item > 0
        return float((per[ok] / pa.per_item[ok]).sum() / n_items)

    observed = mean(va) - mean(vb)
    hits = 0
    patterns = list(itertools.product([False, True], repeat=va.size))
    for swap in patterns:
        s = np.array(swap)
        d = mean(np.where(s, vb, va)) - mean(np.where(s, va, vb))
        hits += d >= observed - 1e-12
    return observed, hits / len(patterns)


def test_pairwise_permutation_test_matches_the_exact_enumeration() -> None:
    # is metric 1 better than metric 2 (one-sided, as mt-metrics-eval asks)
    acc23 = configure("acc23", {})
    r1 = correlate(METRIC1, GOLD, "item", acc23).value
    r2 = correlate(METRIC2, GOLD, "item", acc23).value
    observed, exact = _exact_pairs_p(METRIC1, METRIC2, GOLD)
    assert observed == pytest.approx(r1 - r2)
    assert 0.0 < exact < 1.0
    k = 20_000
    p = permutation_test(
        METRIC1,
        METRIC2,
        GOLD,
        "item",
        acc23,
        rng=np.random.default_rng(0),
        n_resamples=k,
        unit="pairs",
        alternative="greater",
    )
    # p = (1 + hits) / (1 + K): within 4 standard errors of the exact share
    assert p == pytest.approx(exact, abs=4 * np.sqrt(exact * (1 - exact) / k) + 1 / k)


def test_pairwise_permutation_test_on_random_matrices_and_against_itself() -> None:
    rng = np.random.default_rng(21)
    acc23 = configure("acc23", {})
    for _ in range(4):
        h = rng.integers(0, 3, (3, 3)).astype(float)
        a = h + rng.integers(0, 3, h.shape)
        b = rng.integers(0, 4, h.shape).astype(float)
        _, exact = _exact_pairs_p(a, b, h)
        p = permutation_test(
            a, b, h, "item", acc23, rng=rng, n_resamples=20_000, unit="pairs", alternative="greater"
        )
        assert p == pytest.approx(exact, abs=4 * np.sqrt(exact * (1 - exact) / 20_000) + 1e-4)
    # a metric against itself: every pattern ties the observed 0, p = 1
    assert permutation_test(a, a, h, "item", acc23, rng=rng, unit="pairs") == 1.0


def test_pairs_unit_needs_an_item_level_coefficient_over_pairs() -> None:
    with pytest.raises(ValueError, match="unit=pairs"):
        permutation_test(
            METRIC1, METRIC2, GOLD, "item", "pearson", rng=np.random.default_rng(0), unit="pairs"
        )
    with pytest.raises(ValueError, match="unit=pairs"):
        permutation_test(
            METRIC1, METRIC2, GOLD, "system", "acc23", rng=np.random.default_rng(0), unit="pairs"
        )


@pytest.mark.parametrize("unit", ["items", "pairs"])
def test_early_stopping_runs_the_first_blocks_of_the_same_draws(unit: str) -> None:
    rng = np.random.default_rng(2)
    h = rng.normal(size=(6, 40))
    good = h + rng.normal(scale=0.3, size=h.shape)
    bad = rng.normal(size=h.shape)
    coef = "acc23" if unit == "pairs" else "pearson"

    def p(a: np.ndarray, b: np.ndarray, stop: EarlyStop | None, k: int = 1000) -> float:
        return permutation_test(
            a,
            b,
            h,
            "item",
            coef,
            rng=np.random.default_rng(9),
            n_resamples=k,
            unit=unit,
            alternative="greater",
            early_stop=stop,
        )

    # blocks as large as the test: stopping changes nothing
    assert p(good, bad, EarlyStop(1000)) == p(good, bad, None)
    # clearly significant: stops after the first block of 100, p = 1/101
    assert p(good, bad, EarlyStop(100)) == pytest.approx(1 / 101)
    assert p(good, bad, None) == pytest.approx(1 / 1001)
    # clearly not (the worse metric tested as better): stops after one block with p > 0.5, the
    # share of those first 100 draws
    stopped = p(bad, good, EarlyStop(100))
    assert stopped > 0.5
    assert stopped == p(bad, good, None, k=100)
    with pytest.raises(ValueError, match="early_min"):
        EarlyStop(100, 0.6, 0.5)
