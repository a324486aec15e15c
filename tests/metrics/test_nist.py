"""NIST against nltk.translate.nist_score, and the modified n-gram precision worked examples."""

from __future__ import annotations

import math

import numpy as np
import pytest
from nltk.translate.nist_score import corpus_nist, nist_length_penalty, sentence_nist

from paraeval.metrics._ngram import WordTokenizer
from paraeval.metrics.base import MetricConfigError
from paraeval.metrics.nist import NIST
from paraeval.metrics.nist import nist_length_penalty as our_penalty
from tests.metrics.varied import unzip, varied_sets

SETS = varied_sets(240, seed=5)
CANDS, REFS, SOURCES = unzip(SETS)
TOL = 1e-9


def _nltk_sentence(refs: list[tuple[str, ...]], hyp: tuple[str, ...], n: int) -> float | None:
    try:
        return float(sentence_nist([list(r) for r in refs], list(hyp), n))
    except ZeroDivisionError:
        return None  # NLTK's undefined case, see test_deviation_short_hypothesis


@pytest.mark.parametrize(
    ("tokenize", "lowercase", "order"),
    [("13a", False, 5), ("whitespace", True, 5), ("13a", True, 3)],
)
def test_equals_nltk(tokenize: str, lowercase: bool, order: int) -> None:
    tok = WordTokenizer(tokenize, lowercase)
    hyps = [tok(c) for c in CANDS]
    refss = [[tok(r) for r in refs] for refs in REFS]
    result = NIST(max_order=order, tokenize=tokenize, lowercase=lowercase).score(CANDS, REFS)
    compared = 0
    for k, (hyp, refs) in enumerate(zip(hyps, refss, strict=True)):
        want = _nltk_sentence(refs, hyp, order)
        if want is not None:
            assert abs(result.segment["nist"][k] - want) <= TOL, (k, CANDS[k], REFS[k])
            compared += 1
    assert compared >= 170
    want_corpus = corpus_nist(
        [[list(r) for r in refs] for refs in refss], [list(h) for h in hyps], order
    )
    assert abs(result.corpus["nist"] - want_corpus) <= TOL
    assert f"tok:{tokenize}" in result.signature and f"n:{order}" in result.signature


def test_systems_sharing_candidates_equal_nltk() -> None:
    # one metric scores three systems in turn; later ones meet pairs of earlier ones (in another
    # order, twice in one call) next to new ones: sentence and corpus scores stay NLTK's
    tok = WordTokenizer("13a")
    metric = NIST()
    for rows in (
        [*range(0, 60)],
        [9, 9, *range(59, 20, -1), *range(60, 90)],
        [2, *range(120, 95, -1)],
    ):
        cands = [CANDS[i] for i in rows]
        refs = [REFS[i] for i in rows]
        hyps = [tok(c) for c in cands]
        refss = [[tok(r) for r in rs] for rs in refs]
        result = metric.score(cands, refs)
        compared = 0
        for k, (hyp, rs) in enumerate(zip(hyps, refss, strict=True)):
            want = _nltk_sentence(rs, hyp, 5)
            if want is not None:
                assert abs(result.segment["nist"][k] - want) <= TOL
                compared += 1
        assert compared >= len(rows) // 2
        want_corpus = corpus_nist([[list(r) for r in rs] for rs in refss], [list(h) for h in hyps])
        assert abs(result.corpus["nist"] - want_corpus) <= TOL


def test_corpus_uses_information_weights_of_all_references() -> None:
    """The corpus score is not the mean of segment scores (weights pooled over the corpus)."""
    result = NIST().score(CANDS[:50], REFS[:50])
    assert abs(result.corpus["nist"] - float(np.mean(result.segment["nist"]))) > 1e-3


def test_deviation_short_hypothesis() -> None:
    """NLTK divides by zero when the hypothesis has no n-grams of some order; here that order
    adds 0, so with one reference the score equals NLTK's with max order = hypothesis length
    (the length ratio is the same for every order)."""
    hyp, ref = "the cat sat", "the cat sat on the mat"
    with pytest.raises(ZeroDivisionError):
        sentence_nist([ref.split()], hyp.split(), 5)
    ours = NIST(tokenize="whitespace").score([hyp], [[ref]]).segment["nist"][0]
    assert abs(ours - sentence_nist([ref.split()], hyp.split(), 3)) <= TOL
    empty = NIST().score([""], [[ref]])
    assert empty.segment["nist"][0] == 0.0 and empty.corpus["nist"] == 0.0


def test_length_penalty_is_half_at_two_thirds() -> None:
    assert our_penalty(3, 2) == pytest.approx(0.5)
    assert our_penalty(3, 2) == nist_length_penalty(3, 2)
    for ref_len, hyp_len in [(10, 1), (10, 7), (10, 10), (10, 15), (7, 0)]:
        assert our_penalty(ref_len, hyp_len) == nist_length_penalty(ref_len, hyp_len)


# -------------------------------------------- modified n-gram precision (the seeds' examples)
C = "a cat is on the table"
S1 = "there is a cat on the table"


def _clipped_precisions(metric: NIST, cand: str, ref: str) -> list[tuple[int, int]]:
    hyp_orders = metric._orders(metric.tokenizer(cand))
    ref_orders = metric._orders(metric.tokenizer(ref))
    return [
        (sum((h & r).values()), sum(h.values()))
        for h, r in zip(hyp_orders, ref_orders, strict=True)
    ]


def test_modified_precision_worked_examples() -> None:
    metric = NIST(tokenize="whitespace")
    prec = _clipped_precisions(metric, C, S1)
    assert prec[0] == (6, 6)  # unigram precision 1
    assert prec[1] == (3, 5)  # bigrams: a cat, on the, the table
    assert prec[2] == (1, 4)  # trigram: on the table
    # six times "there": the clip is 1 (S1 has one "there"), over six candidate unigrams
    assert _clipped_precisions(metric, "there " * 6, S1)[0] == (1, 6)


def test_information_weights_worked_example() -> None:
    """One reference "a b a c": info(a) = log2(4/2) = 1, info(b) = info(c) = 2,
    info(a b) = log2(count(a)/count(a b)) = 1; candidate "a b" (ratio 2/4 -> penalty)."""
    got = NIST(tokenize="whitespace", max_order=2).score(["a b"], [["a b a c"]]).segment["nist"][0]
    unigram = (1 + 2) / 2
    bigram = 1 / 1
    beta = math.log(0.5) / math.log(1.5) ** 2
    assert got == pytest.approx((unigram + bigram) * math.exp(beta * math.log(0.5) ** 2))


def test_settings() -> None:
    with pytest.raises(MetricConfigError):
        NIST(max_order=0)
    with pytest.raises(MetricConfigError):
        NIST(tokenize="nope")


def test_corpus_from_stats_equals_corpus_score_and_nltk() -> None:
    hyps = [
        "the cat sat on the mat today",
        "a dog barked at the moon all night long",
        "it is raining cats and dogs outside",
        "nothing to see here at all folks",
    ]
    refs = [
        ["the cat was sitting on the mat today"],
        ["a dog barked at the moon all night"],
        ["it rains cats and dogs outside now"],
        ["there is nothing to see here folks"],
    ]
    metric = NIST(tokenize="whitespace")
    result = metric.score(hyps, refs)
    assert result.stats is not None and result.stats.shape[0] == 4
    assert metric.corpus_from_stats(result.stats)["nist"] == pytest.approx(
        result.corpus["nist"], abs=1e-12
    )
    expected = corpus_nist([[r.split() for r in rr] for rr in refs], [h.split() for h in hyps])
    assert result.corpus["nist"] == pytest.approx(expected, abs=1e-9)
    # a subset of segments: the corpus score of those segments under the same weights
    sub = metric.corpus_from_stats(result.stats[[0, 0, 2]])["nist"]
    assert np.isfinite(sub) and sub != result.corpus["nist"]
