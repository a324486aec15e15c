"""ROUGE-N of any order (``RougeN``): equal to rouge-score 0.1.2's ``rouge1`` .. ``rouge9`` in every
measure, with and without stemming, under both multi-reference rules; orders above 9 (which
rouge-score's scorer does not name) against the formula written out and hand-worked cases."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from rouge_score.rouge_scorer import RougeScorer

from paraeval.metrics.base import MetricConfigError
from paraeval.metrics.rouge import Rouge1, Rouge2, RougeN, RougeTokenizer
from tests.metrics.varied import unzip, varied_sets

MEASURES = ("precision", "recall", "fmeasure")
TOL = 1e-9
LONG = "the quick brown fox jumps over the lazy dog near the old river bank at dawn"

# what random sets rarely hold: overlaps of high order, repeats that clipping must count, texts
# shorter than n, empty texts, words that only match stemmed, and references whose F ties while
# precision and recall differ (max reports the first of them, as rouge-score's argmax)
HAND: list[tuple[str, list[str], str]] = [
    ("", ["the cat sat on the mat"], "src"),
    ("the cat sat on the mat", [""], "src"),
    ("", ["", "a"], "src"),
    ("cat", ["the cat", "cat"], "src"),
    ("a b", ["a b c", "a b"], "src"),
    (" ".join(["the"] * 12), [" ".join(["the"] * 5), " ".join(["the"] * 20)], "src"),
    ("a b a b a b a b a b a b", ["b a b a b a b a b a", "a b a b a b"], "src"),
    ("a b c a b c a b c a b c", ["a b c a b c", "c a b c a b c a b"], "src"),
    (LONG, [LONG], "src"),
    (LONG, [LONG.replace("lazy", "sleepy"), LONG.replace("dawn", "dusk")], "src"),
    (LONG.replace("brown ", ""), [LONG, LONG.replace("over", "across")], "src"),
    (LONG + " " + LONG, [LONG], "src"),
    (
        "the runners were running quickly through the cities and towns",
        ["the runner runs quick through the city and the town", "runners running cities"],
        "src",
    ),
    ("Walked, walking; WALKS: walkers!", ["walk walking walks walker"], "src"),
    ("a b c d e f", ["a b c d e f g h i", "a b c d"], "src"),
    ("a b c d e f", ["a b c d", "a b c d e f g h i"], "src"),
    ("one two three four five six", ["one two three four five six"] * 3, "src"),
]
SETS = varied_sets(240, seed=11) + HAND
CANDS, REFS, SOURCES = unzip(SETS)


def test_the_sets_have_high_order_overlaps() -> None:
    scores = RougeN(n=9).score(CANDS, REFS).segment["rouge9"]
    assert (scores > 0).sum() >= 10 and (scores < 1).sum() >= 10
    assert min(len(c.split()) for c in CANDS) == 0 and any(len(r) >= 3 for r in REFS)


@pytest.mark.slow
@pytest.mark.parametrize("stem", [False, True])
@pytest.mark.parametrize("n", range(1, 10))
def test_equals_rouge_score(n: int, stem: bool) -> None:
    key = f"rouge{n}"
    scorer = RougeScorer([key], use_stemmer=stem)
    per_ref = [[scorer.score(r, c)[key] for r in refs] for c, refs in zip(CANDS, REFS, strict=True)]
    best = [scorer.score_multi(refs, c)[key] for c, refs in zip(CANDS, REFS, strict=True)]
    for measure in MEASURES:
        got = RougeN(n=n, use_stemmer=stem, measure=measure).score(CANDS, REFS, SOURCES)
        want = np.array([getattr(s, measure) for s in best])
        np.testing.assert_allclose(got.segment[key], want, rtol=0, atol=TOL, err_msg=measure)
        assert abs(got.corpus[key] - float(np.mean(want))) <= TOL
        assert got.signature.startswith(f"{key}|") and f"measure:{measure}" in got.signature
        mean = RougeN(n=n, use_stemmer=stem, measure=measure, multi_ref="mean")
        want_mean = [np.mean([getattr(s, measure) for s in scores]) for scores in per_ref]
        got_mean = mean.score(CANDS, REFS).segment[key]
        np.testing.assert_allclose(got_mean, want_mean, rtol=0, atol=TOL, err_msg=measure)


def test_f_ties_report_the_first_reference() -> None:
    # both references give F = 0.8: one with P = 1, R = 2/3, the other with P = 2/3, R = 1
    first, second = HAND[-3], HAND[-2]
    p = RougeN(n=1, measure="precision").score([first[0], second[0]], [first[1], second[1]])
    np.testing.assert_allclose(p.segment["rouge1"], [1.0, 2 / 3], rtol=0, atol=TOL)


def _formula(cand: str, ref: str, n: int, tok: RougeTokenizer) -> tuple[float, float, float]:
    """Lin (2004)'s ROUGE-N written out: clipped shared n-grams over each side's n-grams."""
    a, b = tok(cand), tok(ref)
    ca = Counter(tuple(a[i : i + n]) for i in range(len(a) - n + 1))
    cb = Counter(tuple(b[i : i + n]) for i in range(len(b) - n + 1))
    shared = sum(min(k, cb[g]) for g, k in ca.items())
    p = shared / max(sum(ca.values()), 1)
    r = shared / max(sum(cb.values()), 1)
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


@pytest.mark.parametrize("n", [10, 12, 15])
def test_orders_above_nine_follow_the_formula(n: int) -> None:
    tok = RougeTokenizer(False)
    pairs = [(c, r) for c, refs in zip(CANDS, REFS, strict=True) for r in refs]
    want = np.array([_formula(c, r, n, tok) for c, r in pairs])
    assert (want[:, 2] > 0).sum() >= 5  # the long hand-made texts share n-grams of this order
    for k, measure in enumerate(MEASURES):
        got = RougeN(n=n, measure=measure).score([c for c, _ in pairs], [[r] for _, r in pairs])
        np.testing.assert_allclose(got.segment[f"rouge{n}"], want[:, k], rtol=0, atol=TOL)


def test_order_ten_worked_examples() -> None:
    cand = "one two three four five six seven eight nine ten eleven twelve"
    words = cand.split(" ")
    # the reference inserts "zero" before the last word: of its four 10-grams, the first two are
    # the candidate's first two (of three): P = 2/3, R = 2/4, F = 4/7
    ref = " ".join([*words[:11], "zero", words[11]])
    for measure, want in [("precision", 2 / 3), ("recall", 1 / 2), ("fmeasure", 4 / 7)]:
        got = RougeN(n=10, measure=measure).score([cand], [[ref]]).segment["rouge10"][0]
        assert got == pytest.approx(want, abs=TOL)
    # no 12-gram in common; a copy shares its one 12-gram; no 13-gram exists in 12 words
    assert RougeN(n=12).score([cand], [[ref]]).segment["rouge12"][0] == 0.0
    assert RougeN(n=12).score([cand], [[cand]]).segment["rouge12"][0] == pytest.approx(1.0)
    assert RougeN(n=13).score([cand], [[cand]]).segment["rouge13"][0] == 0.0
    # clipping: 20 "a" hold eleven equal 10-grams, 15 "a" six: 6 shared, P = 6/11, R = 1
    a20, a15 = " ".join(["a"] * 20), " ".join(["a"] * 15)
    f = RougeN(n=10).score([a20], [[a15]]).segment["rouge10"][0]
    assert f == pytest.approx(12 / 17, abs=TOL)


def test_orders_one_and_two_are_rouge1_and_rouge2() -> None:
    for n, fixed in [(1, Rouge1), (2, Rouge2)]:
        for settings in [{}, {"use_stemmer": True, "measure": "recall", "multi_ref": "mean"}]:
            ours, theirs = RougeN(n=n, **settings), fixed(**settings)  # type: ignore[arg-type]
            assert ours.name == theirs.name == f"rouge{n}"
            assert ours.signature() == theirs.signature()
            a, b = ours.score(CANDS, REFS), theirs.score(CANDS, REFS)
            np.testing.assert_array_equal(a.segment[ours.name], b.segment[theirs.name])


def test_the_name_and_column_carry_the_order() -> None:
    metric = RougeN(n=4)
    assert metric.name == "rouge4" and metric.output_columns == ("rouge4",)
    assert RougeN.name == "rougeN"  # the class's own: its config id
    result = metric.score(["a b c d"], [["a b c d"]])
    assert list(result.segment) == list(result.corpus) == ["rouge4"]
    assert result.signature.split("|")[0] == "rouge4"


@pytest.mark.parametrize("bad", [0, -2, 2.5, 3.0, True, "3", None])
def test_an_order_below_one_or_not_an_integer_is_a_config_error(bad: object) -> None:
    with pytest.raises(MetricConfigError, match=r"metric 'rougeN': n must be"):
        RougeN(n=bad)  # type: ignore[arg-type]


def test_the_fixed_orders_have_no_n_setting() -> None:
    with pytest.raises(TypeError):
        Rouge2(n=3)  # type: ignore[call-arg]
