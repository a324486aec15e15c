"""CIDEr-D against pycocoevalcap's CiderScorer on pre-tokenized strings (no Java tokenizer)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pycocoevalcap.cider.cider import Cider
from pycocoevalcap.cider.cider_scorer import CiderScorer, precook

from paraeval.metrics._ngram import WordTokenizer, ngram_counts
from paraeval.metrics.base import MetricConfigError
from paraeval.metrics.cider import CIDEr
from tests.metrics.varied import unzip, varied_sets

SETS = varied_sets(240, seed=11)
CANDS, REFS, SOURCES = unzip(SETS)
TOL = 1e-9


def _coco(cands: list[str], refs: list[list[str]], tok: WordTokenizer) -> tuple[float, np.ndarray]:
    scorer = CiderScorer(n=4, sigma=6.0)
    for c, rs in zip(cands, refs, strict=True):
        scorer += (" ".join(tok(c)), [" ".join(tok(r)) for r in rs])
    score, scores = scorer.compute_score()
    return float(score), np.asarray(scores, dtype=float)


@pytest.mark.parametrize(("tokenize", "lowercase"), [("13a", True), ("whitespace", False)])
def test_equals_pycocoevalcap(tokenize: str, lowercase: bool) -> None:
    want_corpus, want = _coco(CANDS, REFS, WordTokenizer(tokenize, lowercase))
    result = CIDEr(tokenize=tokenize, lowercase=lowercase).score(CANDS, REFS, SOURCES)
    np.testing.assert_allclose(result.segment["cider"], want, rtol=0, atol=TOL)
    assert abs(result.corpus["cider"] - want_corpus) <= TOL
    assert result.segment["cider"].max() > 1.0  # the sets reach well into CIDEr's range


def test_equals_cider_wrapper_and_subsets() -> None:
    """Document frequencies come from the references of the call: a subset is scored as
    pycocoevalcap scores that subset (``Cider.compute_score`` with image-id dicts)."""
    tok = WordTokenizer("13a", True)
    for lo, hi in [(0, 1), (0, 7), (50, 120)]:
        gts = {i: [" ".join(tok(r)) for r in REFS[i]] for i in range(lo, hi)}
        res = {i: [" ".join(tok(CANDS[i]))] for i in range(lo, hi)}
        want_corpus, want = Cider().compute_score(gts, res)
        got = CIDEr().score(CANDS[lo:hi], REFS[lo:hi])
        np.testing.assert_allclose(got.segment["cider"], want, rtol=0, atol=TOL)
        assert abs(got.corpus["cider"] - float(want_corpus)) <= TOL


def test_systems_sharing_candidates_equal_pycocoevalcap() -> None:
    # one metric scores systems in turn: the second has the first's items in another order with
    # some candidates swapped (the same document frequencies, some pairs met before), the third
    # other items (other frequencies, where a pair met before scores differently)
    tok = WordTokenizer("13a", True)
    metric = CIDEr()
    first = list(range(0, 40))
    second = first[::-1]
    third = [*range(20, 70)]
    for rows, swap in ((first, False), (second, True), (third, False), (first, False)):
        cands = [CANDS[i] for i in rows]
        if swap:  # half the candidates from other items: new pairs under the same frequencies
            cands = [CANDS[i + 100] if k % 2 else CANDS[i] for k, i in enumerate(rows)]
        refs = [REFS[i] for i in rows]
        want_corpus, want = _coco(cands, refs, tok)
        got = metric.score(cands, refs)
        np.testing.assert_allclose(got.segment["cider"], want, rtol=0, atol=TOL)
        assert abs(got.corpus["cider"] - want_corpus) <= TOL
        # and bit for bit what a metric that never saw the earlier systems gives
        fresh = CIDEr().score(cands, refs)
        assert got.segment["cider"].tolist() == fresh.segment["cider"].tolist()


def test_sigma_setting() -> None:
    # pycocoevalcap always cooks 1..4-grams (its n is not passed on), so only sigma is compared;
    # other orders are covered by the hand-worked examples below
    tok = WordTokenizer("13a", True)
    scorer = CiderScorer(n=4, sigma=3.0)
    for c, rs in zip(CANDS[:60], REFS[:60], strict=True):
        scorer += (" ".join(tok(c)), [" ".join(tok(r)) for r in rs])
    want_corpus, want = scorer.compute_score()
    got = CIDEr(sigma=3.0).score(CANDS[:60], REFS[:60])
    np.testing.assert_allclose(got.segment["cider"], want, rtol=0, atol=TOL)
    assert abs(got.corpus["cider"] - float(want_corpus)) <= TOL
    assert "n:4" in got.signature and "sigma:3" in got.signature


def test_worked_example() -> None:
    """Two items, one reference each, unigrams only, no shared words between the items:
    every reference unigram has df = 1, idf = log(2). Candidate "a b" vs reference "a b c":
    tf-idf vectors (log2, log2) and (log2, log2, log2); clipped cosine = 2/(sqrt2*sqrt3).
    The length penalty counts BIGRAMS, of which unigram-only vectors have none: penalty 1."""
    got = CIDEr(max_order=1, tokenize="whitespace").score(["a b", "x"], [["a b c"], ["y z"]])
    want = 10 * (2 / (math.sqrt(2) * math.sqrt(3)))
    assert got.segment["cider"][0] == pytest.approx(want)
    assert got.segment["cider"][1] == 0.0


def test_length_penalty_counts_bigrams() -> None:
    """With bigrams: "a b" has 1 bigram, "a b c" 2: the penalty is exp(-1/72)."""
    pair = CIDEr(max_order=2, tokenize="whitespace").score(["a b", "x"], [["a b c"], ["y z"]])
    # unigram cosine 2/sqrt6 as above; bigram "a b" vs ("a b", "b c"): 1/sqrt2
    want = 10 * (2 / math.sqrt(6) + 1 / math.sqrt(2)) / 2 * math.exp(-1 / 72)
    assert pair.segment["cider"][0] == pytest.approx(want)


def test_identical_candidate_gets_ten() -> None:
    ref = "a man rides a red bicycle down the hill"
    got = CIDEr().score([ref, "zz"], [[ref], ["qq rr ss tt uu"]]).segment["cider"]
    assert got[0] == pytest.approx(10.0)


def test_settings() -> None:
    with pytest.raises(MetricConfigError):
        CIDEr(max_order=0)
    with pytest.raises(MetricConfigError):
        CIDEr(sigma=0)


def test_ngram_counts_in_pycocoevalcap_order() -> None:
    # the tf-idf norms sum in this order, so it must be pycocoevalcap's, not just the counts
    for text in ["the cat the cat sat", "", "a", "a b a b a b c"]:
        want = precook(text, 4)
        assert list(ngram_counts(tuple(text.split()), 4).items()) == list(want.items())
