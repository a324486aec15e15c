"""ParaScore, reference-free ParaScore and BERT-iBLEU.

ParaScore equals the ``parascore`` toolkit's reference-based scorer (``ParaScorer.base_score``,
parascore 1.0.5) on the same packaged model and layer. The toolkit's reference-free function pairs
its (P, R, F) tuple with the per-candidate diversity list (three sums, not one per candidate), so
the reference-free score and BERT-iBLEU are checked by hand-worked cases on bert-score's and
sacrebleu's own numbers.
"""

from __future__ import annotations

import random

import bert_score
import nltk
import numpy as np
import pytest
import sacrebleu

from paraeval.metrics._lcs import edit_distances
from paraeval.metrics.base import MetricConfigError
from paraeval.metrics.encoder_model import resolve_model_path
from paraeval.metrics.paraphrase import (
    BERTiBLEU,
    ParaScore,
    ParaScoreFree,
    diversity_terms,
    edit_ratios,
)
from tests.metrics._semantic_texts import pairs, paraphrase

MODEL_PATH, _ = resolve_model_path("default")


def _triples(n: int, seed: int) -> tuple[list[str], list[list[str]], list[str]]:
    """(candidates, references, sources): sources paraphrase the first reference; some candidates
    copy their source (DS = −1), others are far from it (DS = γ)."""
    cands, refs = pairs(n, seed=seed)
    rng = random.Random(seed + 1)
    sources = [paraphrase(r[0], rng) for r in refs]
    for i in range(0, n, 9):
        cands[i] = sources[i]
    return cands, refs, sources


def _bert_f1(cands: list[str], refs: list) -> np.ndarray:
    _, _, f = bert_score.score(cands, refs, model_type=MODEL_PATH, num_layers=6)
    return f.numpy().astype(np.float64)


def test_edit_distances_equal_nltk_edit_distance() -> None:
    rng = random.Random(3)
    alphabet = "abcé 字😀"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12))) for _ in range(600)]
    pairs = [*zip(texts[::2], texts[1::2], strict=True), ("kitten", "sitting"), ("", "")]
    got = edit_distances(pairs)
    assert got.tolist() == [nltk.edit_distance(a, b) for a, b in pairs]
    assert got[-2] == 3
    assert edit_ratios([("", ""), ("abcd", "abcx")]).tolist() == [0.0, pytest.approx(0.25)]


def test_diversity_term_hand_worked() -> None:
    # γ = 0.35: −1 for a copy, −1 + (1.35/0.35)·0.1 = −0.6142857… at d = 0.1, γ from d = γ on
    ds = diversity_terms(np.array([0.0, 0.1, 0.35, 0.9, 0.35 - 1e-12]), 0.35).tolist()
    assert ds[0] == -1.0
    assert ds[1] == pytest.approx(-1 + (1.35 / 0.35) * 0.1)
    assert ds[2:4] == [0.35, 0.35]
    # continuous from below at d = γ: −1 + (γ+1) = γ
    assert ds[4] == pytest.approx(0.35)


@pytest.mark.slow
def test_parascore_equals_the_parascore_toolkit() -> None:
    from parascore import ParaScorer

    cands, refs, sources = _triples(120, seed=11)
    assert any(len(r) > 1 for r in refs)
    scorer = ParaScorer(model_type=MODEL_PATH, num_layers=6)
    expected = np.asarray(scorer.base_score(cands, sources, refs), dtype=np.float64)
    result = ParaScore().score(cands, refs, sources)
    got = result.segment["parascore"]
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
    # both branches of DS and a source that beats the references occur
    ratios = edit_ratios(list(zip(cands, sources, strict=True)))
    assert (ratios == 0).any() and (ratios >= 0.35).any() and ((ratios > 0) & (ratios < 0.35)).any()
    assert result.corpus["parascore"] == pytest.approx(float(expected.mean()), abs=1e-6)
    assert result.signature.startswith("parascore|impl:paraeval|sim:bertscore[f1,all-MiniLM-L6-v2@")
    assert "|gamma:0.35|w:0.05" in result.signature


def test_parascore_free_hand_worked() -> None:
    cands = ["The cat sat on the mat.", "The cat sat on a mat.", "Stocks fell on Monday."]
    sources = ["The cat sat on the mat.", "The cat sat on the mat.", "The cat sat on the mat."]
    f_src = _bert_f1(cands, sources)
    d = [
        0.0,
        nltk.edit_distance(cands[1], sources[1]) / max(len(cands[1]), len(sources[1])),
        nltk.edit_distance(cands[2], sources[2]) / max(len(cands[2]), len(sources[2])),
    ]
    # the second candidate is 0 < d < γ, the third d ≥ γ
    assert 0 < d[1] < 0.35 <= d[2]
    ds = [-1.0, -1 + (1.35 / 0.35) * d[1], 0.35]
    expected = f_src + 0.05 * np.array(ds)
    got = ParaScoreFree().score(cands, [[], [], []], sources).segment["parascore_free"]
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
    # a copy: F = 1 (up to float32), DS = −1, so 1 − 0.05
    assert got[0] == pytest.approx(0.95, abs=1e-6)
    # settings change the number and the signature
    other = ParaScoreFree(gamma=0.5, weight=0.1)
    assert "gamma:0.5|w:0.1" in other.signature()
    got2 = other.score(cands, [[], [], []], sources).segment["parascore_free"]
    assert got2[2] == pytest.approx(f_src[2] + 0.1 * 0.5, abs=1e-6)


def test_parascore_without_references_is_parascore_free_when_the_reference_is_the_source() -> None:
    cands, _, sources = _triples(30, seed=5)
    free = ParaScoreFree().score(cands, [[] for _ in cands], sources).segment["parascore_free"]
    based = ParaScore().score(cands, [[s] for s in sources], sources).segment["parascore"]
    np.testing.assert_allclose(based, free, atol=1e-12, rtol=0)


def test_bert_ibleu_hand_worked() -> None:
    cands = ["A cat was sitting on the mat.", "The cat sat on the mat.", "Stocks fell on Monday."]
    sources = ["The cat sat on the mat."] * 3
    f = _bert_f1(cands, sources)
    bleu = np.array(
        [sacrebleu.sentence_bleu(c, [s]).score for c, s in zip(cands, sources, strict=True)]
    )
    beta = 4.0
    # the copy has BLEU 100: 1 − BLEU/100 = 0, its harmonic mean is 0
    expected = [
        ((beta / f[0] + 1 / (1 - bleu[0] / 100)) / (beta + 1)) ** -1,
        0.0,
        ((beta / f[2] + 1 / (1 - bleu[2] / 100)) / (beta + 1)) ** -1,
    ]
    result = BERTiBLEU().score(cands, [[], [], []], sources)
    np.testing.assert_allclose(result.segment["bert_ibleu"], expected, atol=1e-6, rtol=0)
    assert 0 < bleu[0] < 100 and bleu[2] < 100
    assert result.corpus["bert_ibleu"] == pytest.approx(float(np.mean(expected)), abs=1e-6)
    sig = result.signature
    assert sig.startswith("bert_ibleu|impl:paraeval|sim:bertscore[f1,") and "|beta:4|" not in sig
    assert sig.endswith("|vs:source|beta:4") and "tok:13a" in sig
    # β weighs the BERTScore side: β = 1 is the plain harmonic mean
    one = BERTiBLEU(beta=1).score(cands[:1], [[]], sources[:1]).segment["bert_ibleu"][0]
    novelty = 1 - bleu[0] / 100
    assert one == pytest.approx(2 * f[0] * novelty / (f[0] + novelty), abs=1e-6)


def test_bad_settings_are_one_line_errors() -> None:
    with pytest.raises(MetricConfigError, match="gamma"):
        ParaScore(gamma=0)
    with pytest.raises(MetricConfigError, match="beta"):
        BERTiBLEU(beta=-1)
    with pytest.raises(MetricConfigError, match=r"bert_ibleu.*tokenize"):
        BERTiBLEU(tokenize="nope")


def test_shares_the_encoder_pass_with_bertscore() -> None:
    from paraeval.metrics.bertscore import BERTScore
    from paraeval.metrics.encoder import Encoders

    encoders = Encoders()
    a, b = BERTScore(encoders=encoders), ParaScore(encoders=encoders)
    assert a.encoder is b.bertscore.encoder
    cands, refs, sources = _triples(12, seed=2)
    every = cands + sources + [r for rs in refs for r in rs]
    b.score(cands, refs, sources)
    a.score(cands, refs)
    BERTiBLEU(encoders=encoders).score(cands, refs, sources)
    assert a.encoder.forward_sentences == len(set(every))
