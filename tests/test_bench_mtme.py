"""benchmarks/bench_mtme.py's parts: the generated mt-metrics-eval set, and the anchor's
re-expression of mt-metrics-eval on hand-worked arrays and against paraeval's definitions."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from paraeval.correlation import correlate
from paraeval.correlation.significance import significance_clusters

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_mtme  # noqa: E402
import mtme_anchor as A  # noqa: E402
import mtme_set  # noqa: E402


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_generated_set_has_the_layout_and_is_deterministic(tmp_path: Path) -> None:
    layout = mtme_set.generate(tmp_path / "a", systems=4, segments=30, metrics=3, src_metrics=1)
    mtme_set.generate(tmp_path / "b", systems=4, segments=30, metrics=3, src_metrics=1)
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    assert layout.metrics == ["Metric01-refA", "Metric02-refA", "Metric03-src"]
    evs = A.read_eval_set(str(layout.root), "en-de")
    assert sorted(evs.sys_outputs) == layout.systems and set(evs.refs) == {"refA"}
    assert evs.metric_names == set(layout.metrics)
    assert len({tuple(t) for t in evs.sys_outputs.values()}) == 4  # outputs differ by system
    assert all(len(v) == 1 for v in evs.scores["sys"]["Metric03-src"].values())
    gold = evs.scores["seg"]["mqm"]
    unrated = [i for i in range(30) if gold["sys00"][i] is None]
    assert unrated and all(gold[s][i] is None for s in layout.systems for i in unrated)
    rated = [v for s in layout.systems for v in gold[s] if v is not None]
    assert len(set(rated)) < len(rated)  # MQM-like steps: ties
    corrs = A.get_correlations(evs, "seg", {"refA"}, "mqm")
    assert sorted(corrs) == layout.metrics and corrs["Metric01-refA"].num_sys == 4


def test_assign_ranks_matches_hand_work_and_paraeval() -> None:
    sig = np.zeros((4, 4))
    sig[0, 1:] = [0.3, 0.01, 0.0]
    sig[1, 2:] = [0.2, 0.0]
    sig[2, 3] = 0.5
    # B joins A (0.3); C is beaten by A (0.01): cluster 2; D only compared with C there (0.5)
    assert A.assign_ranks(sig, 0.05) == [1, 1, 2, 2]
    names = "ABCD"
    pvalues = {(names[i], names[j]): sig[i, j] for i in range(4) for j in range(i + 1, 4)}
    values = dict(zip(names, [0.9, 0.8, 0.7, 0.6], strict=True))
    assert list(significance_clusters(values, pvalues).values()) == [1, 1, 2, 2]


def _task(values: dict[str, float], tests: dict, span: tuple[float, float]) -> A.TaskResult:
    def test(a: str, b: str) -> tuple[float, list]:
        p, diffs = tests[(a, b)]
        return p, [(values[b] + d, values[b]) for d in diffs]

    result = A.compare_metrics(values, test)
    result.range = span
    return result


def test_average_corr_matrix_on_two_tasks_of_three_metrics() -> None:
    one = _task(
        {"A": 0.8, "B": 0.7, "C": 0.6},
        {("A", "B"): (0.3, [0.2, -0.2]), ("A", "C"): (0.01, [0.0, 0.3]), ("B", "C"): (0.2, [0.1])},
        (0.0, 1.0),
    )
    assert {m: r for m, (_, r) in one.corr_ranks.items()} == {"A": 1, "B": 1, "C": 2}
    two = _task(
        {"A": 0.5, "B": 0.6, "C": 0.1},
        {
            ("B", "A"): (0.5, [0.4, -0.4, 0.0]),
            ("B", "C"): (0.5, [0.2, 0.0, -0.2]),
            ("A", "C"): (0.5, [0.6, -0.6, 0.2]),
        },
        (-1.0, 1.0),
    )
    np.testing.assert_allclose(two.draws("A", "B"), [[0.5, 0.9], [0.5, 0.1], [0.5, 0.5]])
    ranks, sig = A.average_corr_matrix([one, two])
    # averages: A .4 + .375, B .35 + .4, C .3 + .275. A vs B: task 1's draws .1, -.1 tiled to
    # three, task 2's -.1, .1, 0 (its order was B, A): sums 0, 0, .1 -> 1 of 3 >= .025.
    # A vs C: sums .15, 0, .05 < .2; B vs C: task 1 .05 tiled, task 2 .05, 0, -.05 < .175
    assert list(ranks) == ["A", "B", "C"]
    assert [c for c, _ in ranks.values()] == pytest.approx([0.775, 0.75, 0.575])
    assert [r for _, r in ranks.values()] == [1, 1, 2]
    assert sig[0, 1] == pytest.approx(1 / 3) and sig[0, 2] == 0.0 and sig[1, 2] == 0.0


def _hand_matrices() -> tuple[np.ndarray, np.ndarray]:
    h = np.array(
        [
            [0.0, -1.0, -2.0, np.nan, -0.5, 0.0],
            [0.0, -1.0, -1.0, np.nan, -0.5, -3.0],
            [-1.0, 0.0, -2.0, np.nan, 0.0, -3.0],
            [-1.0, -1.0, 0.0, np.nan, -4.0, 0.0],
        ]
    )
    m = np.array(
        [
            [0.9, 0.5, 0.2, 0.3, 0.7, 0.8],
            [0.9, 0.4, 0.25, 0.1, 0.6, 0.1],
            [0.5, 0.6, 0.21, 0.2, 0.7, 0.2],
            [0.4, 0.45, 0.9, 0.4, 0.1, 0.85],
        ]
    )
    return m, h


def _packed(m: np.ndarray, h: np.ndarray) -> A.Correlation:
    gold = [None if np.isnan(v) else float(v) for v in h.ravel()]
    return A.Correlation(h.shape[0], gold, [float(v) for v in m.ravel()])


def test_acc23_by_item_matches_paraeval_and_the_counting_terms() -> None:
    m, h = _hand_matrices()
    c = _packed(m, h)
    value, epsilon = A.kendall_with_ties_opt(c.gold_scores, c.metric_scores, c.num_sys)
    assert value == pytest.approx(correlate(m, h, "item", "acc23").value, abs=1e-12)
    agree, share = bench_mtme.acc23_terms(c, epsilon)
    assert float((agree * share).sum()) == pytest.approx(value, abs=1e-12)
    # the matrix path of the pairwise test gives the same item values at that threshold
    rated = [i for i in range(6) if not np.isnan(h[0, i])]
    items = [
        A.acc23_matrix(A.KendallPreproc(h[:, i]), A.PairwiseDiffs(m[:, i], epsilon)) for i in rated
    ]
    assert float(np.mean(items)) == pytest.approx(value, abs=1e-12)


def test_pce_matches_paraeval_and_the_cached_counting_version() -> None:
    # MQM-like steps of 0.5: float32 sums are exact, so tied permutations tie in any order of
    # summation (a matrix's memory layout changes that order in BLAS)
    rng = np.random.default_rng(3)
    h = rng.integers(-10, 1, size=(5, 40)) * 0.5
    m = h + rng.normal(0, 1.5, size=h.shape)
    h[:, [3, 17]] = np.nan  # unrated segments
    c = _packed(m, h)
    value = A.pce_wrapper({"m": c})(c.gold_scores, c.metric_scores)[0]
    assert value == pytest.approx(correlate(m, h, "system", "soft_pairwise_accuracy").value)
    # the permutation test calls it on the vectors without the unrated segments
    gold, metric = A.filter_gold_nones(c.gold_scores, c.metric_scores)
    assert bench_mtme.FastPce(5)(np.asarray(gold), np.asarray(metric))[0] == value


def test_permutation_tests_stop_early_as_mt_metrics_eval_does() -> None:
    rng = np.random.default_rng(5)
    h = rng.integers(-6, 1, size=(4, 20)) * 0.5
    good, bad = _packed(h + 0.0, h), _packed(rng.normal(size=h.shape), h)
    rs = np.random.RandomState(0)
    # the pairs test checks its stopping rule only after a draw that counts: none here (p = 0
    # below 0.02 at 100 and 200 permutations), so it runs all of them
    p, delta, used, draws = A.pairwise_permutation_sig_diff(bad, good, rs, k=300)
    assert (p, used, len(draws)) == (0.0, 300, 300) and delta > 0
    # a pair that ties counts every draw: p = 1 above 0.5 at the first block
    p, delta, used, _ = A.pairwise_permutation_sig_diff(good, good, rs, k=300)
    assert (p, delta, used) == (1.0, 0.0, 100)

    # the scores test checks at every block: no draw counts, p = 0 at 100 permutations
    def pearson(g: np.ndarray, x: np.ndarray) -> tuple[float]:
        return (float(np.corrcoef(g, x)[0, 1]),)

    p, delta, used, draws = A.permutation_sig_diff(bad, good, pearson, rs, k=300)
    assert (p, used, len(draws)) == (0.0, 100, 100) and delta > 0
