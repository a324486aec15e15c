"""The field's definitions (mt-metrics-eval's ``stats.py`` / ``pce.py``, nlpstats) on small cases
worked by hand: the expected numbers are counted in the comments, and where mt-metrics-eval's own
tests (``stats_test.py``) use the same inputs their numbers are the same."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from paraeval.correlation import (
    COEFFICIENTS,
    configure,
    correlate,
    permutation_test,
    significance_table,
)
from paraeval.correlation.coefficients import kendall_like, kendall_like_counts, pairwise_accuracy
from paraeval.correlation.spa import pairwise_p_values, soft_pairwise_accuracy_value
from paraeval.correlation.table import fisher_interval
from paraeval.correlation.ties import calibrated_epsilon, kendall_23

# ---------------------------------------------------------------------------------------------
# pairwise accuracy: every pair, a tie on both sides agrees (mt-metrics-eval Agreement)
# ---------------------------------------------------------------------------------------------


def test_pairwise_accuracy_counts_every_pair() -> None:
    # mt-metrics-eval testAgreement: gold 1 2 3 3 4, metric 1 1 2 1 2. Signs of the 10 pairs
    # (gold, metric): (0,1) +,0 no; (0,2) +,+ yes; (0,3) +,0 no; (0,4) +,+ yes; (1,2) +,+ yes;
    # (1,3) +,0 no; (1,4) +,+ yes; (2,3) 0,- no; (2,4) +,0 no; (3,4) +,+ yes -> 5 / 10
    human = np.array([1.0, 2.0, 3.0, 3.0, 4.0])
    metric = np.array([1.0, 1.0, 2.0, 1.0, 2.0])
    assert pairwise_accuracy(metric, human)[0] == 0.5
    # the earlier rule, by name: the human tie (2,3) is left out -> 5 / 9
    assert pairwise_accuracy(metric, human, human_ties="skip")[0] == pytest.approx(5 / 9)
    old = configure("pairwise_accuracy", {"human_ties": "skip"})
    assert correlate(metric[:, None], human[:, None], "system", old).value == pytest.approx(5 / 9)
    assert correlate(metric[:, None], human[:, None], "system", "pairwise_accuracy").value == 0.5


def test_pairwise_accuracy_tie_in_both_agrees_and_constant_is_defined() -> None:
    # human 1 1 2, metric 5 5 6: (0,1) tied in both: agrees; (0,2), (1,2) agree -> 1
    assert pairwise_accuracy(np.array([5.0, 5.0, 6.0]), np.array([1.0, 1.0, 2.0]))[0] == 1.0
    # a constant metric agrees only on the human tie (0,1): 1 / 3 (the field; "skip" gives NaN)
    const = np.full(3, 7.0)
    assert pairwise_accuracy(const, np.array([1.0, 1.0, 2.0]))[0] == pytest.approx(1 / 3)
    assert math.isnan(pairwise_accuracy(const, np.array([1.0, 1.0, 2.0]), human_ties="skip")[0])


# ---------------------------------------------------------------------------------------------
# Kendall-like: mt-metrics-eval counts a pair when |human difference| >= the threshold
# (margin_rule="at_least"); paraeval's default counts it when the difference is above it
# ---------------------------------------------------------------------------------------------

# mt-metrics-eval CorrelationFunctionsTest.testKendallLike: four systems on one item
GOLD_KL = np.array([[10.0], [11.0], [100.0], [150.0]])
METRIC_KL = np.array([[2.0], [1.0], [4.0], [3.0]])


def test_kendall_like_threshold_at_least() -> None:
    # pairs (gold diff, concordant?): (10,11) 1 no; (10,100) 90 yes; (10,150) 140 yes;
    # (11,100) 89 yes; (11,150) 139 yes; (100,150) 50 no.
    # threshold 25: 5 pairs, C=4, D=1 -> 3/5; threshold 1: 6 pairs, C=4, D=2 -> 2/6
    field = {"margin_rule": "at_least"}
    assert kendall_like(METRIC_KL, GOLD_KL, human_margin=25, **field)[0] == pytest.approx(3 / 5)
    assert kendall_like(METRIC_KL, GOLD_KL, human_margin=1, **field)[0] == pytest.approx(2 / 6)
    c, d = kendall_like_counts(METRIC_KL, GOLD_KL, human_margin=1, **field)
    assert (c.sum(), d.sum()) == (4.0, 2.0)
    # the default rule (strictly above) drops the pair that differs by exactly 1: 3/5
    assert kendall_like(METRIC_KL, GOLD_KL, human_margin=1)[0] == 0.6


def test_kendall_like_threshold_zero_counts_human_ties_as_discordant() -> None:
    # mt-metrics-eval's KendallLike with thresh=0: a human tie passes |0| >= 0 and, being
    # neither > nor <, is discordant. Gold 1 1 2, metric 1 2 3: (0,1) tie -> D; (0,2), (1,2) C
    gold = np.array([[1.0], [1.0], [2.0]])
    metric = np.array([[1.0], [2.0], [3.0]])
    assert kendall_like(metric, gold, margin_rule="at_least")[0] == pytest.approx((2 - 1) / 3)
    # paraeval's default leaves the human tie out
    assert kendall_like(metric, gold)[0] == 1.0


def test_kendall_like_missing_gold_and_item_average() -> None:
    # mt-metrics-eval testKendallLike: gold 10 None 100 150 (one system's gold missing),
    # thresh 1: (10,100) C, (10,150) C, (100,150) D -> 1/3
    gold = GOLD_KL.copy()
    gold[1] = np.nan
    assert kendall_like(METRIC_KL, gold, human_margin=1, margin_rule="at_least")[
        0
    ] == pytest.approx(1 / 3)
    # Correlation(2, [10, 11, 100, 150], [2, 1, 4, 3]).KendallLike(average_by='item', thresh=1):
    # 2 systems x 2 items; item 0 (10 vs 100, metric 2 vs 4) C, item 1 (11 vs 150, 1 vs 3) C -> 1
    human = np.array([[10.0, 11.0], [100.0, 150.0]])
    metric = np.array([[2.0, 1.0], [4.0, 3.0]])
    kl = configure("kendall_like", {"human_margin": 1})
    assert correlate(metric, human, "item", kl).value == 1.0
    assert correlate(metric, human, "segment", kl).value == 1.0


def test_kendall_like_pooled_is_mt_metrics_evals_pair_weighted_item_average() -> None:
    # mt-metrics-eval averages KendallLike over items weighted by each item's pair count
    # (macro=False), which is the pooled count: item 0 has 3 counted pairs (C=2, D=1, tau 1/3),
    # item 1 one pair (C=1, tau 1). Weighted: (3 * 1/3 + 1 * 1) / 4 = 1/2 = (3 - 1) / 4.
    human = np.array([[3.0, 1.0], [2.0, np.nan], [1.0, 2.0]])
    metric = np.array([[0.9, 0.1], [0.95, 0.5], [0.1, 0.3]])
    kl = configure("kendall_like", {"human_margin": 1, "margin_rule": "at_least"})
    assert correlate(metric, human, "segment", kl).value == pytest.approx(0.5)
    # paraeval's item level is the plain mean over items: (1/3 + 1) / 2
    assert correlate(metric, human, "item", kl).value == pytest.approx(2 / 3)


# ---------------------------------------------------------------------------------------------
# tau_23, acc23 and tie calibration (Deutsch et al. 2023)
# ---------------------------------------------------------------------------------------------

# mt-metrics-eval CorrelationTest.testKendallVariants: gold 1 2 2 3 4, metric 2 1 1.5 5 3
GOLD_23 = np.array([1.0, 2.0, 2.0, 3.0, 4.0])
METRIC_23 = np.array([2.0, 1.0, 1.5, 5.0, 3.0])


def test_acc23_and_tau23_hand_worked() -> None:
    # pairs: (0,1) D, (0,2) D, (0,3) C, (0,4) C, (1,2) tied in gold only, (1,3) C, (1,4) C,
    # (2,3) C, (2,4) C, (3,4) D -> C=6, D=3, T_h=1: acc23 = 6/10, tau23 = (6 - 3 - 1)/10
    assert kendall_23(METRIC_23, GOLD_23, variant="acc23")[0] == pytest.approx(0.6)
    assert kendall_23(METRIC_23, GOLD_23, variant="tau23")[0] == pytest.approx(0.2)
    # epsilon 2 ties the metric where |diff| <= 2: (0,1) (0,2) (0,4) (1,4) (2,4) (3,4) T_m,
    # (1,2) tied in both; C left: (0,3) (1,3) (2,3) -> acc23 = (3 + 1)/10
    assert kendall_23(METRIC_23, GOLD_23, variant="acc23", epsilon=2)[0] == pytest.approx(0.4)


def test_tau23_second_mt_metrics_eval_case() -> None:
    # testKendallVariants_23: x (gold) 1 1 1 2 2 3 4, y (metric) 1 1 2 2 4 3 3: 21 pairs, ties in
    # x 4, in y 3, in both 1, discordant 2 -> C = 21 - 2 - 3 - 2 - 1 = 13; tau23 = (13+1-2-3-2)/21
    x = np.array([1.0, 1, 1, 2, 2, 3, 4])
    y = np.array([1.0, 1, 2, 2, 4, 3, 3])
    assert kendall_23(y, x, variant="tau23")[0] == pytest.approx(7 / 21)
    assert kendall_23(y, x, variant="acc23")[0] == pytest.approx(14 / 21)


def test_tie_calibration_hand_worked() -> None:
    # flipping pairs to metric ties in order of |metric diff|: at 0.5 (0,2) D->T_m (no change)
    # and (1,2) T_h->T_hm (+1): acc23 7/10, the maximum (mt-metrics-eval testKendallWithTiesOpt)
    value, eps = calibrated_epsilon(METRIC_23[:, None], GOLD_23[:, None])
    assert value == pytest.approx(0.7) and eps == 0.5
    assert kendall_23(METRIC_23, GOLD_23, variant="acc23", calibrate=True)[0] == pytest.approx(0.7)
    acc23 = COEFFICIENTS["acc23"]  # calibrated by default
    assert correlate(METRIC_23[:, None], GOLD_23[:, None], "system", acc23).value == pytest.approx(
        0.7
    )


def test_tie_calibration_item_level_shares_one_epsilon() -> None:
    # mt-metrics-eval's testKendallWithTiesOpt (average_by='item'): gold 1 2 2 3 3 4, metric
    # 2 1 1.5 5 3 2 as 2 systems x 3 items; the value is the mean of the per-item acc23 at the
    # one epsilon found, which is the best over all candidate epsilons
    gold = np.array([[1.0, 2, 2], [3, 3, 4]])
    metric = np.array([[2.0, 1, 1.5], [5, 3, 2]])
    value = correlate(metric, gold, "item", "acc23").value
    # item pairs (gold diff, metric diff): (2, 3), (1, 2), (2, 0.5) -> at epsilon 0 all three
    # concordant = 1; no epsilon does better
    assert value == 1.0
    # swap one item's metric so that a tie helps: item 1 gold 2 vs 2 (tie), metric 1 vs 1.2
    gold2 = np.array([[1.0, 2, 2], [3, 2, 4]])
    metric2 = np.array([[2.0, 1, 1.5], [5, 1.2, 2]])
    # epsilon 0: items 1, 0, 1 -> 2/3; epsilon 0.2 makes item 1 T_hm -> 1 and nothing else flips
    assert correlate(metric2, gold2, "item", "acc23").value == pytest.approx(1.0)
    fixed = configure("acc23", {"calibrate": False})
    assert correlate(metric2, gold2, "item", fixed).value == pytest.approx(2 / 3)


# ---------------------------------------------------------------------------------------------
# soft pairwise accuracy (WMT24, mt-metrics-eval pce)
# ---------------------------------------------------------------------------------------------


def test_pairwise_p_values_docstring_example() -> None:
    # pce.compute_pairwise_p_values' docstring: A = .8 .9 .7 1 .6, B = .2 .3 .1 .4 0, ten sign
    # rows; null deltas -0.6 0.6 0.6 -0.6 1.8 -0.6 3.0 0.6 0.6 -1.8 against 3.0 -> p = 1/10
    signs = np.array(
        [
            [1, 1, -1, -1, -1],
            [1, -1, 1, -1, 1],
            [1, -1, 1, 1, -1],
            [-1, 1, -1, -1, 1],
            [1, 1, 1, -1, 1],
            [-1, 1, -1, 1, -1],
            [1, 1, 1, 1, 1],
            [1, -1, 1, -1, 1],
            [1, 1, -1, -1, 1],
            [-1, 1, -1, -1, -1],
        ],
        dtype=np.float32,
    )
    scores = np.array([[0.8, 0.9, 0.7, 1.0, 0.6], [0.2, 0.3, 0.1, 0.4, 0.0]])
    p = pairwise_p_values(scores, signs)
    assert p[0, 1] == pytest.approx(0.1)


def test_soft_pairwise_accuracy_reference_value() -> None:
    # mt-metrics-eval CorrelationTest.testPairwiseConfidenceError: 0.872 (3 places)
    gold = np.array([1.0, 2, 3, 2, 3, 4]).reshape(2, 3)
    metric = np.array([2.0, 2, 4, 1, 3, 5]).reshape(2, 3)
    assert soft_pairwise_accuracy_value(metric, gold) == pytest.approx(0.872, abs=5e-4)
    assert correlate(metric, gold, "system", "soft_pairwise_accuracy").value == pytest.approx(
        0.872, abs=5e-4
    )


def test_soft_pairwise_accuracy_identical_scores_is_one() -> None:
    rng = np.random.default_rng(0)
    human = rng.normal(size=(4, 12))
    assert soft_pairwise_accuracy_value(human.copy(), human) == 1.0


# ---------------------------------------------------------------------------------------------
# Fisher z intervals (nlpstats fisher, Bonett & Wright 2000)
# ---------------------------------------------------------------------------------------------


def test_fisher_interval_hand_worked() -> None:
    # r = 0.5, n = 28, Pearson: atanh(.5) = 0.549306, se = 1/sqrt(25) = 0.2, z = 1.959964
    lo, hi = fisher_interval(0.5, 28, "pearson", 0.95)
    assert lo == pytest.approx(math.tanh(0.549306144 - 0.391992797), abs=1e-8)
    assert hi == pytest.approx(math.tanh(0.549306144 + 0.391992797), abs=1e-8)
    # Spearman: c = sqrt(1 + r^2/2) = sqrt(1.125); Kendall: b = 4, c = sqrt(0.437)
    lo, _ = fisher_interval(0.5, 28, "spearman", 0.95)
    assert lo == pytest.approx(math.tanh(0.549306144 - 1.959963985 * math.sqrt(1.125) / 5), 1e-8)
    _, hi = fisher_interval(0.5, 29, "kendall_b", 0.95)
    assert hi == pytest.approx(math.tanh(0.549306144 + 1.959963985 * math.sqrt(0.437) / 5), 1e-8)
    assert all(math.isnan(v) for v in fisher_interval(0.5, 3, "pearson"))
    assert all(math.isnan(v) for v in fisher_interval(0.5, 30, "kendall_like"))


# ---------------------------------------------------------------------------------------------
# averaging over items vs pooling ("none") and exact small-n p-values
# ---------------------------------------------------------------------------------------------


def test_item_average_and_pooled_match_mt_metrics_eval() -> None:
    # mt-metrics-eval CorrelationTest: Correlation(2, gold 1..6, metric 2 1 4 3 3 7);
    # Kendall average_by='none' 0.552 = paraeval's segment level; average_by='item' 1.00 = item
    gold = np.array([[1.0, 2, 3], [4, 5, 6]])
    metric = np.array([[2.0, 1, 4], [3, 3, 7]])
    assert correlate(metric, gold, "segment", "kendall_b").value == pytest.approx(0.552, abs=5e-4)
    assert correlate(metric, gold, "item", "kendall_b").value == 1.0
    assert correlate(metric, gold, "segment", "pearson").value == pytest.approx(0.776, abs=5e-4)


def test_pearson_on_two_values_is_nan_a_listed_deviation() -> None:
    # scipy and mt-metrics-eval give +1 on two points (its Pearson average_by='item' on the
    # matrix above is 1.00); paraeval leaves a line through two points undefined
    gold = np.array([[1.0, 2, 3], [4, 5, 6]])
    metric = np.array([[2.0, 1, 4], [3, 3, 7]])
    assert float(stats.pearsonr([1.0, 4.0], [2.0, 3.0]).statistic) == pytest.approx(1.0)
    assert math.isnan(correlate(metric, gold, "item", "pearson").value)


def _exact_two_sided(x: np.ndarray, y: np.ndarray, stat: object) -> float:
    values = np.array([stat(x, np.array(p)) for p in itertools.permutations(y)])  # type: ignore[operator]
    obs = stat(x, y)  # type: ignore[operator]
    greater = np.mean(values >= obs - 1e-12)
    less = np.mean(values <= obs + 1e-12)
    return float(min(1.0, 2 * min(greater, less)))


def test_exact_p_values_for_three_systems() -> None:
    # 3 systems in the humans' order: of the 3! = 6 pairings only the identity gives +1, so the
    # one-sided p is 1/6 and the two-sided 1/3 (scipy's asymptotic Spearman p here is 0.0)
    x = np.array([[0.1], [0.5], [0.9]])
    y = np.array([[1.0], [2.0], [3.0]])
    assert float(stats.spearmanr(x.ravel(), y.ravel()).pvalue) < 1e-6
    for coefficient in ("pearson", "spearman", "kendall_b"):
        corr = correlate(x, y, "system", coefficient)
        assert corr.value == pytest.approx(1.0)
        assert corr.p_value == pytest.approx(1 / 3)
        assert corr.n == 3


def test_exact_p_values_with_ties_enumerated() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0, 6.0])
    y = np.array([1.0, 1.0, 2.0, 3.0, 2.0])

    def tau_b(a: np.ndarray, b: np.ndarray) -> float:
        return float(stats.kendalltau(a, b).statistic)

    def rho(a: np.ndarray, b: np.ndarray) -> float:
        return float(stats.spearmanr(a, b).statistic)

    got_k = correlate(x[:, None], y[:, None], "system", "kendall_b").p_value
    got_s = correlate(x[:, None], y[:, None], "system", "spearman").p_value
    assert got_k == pytest.approx(_exact_two_sided(x, y, tau_b))
    assert got_s == pytest.approx(_exact_two_sided(x, y, rho))


# ---------------------------------------------------------------------------------------------
# Perm-Both (nlpstats): swap whole systems, then whole items
# ---------------------------------------------------------------------------------------------


def _perm_both_exact(a: np.ndarray, b: np.ndarray, h: np.ndarray, cells: bool) -> float:
    """Two-sided permutation p-value by enumerating every swap pattern: system-row masks XOR
    item-column masks (Perm-Both), or every cell mask (``cells``), each equally likely."""
    za = (a - a.mean()) / a.std()
    zb = (b - b.mean()) / b.std()

    def delta(mask: np.ndarray) -> float:
        xa = np.where(mask, zb, za)
        xb = np.where(mask, za, zb)
        ra = stats.pearsonr(xa.ravel(), h.ravel()).statistic
        rb = stats.pearsonr(xb.ravel(), h.ravel()).statistic
        return float(ra - rb)

    observed = delta(np.zeros(a.shape, dtype=bool))
    s, i = a.shape
    deltas = []
    if cells:
        for bits in itertools.product([False, True], repeat=s * i):
            deltas.append(delta(np.array(bits).reshape(s, i)))
    else:
        for rows in itertools.product([False, True], repeat=s):
            for cols in itertools.product([False, True], repeat=i):
                deltas.append(delta(np.array(rows)[:, None] ^ np.array(cols)[None, :]))
    return float(np.mean(np.abs(np.array(deltas)) >= abs(observed) - 1e-12))


def test_perm_both_matches_enumerated_distribution() -> None:
    h = np.array([[1.0, 4.0, 2.0], [3.0, 5.0, 1.0], [6.0, 2.0, 4.0]])
    a = h + np.array([[0.1, -0.2, 0.3], [0.0, 0.4, -0.1], [-0.3, 0.2, 0.1]])
    b = np.array([[2.0, 1.0, 3.0], [1.0, 6.0, 2.0], [5.0, 3.0, 2.0]])
    exact_both = _perm_both_exact(a, b, h, cells=False)
    exact_cells = _perm_both_exact(a, b, h, cells=True)
    assert abs(exact_both - exact_cells) > 0.03  # the two units are different tests
    k = 20_000
    rng = np.random.default_rng(0)
    got = permutation_test(a, b, h, "segment", "pearson", rng=rng, n_resamples=k, unit="both")
    cells = permutation_test(a, b, h, "segment", "pearson", rng=rng, n_resamples=k, unit="cells")
    # Monte Carlo error at k = 20,000 is below 0.004 (one standard error)
    assert got == pytest.approx(exact_both, abs=0.015)
    assert cells == pytest.approx(exact_cells, abs=0.015)


# ---------------------------------------------------------------------------------------------
# Williams' test only for correlation coefficients
# ---------------------------------------------------------------------------------------------


def test_williams_rejects_pairwise_accuracy_with_a_clear_message() -> None:
    rng = np.random.default_rng(0)
    human = rng.normal(size=(6, 5))
    metrics = {"a": human + rng.normal(size=(6, 5)), "b": rng.normal(size=(6, 5))}
    with pytest.raises(ValueError, match="method=permutation"):
        significance_table(
            metrics,
            {"human": human},
            level="system",
            coefficient="pairwise_accuracy",
            method="williams",
            rng=rng,
        )
    # the permutation test serves it
    rows = significance_table(
        metrics,
        {"human": human},
        level="system",
        coefficient="pairwise_accuracy",
        method="permutation",
        rng=rng,
        n_resamples=50,
    )
    assert len(rows) == 1 and 0.0 < rows[0]["p_value"] <= 1.0


# ---------------------------------------------------------------------------------------------
# listed deviations
# ---------------------------------------------------------------------------------------------


def test_item_level_has_no_p_value() -> None:
    # mt-metrics-eval averages the per-item p-values; paraeval reports none
    rng = np.random.default_rng(3)
    human = rng.normal(size=(5, 6))
    corr = correlate(human + rng.normal(size=(5, 6)), human, "item", "pearson")
    assert np.isfinite(corr.value) and math.isnan(corr.p_value)


def test_permutation_p_value_counts_the_observed_assignment() -> None:
    # an observed difference no permutation reaches: count / K would be 0 (mt-metrics-eval,
    # nlpstats); paraeval counts the observed assignment as one permutation: 1 / (1 + K)
    rng = np.random.default_rng(0)
    human = rng.normal(size=(4, 40))
    strong = human + rng.normal(scale=0.05, size=human.shape)
    noise = rng.normal(size=human.shape)
    k = 20
    p = permutation_test(
        strong, noise, human, "segment", "pearson", rng=np.random.default_rng(1), n_resamples=k
    )
    assert p == pytest.approx(1 / (1 + k))
    # a metric against itself: every permutation is as extreme: (1 + K) / (1 + K)
    same = permutation_test(
        strong, strong, human, "segment", "pearson", rng=np.random.default_rng(1), n_resamples=k
    )
    assert same == 1.0


def test_fisher_interval_in_the_table_uses_nlpstats_n() -> None:
    from paraeval.correlation import correlation_table

    rng = np.random.default_rng(2)
    human = rng.normal(size=(6, 30))
    metric = human + rng.normal(size=human.shape)
    human[0, :5] = np.nan  # the largest item still has all 6 systems
    rows = correlation_table(
        {"m": metric},
        {"h": human},
        levels=("segment", "item", "system"),
        coefficients=("pearson", "kendall_like"),
        interval="fisher",
        rng=np.random.default_rng(0),
    )
    by = {(r["level"], r["coefficient"]): r for r in rows}
    seg = by[("segment", "pearson")]
    assert (seg["ci_low"], seg["ci_high"]) == fisher_interval(seg["value"], 175, "pearson")
    item = by[("item", "pearson")]
    assert (item["ci_low"], item["ci_high"]) == fisher_interval(item["value"], 6, "pearson")
    system = by[("system", "pearson")]
    assert (system["ci_low"], system["ci_high"]) == fisher_interval(system["value"], 6, "pearson")
    assert math.isnan(by[("segment", "kendall_like")]["ci_low"])


# ---------------------------------------------------------------------------------------------
# settings reach the vectorised bootstrap and permutation paths
# ---------------------------------------------------------------------------------------------

SETTINGS_CASES = [
    ("kendall_like", {}, "segment"),
    ("kendall_like", {}, "item"),
    ("kendall_like", {"margin_rule": "above"}, "segment"),
    ("kendall_like", {"margin_rule": "above"}, "item"),
    ("kendall_like", {"human_margin": 1.0, "metric_ties": "skip"}, "segment"),
    ("kendall_like", {"human_margin": 1.0, "metric_ties": "skip"}, "item"),
    ("pairwise_accuracy", {}, "system"),
    ("pairwise_accuracy", {"human_ties": "skip"}, "system"),
    ("tau_23", {"epsilon": 1.0}, "item"),
    ("acc23", {"calibrate": False, "epsilon": 1.0}, "system"),
]


@pytest.mark.parametrize("unit", ["items", "systems", "both"])
@pytest.mark.parametrize(("name", "settings", "level"), SETTINGS_CASES)
def test_settings_under_resampling_equal_explicit_resamples(
    name: str, settings: dict, level: str, unit: str
) -> None:
    # integer scores: many ties; a system resample repeats systems (pairs of copies)
    from paraeval.correlation.bootstrap import resampled_values
    from paraeval.correlation.resamples import draw_resamples

    rng = np.random.default_rng(11)
    human = rng.integers(0, 4, size=(4, 6)).astype(float)
    metric = human + rng.integers(0, 3, size=(4, 6))
    human[2, 3] = np.nan
    coef = configure(name, settings)
    res = draw_resamples(np.random.default_rng(3), 4, 6, 30, unit)
    got = resampled_values(metric, human, level, coef, res)
    want = []
    for b in range(30):
        m, h = metric, human
        if res.item_idx is not None:
            m, h = m[:, res.item_idx[b]], h[:, res.item_idx[b]]
        if res.sys_idx is not None:
            m, h = m[res.sys_idx[b]], h[res.sys_idx[b]]
        want.append(correlate(m, h, level, coef).value)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("unit", ["items", "systems", "cells"])
def test_kendall_like_settings_in_the_permutation_test(unit: str) -> None:
    rng = np.random.default_rng(5)
    human = rng.integers(0, 3, size=(4, 7)).astype(float)
    a = human + rng.integers(0, 2, size=(4, 7))
    b = rng.integers(0, 3, size=(4, 7)).astype(float)
    coef = configure("kendall_like", {"human_margin": 1.0})
    za = (a - a.mean()) / a.std()
    zb = (b - b.mean()) / b.std()
    n = 40
    mask_rng = np.random.default_rng(1)
    shape = {"items": (n, 1, 7), "systems": (n, 4, 1), "cells": (n, 4, 7)}[unit]
    masks = mask_rng.random(shape) < 0.5

    def corr(x: np.ndarray) -> float:
        return correlate(x, human, "segment", coef).value

    observed = corr(za) - corr(zb)
    perm = np.array([corr(np.where(m, zb, za)) - corr(np.where(m, za, zb)) for m in masks])
    perm = perm[np.isfinite(perm)]
    hits = int((np.abs(perm) >= abs(observed) - 1e-12).sum())
    p = permutation_test(
        a, b, human, "segment", coef, rng=np.random.default_rng(1), n_resamples=n, unit=unit
    )
    assert p == pytest.approx((1 + hits) / (1 + perm.size))


def _brute_acc23(metric: np.ndarray, human: np.ndarray, variant: str) -> float:
    """Tie calibration by its definition: every candidate epsilon (0 and each metric difference
    of a pair), the mean over items of each item's statistic counted pair by pair, the best."""
    pairs = []
    for j in range(metric.shape[1]):
        ok = [s for s in range(metric.shape[0]) if np.isfinite(metric[s, j] + human[s, j])]
        pairs.append(
            [
                (metric[s, j] - metric[t, j], human[s, j] - human[t, j])
                for s, t in itertools.combinations(ok, 2)
            ]
        )
    candidates = {0.0} | {abs(dm) for item in pairs for dm, _ in item}
    best = -np.inf
    for eps in candidates:
        values = []
        for item in pairs:
            if not item:
                continue
            score = 0.0
            for dm, dh in item:
                tie_m, tie_h = abs(dm) <= eps, dh == 0
                if tie_m and tie_h:
                    score += 1
                elif tie_h or tie_m:
                    score += 0 if variant == "acc23" else -1
                elif np.sign(dm) == np.sign(dh):
                    score += 1
                else:
                    score += 0 if variant == "acc23" else -1
            values.append(score / len(item))
        best = max(best, float(np.mean(values)))
    return best


@pytest.mark.parametrize("seed", range(4))
def test_tie_calibration_equals_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    human = rng.integers(0, 4, size=(5, 6)).astype(float)
    metric = np.round(human + rng.normal(scale=1.0, size=human.shape), 1)
    metric[1, 2] = np.nan
    human[3, 0] = np.nan
    for name, variant in (("acc23", "acc23"), ("tau_23", "tau23")):
        coef = configure(name, {"calibrate": True})
        got = correlate(metric, human, "item", coef).value
        assert got == pytest.approx(_brute_acc23(metric, human, variant), abs=1e-12)


@pytest.mark.parametrize("coefficient", ["pearson", "spearman", "kendall_b", "kendall_c"])
def test_exact_p_values_equal_scipys_exact_permutation_test(coefficient: str) -> None:
    rng = np.random.default_rng(8)
    x = np.round(rng.normal(size=6), 1)
    y = np.round(x + rng.normal(size=6), 0)  # ties in y
    statistic = {
        "pearson": lambda b: stats.pearsonr(x, b).statistic,
        "spearman": lambda b: stats.spearmanr(x, b).statistic,
        "kendall_b": lambda b: stats.kendalltau(x, b, variant="b").statistic,
        "kendall_c": lambda b: stats.kendalltau(x, b, variant="c").statistic,
    }[coefficient]
    ref = stats.permutation_test(
        (y,), statistic, permutation_type="pairings", n_resamples=np.inf, vectorized=False
    )
    got = correlate(x[:, None], y[:, None], "system", coefficient)
    assert got.p_value == pytest.approx(float(ref.pvalue), abs=1e-12)
