"""PINC, distinct-n, inter-BLEU and semantic diversity.

PINC and distinct-n by hand-worked examples; inter-BLEU against sacrebleu.sentence_bleu of each
output with the system's other outputs as references; semantic diversity against the pairwise
cosines of sentence-transformers' embeddings.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import sacrebleu
import torch

from paraeval.metrics.base import MetricConfigError
from paraeval.metrics.diversity import PINC, Distinct1, Distinct2, InterBLEU, SemanticDiversity
from paraeval.metrics.encoder_match import unit_sums
from paraeval.metrics.encoder_model import resolve_model_path
from tests.metrics._semantic_texts import pairs
from tests.metrics.varied import varied_sets


def _none(n: int) -> list[list[str]]:
    return [[] for _ in range(n)]


# --------------------------------------------------------------------------- PINC
def test_pinc_hand_worked() -> None:
    source = "the cat sat on the mat"
    cand = "the cat lay on the rug"
    # unigram set of c: {the, cat, lay, on, rug} (5), shared {the, cat, on}: 1 − 3/5 = 0.4
    # bigrams of c: the-cat cat-lay lay-on on-the the-rug (5), shared {the-cat, on-the}: 1 − 2/5
    # trigrams (4): shared none of cat-lay-on ...; the-cat-lay no; on-the-rug no: 1 − 0/4 = 1
    # 4-grams (3): none shared: 1
    expected = (0.4 + 0.6 + 1.0 + 1.0) / 4
    got = PINC().score([cand], _none(1), [source]).segment["pinc"]
    assert got[0] == pytest.approx(expected, abs=1e-12)


def test_pinc_sets_and_counts_differ_on_repeats() -> None:
    source = "a b"
    cand = "a a a b"
    # sets: unigrams {a, b} all in source: 0; bigrams {a-a, a-b}: a-b shared: 1 − 1/2;
    # trigrams {a-a-a, a-a-b}: 1; 4-grams {a-a-a-b}: 1  -> (0 + 0.5 + 1 + 1) / 4
    sets = PINC().score([cand], _none(1), [source]).segment["pinc"][0]
    assert sets == pytest.approx(2.5 / 4)
    # counts: unigrams a×3 b×1 vs a×1 b×1: clipped 2 of 4 -> 0.5; bigrams a-a×2 a-b×1: 1 of 3
    counts = PINC(ngrams="count").score([cand], _none(1), [source]).segment["pinc"][0]
    assert counts == pytest.approx((0.5 + (1 - 1 / 3) + 1 + 1) / 4)
    assert "ngrams:count" in PINC(ngrams="count").signature()
    assert "ngrams:set" in PINC().signature()


def test_pinc_copy_short_and_empty() -> None:
    sources = ["The cat, sat.", "one two", "x y z", "anything"]
    cands = ["The cat, sat.", "two three", "", "  "]
    got = PINC().score(cands, _none(4), sources).segment["pinc"]
    # a copy: 0; two words: only n = 1, 2 count ({two, three}: 1 − 1/2; {two-three}: 1)
    assert got[0] == 0.0
    assert got[1] == pytest.approx((0.5 + 1.0) / 2)
    # no words at all: nothing new, 0
    assert got[2] == 0.0 and got[3] == 0.0
    # sacrebleu's 13a splits the punctuation: "cat," -> "cat ,"
    assert PINC().score(["The cat sat ."], _none(1), ["The cat, sat."]).segment["pinc"][0] > 0
    assert PINC(lowercase=True).score(["THE CAT"], _none(1), ["the cat"]).segment["pinc"][0] == 0


def test_pinc_bad_setting() -> None:
    with pytest.raises(MetricConfigError, match="ngrams"):
        PINC(ngrams="bag")


# --------------------------------------------------------------------------- distinct-n
def test_distinct_hand_worked() -> None:
    outs = ["a b a", "a b c", ""]
    # unigrams: a b a a b c -> 6, distinct {a, b, c} = 3 -> 0.5
    # bigrams: a-b b-a a-b b-c -> 4, distinct 3 -> 0.75
    r1 = Distinct1().score(outs, _none(3))
    r2 = Distinct2().score(outs, _none(3))
    assert r1.corpus["distinct_1"] == pytest.approx(0.5)
    assert r2.corpus["distinct_2"] == pytest.approx(0.75)
    # a system-level score: no per-segment value
    assert np.isnan(r1.segment["distinct_1"]).all() and len(r1.segment["distinct_1"]) == 3
    assert Distinct1.describe().corpus_only and Distinct1().group == "output_diversity"
    assert Distinct1().score([""], _none(1)).corpus["distinct_1"] == 0.0
    assert np.isnan(Distinct1().score([], []).corpus["distinct_1"])


# --------------------------------------------------------------------------- inter-BLEU
def test_inter_bleu_equals_sacrebleu_against_the_other_outputs() -> None:
    outs = [c for c, _, _ in varied_sets(60, seed=4)]
    outs += ["the cat sat", "the cat sat", "", "a"]
    metric = InterBLEU()
    got = metric.sentence_scores(outs)
    expected = [
        sacrebleu.sentence_bleu(o, [x for j, x in enumerate(outs) if j != i]).score
        for i, o in enumerate(outs)
    ]
    np.testing.assert_allclose(got, expected, atol=1e-9, rtol=0)
    assert max(expected) == pytest.approx(100.0)  # the duplicated output
    result = metric.score(outs, _none(len(outs)))
    assert result.corpus["inter_bleu"] == pytest.approx(float(np.mean(expected)), abs=1e-9)
    assert np.isnan(result.segment["inter_bleu"]).all()
    assert not InterBLEU.higher_is_better
    assert "refs:other_outputs" in result.signature
    lc = InterBLEU(lowercase=True, smooth_method="floor", smooth_value=0.1)
    expected_lc = [
        sacrebleu.sentence_bleu(
            o,
            [x for j, x in enumerate(outs) if j != i],
            lowercase=True,
            smooth_method="floor",
            smooth_value=0.1,
        ).score
        for i, o in enumerate(outs)
    ]
    np.testing.assert_allclose(lc.sentence_scores(outs), expected_lc, atol=1e-9, rtol=0)
    assert np.isnan(InterBLEU().score(["only one"], _none(1)).corpus["inter_bleu"])


# --------------------------------------------------------------------------- semantic
def test_semantic_diversity_equals_pairwise_sentence_transformers_cosines() -> None:
    from sentence_transformers import SentenceTransformer

    outs, _ = pairs(25, seed=3)
    outs += [outs[0]]  # a repeated output: a pair at distance 0
    path, _ = resolve_model_path("default")
    emb = SentenceTransformer(path, device="cpu").encode(outs, convert_to_numpy=True)
    emb = emb.astype(np.float64)
    dists = [
        1 - emb[i] @ emb[j] / (np.linalg.norm(emb[i]) * np.linalg.norm(emb[j]))
        for i, j in itertools.combinations(range(len(outs)), 2)
    ]
    result = SemanticDiversity().score(outs, _none(len(outs)))
    assert result.corpus["semantic_diversity"] == pytest.approx(float(np.mean(dists)), abs=1e-6)
    assert np.isnan(result.segment["semantic_diversity"]).all()
    same = SemanticDiversity().score(["a cat", "a cat", "a cat"], _none(3))
    assert same.corpus["semantic_diversity"] == pytest.approx(0.0, abs=1e-6)


def test_mean_pairwise_distance_with_a_zero_vector() -> None:
    def distance(emb: np.ndarray) -> float:
        return SemanticDiversity.mean_pairwise_distance(*unit_sums(torch.from_numpy(emb)), len(emb))

    # pairs: (e1, e2) cos 0, (e1, 0) cos 0, (e2, 0) cos 0 -> mean distance 1
    assert distance(np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])) == pytest.approx(1.0)
    # cos: 1, −1, −1 -> distances 0, 2, 2
    assert distance(np.array([[1.0, 0.0], [2.0, 0.0], [-1.0, 0.0]])) == pytest.approx(4 / 3)
    assert np.isnan(distance(np.array([[1.0, 0.0]])))
