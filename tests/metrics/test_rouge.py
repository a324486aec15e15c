"""ROUGE family against Google rouge-score (1/2/L/Lsum) and rouge-metric (L/W/S/SU, which is a
line-for-line port of ROUGE-1.5.5.pl), plus the worked examples of Lin (2004)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from rouge_metric import PyRouge
from rouge_score import tokenizers
from rouge_score.rouge_scorer import RougeScorer

from paraeval.metrics._lcs import LCS, TokenIds, pack_pairs, pair_scores
from paraeval.metrics.base import MetricConfigError
from paraeval.metrics.rouge import (
    Rouge1,
    Rouge2,
    RougeL,
    RougeLsum,
    RougeS,
    RougeSU,
    RougeTokenizer,
    RougeW,
)
from tests.metrics.varied import unzip, varied_sets

SETS = varied_sets(240, seed=3)
CANDS, REFS, SOURCES = unzip(SETS)
TOL = 1e-9

GOOGLE = {"rouge1": Rouge1, "rouge2": Rouge2, "rougeL": RougeL, "rougeLsum": RougeLsum}


def _pairs() -> tuple[list[str], list[list[str]]]:
    """Every (candidate, single reference) pair of the varied sets."""
    cands = [c for c, refs in zip(CANDS, REFS, strict=True) for _ in refs]
    refs = [[r] for rs in REFS for r in rs]
    return cands, refs


def test_varied_sets_are_varied() -> None:
    assert len(SETS) >= 200
    n_refs = {len(r) for r in REFS}
    assert n_refs == {1, 2, 3, 4}
    lengths = [len(c.split()) for c in CANDS]
    assert min(lengths) == 0 and max(lengths) >= 60
    assert any("\n" in c for c in CANDS + [r for rs in REFS for r in rs])
    assert any(not c.isascii() for c in CANDS)


@pytest.mark.parametrize("stem", [False, True])
def test_tokenizer_equals_rouge_score(stem: bool) -> None:
    theirs = tokenizers.DefaultTokenizer(use_stemmer=stem)
    ours = RougeTokenizer(stem)
    for text in CANDS + SOURCES + [r for rs in REFS for r in rs]:
        assert list(ours(text)) == theirs.tokenize(text)


@pytest.mark.parametrize("stem", [False, True])
@pytest.mark.parametrize("key", sorted(GOOGLE))
def test_equals_rouge_score(key: str, stem: bool) -> None:
    scorer = RougeScorer([key], use_stemmer=stem)
    ref_f = np.array(
        [scorer.score_multi(refs, c)[key].fmeasure for c, refs in zip(CANDS, REFS, strict=True)]
    )
    result = GOOGLE[key](use_stemmer=stem).score(CANDS, REFS, SOURCES)
    np.testing.assert_allclose(result.segment[key], ref_f, rtol=0, atol=TOL)
    assert abs(result.corpus[key] - float(np.mean(ref_f))) <= TOL
    assert f"stem:{'porter' if stem else 'no'}" in result.signature


@pytest.mark.parametrize("key", ["rouge2", "rougeLsum"])
def test_measure_and_mean_rule_equal_rouge_score(key: str) -> None:
    scorer = RougeScorer([key])
    per_ref = [[scorer.score(r, c)[key] for r in refs] for c, refs in zip(CANDS, REFS, strict=True)]
    # max rule: the reference with the best F (first on ties), reporting its recall
    want_recall = [s[int(np.argmax([x.fmeasure for x in s]))].recall for s in per_ref]
    got = GOOGLE[key](measure="recall").score(CANDS, REFS).segment[key]
    np.testing.assert_allclose(got, want_recall, rtol=0, atol=TOL)
    want_mean = [np.mean([x.precision for x in s]) for s in per_ref]
    got = GOOGLE[key](measure="precision", multi_ref="mean").score(CANDS, REFS).segment[key]
    np.testing.assert_allclose(got, want_mean, rtol=0, atol=TOL)


def _rouge_metric(skip: int | None) -> tuple[list[dict[str, dict[str, float]]], str, str, str]:
    cands, refs = _pairs()
    tok = RougeTokenizer(False)
    pyrouge = PyRouge(
        rouge_n=(),
        rouge_l=True,
        rouge_w=True,
        rouge_s=True,
        rouge_su=True,
        skip_gap=skip,
        mode="individual",
    )
    res = pyrouge.evaluate_tokenized(
        [[list(tok(c))] for c in cands], [[[list(tok(r[0]))]] for r in refs]
    )
    suffix = str(skip) if skip else "*"  # rouge-metric names gap 0 like "any distance"
    return res, "rouge-w-1.2", f"rouge-s{suffix}", f"rouge-su{suffix}"


@pytest.mark.parametrize("skip", [None, 0, 4])
def test_skip_bigrams_equal_rouge_metric(skip: int | None) -> None:
    """ROUGE-S/SU (ROUGE-1.5.5 counting) and ROUGE-L per pair, P, R and F, against rouge-metric."""
    res, _, s_key, su_key = _rouge_metric(skip)
    cands, refs = _pairs()
    for cls, key, theirs_key in [(RougeS, "rougeS", s_key), (RougeSU, "rougeSU", su_key)]:
        for measure, short in [("precision", "p"), ("recall", "r"), ("fmeasure", "f")]:
            got = cls(skip_distance=skip, measure=measure).score(cands, refs).segment[key]
            want = [d[theirs_key][short] for d in res]
            np.testing.assert_allclose(got, want, rtol=0, atol=TOL, err_msg=f"{key} {measure}")
    if skip is None:
        got = RougeL().score(cands, refs).segment["rougeL"]
        np.testing.assert_allclose(got, [d["rouge-l"]["f"] for d in res], rtol=0, atol=TOL)


def test_rouge_w_rouge155_formula_equals_rouge_metric() -> None:
    res, w_key, _, _ = _rouge_metric(None)
    cands, refs = _pairs()
    for measure, short in [("precision", "p"), ("recall", "r"), ("fmeasure", "f")]:
        got = RougeW(formula="rouge155", measure=measure).score(cands, refs).segment["rougeW"]
        np.testing.assert_allclose(got, [d[w_key][short] for d in res], rtol=0, atol=TOL)


def _wlcs_paper(x: list[str], y: list[str], w: float) -> float:
    """Lin (2004) Figure 1's WLCS, written out as in the paper (full c and l tables)."""
    m, n = len(x), len(y)
    c = [[0.0] * (n + 1) for _ in range(m + 1)]
    ln = [[0] * (n + 1) for _ in range(m + 1)]
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            if x[i - 1] == y[j - 1]:
                k = ln[i - 1][j - 1]
                c[i][j] = c[i - 1][j - 1] + (k + 1) ** w - k**w
                ln[i][j] = k + 1
            elif c[i - 1][j] > c[i][j - 1]:
                c[i][j] = c[i - 1][j]
            else:
                c[i][j] = c[i][j - 1]
    return c[m][n]


@pytest.mark.parametrize("weight", [1.2, 2.0])
def test_rouge_w_lin2004_equals_paper_recurrence(weight: float) -> None:
    cands, refs = _pairs()
    tok = RougeTokenizer(False)
    want_p, want_r, want_f = [], [], []
    for c, (r,) in zip(cands, refs, strict=True):
        x, y = list(tok(r)), list(tok(c))
        if not x or not y:
            want_p.append(0.0)
            want_r.append(0.0)
            want_f.append(0.0)
            continue
        wlcs = _wlcs_paper(x, y, weight)
        rec = (wlcs / len(x) ** weight) ** (1 / weight)
        prec = (wlcs / len(y) ** weight) ** (1 / weight)
        want_p.append(prec)
        want_r.append(rec)
        want_f.append(0.0 if prec + rec == 0 else 2 * prec * rec / (prec + rec))
    for measure, want in [("precision", want_p), ("recall", want_r), ("fmeasure", want_f)]:
        got = RougeW(weight=weight, measure=measure).score(cands, refs).segment["rougeW"]
        np.testing.assert_allclose(got, want, rtol=0, atol=TOL)


def test_packed_pairs_and_the_lcs_kernel() -> None:
    """Each distinct text is packed once; the LCS length is the weighted LCS at weight 1."""
    ids = TokenIds()
    flat, starts, lens, pa, pb = pack_pairs(
        [("a", "b", "c"), ("x",), ("a", "b", "c")], [("a", "c"), (), ("c", "b", "a")], ids
    )
    assert (pa.tolist(), pb.tolist(), lens.tolist()) == ([0, 1, 0], [2, 3, 4], [3, 1, 2, 0, 3])
    assert flat.tolist() == [0, 1, 2, 3, 0, 2, 2, 1, 0] and ids.vocab == {
        "a": 0,
        "b": 1,
        "c": 2,
        "x": 3,
    }
    assert pair_scores(flat, starts, lens, pa, pb, LCS).tolist() == [2.0, 0.0, 1.0]
    cands, refs = _pairs()
    tok = RougeTokenizer(False)
    a, b = [tok(c) for c in cands], [tok(r) for (r,) in refs]
    got = pair_scores(*pack_pairs(a, b, TokenIds()), LCS)
    assert got.tolist() == [_wlcs_paper(list(x), list(y), 1.0) for x, y in zip(a, b, strict=True)]


@pytest.mark.parametrize("cls", [RougeW, RougeS, RougeSU])
def test_multi_reference_rules(cls: Any) -> None:
    """max: the per-reference score of the best-F reference; mean: the mean over references."""
    per_pair_f = cls().score(*_pairs()).segment[cls.name]
    per_pair_r = cls(measure="recall").score(*_pairs()).segment[cls.name]
    bounds = np.cumsum([0] + [len(r) for r in REFS])
    best = [int(np.argmax(per_pair_f[a:b])) + a for a, b in itertools.pairwise(bounds)]
    got = cls(measure="recall").score(CANDS, REFS).segment[cls.name]
    np.testing.assert_allclose(got, per_pair_r[best], rtol=0, atol=TOL)
    got = cls(multi_ref="mean").score(CANDS, REFS)
    want = [per_pair_f[a:b].mean() for a, b in itertools.pairwise(bounds)]
    np.testing.assert_allclose(got.segment[cls.name], want, rtol=0, atol=TOL)
    assert abs(got.corpus[cls.name] - float(np.mean(want))) <= TOL
    assert "refs:mean" in got.signature


# ------------------------------------------------------------------ worked examples (Lin 2004)
C = "a cat is on the table"
S1 = "there is a cat on the table"


def test_rouge_n_recall_worked_example() -> None:
    # 6 of the 7 reference unigrams and 3 of its 6 bigrams (a cat, on the, the table) are matched
    assert Rouge1(measure="recall").score([C], [[S1]]).segment["rouge1"][0] == pytest.approx(6 / 7)
    assert Rouge2(measure="recall").score([C], [[S1]]).segment["rouge2"][0] == pytest.approx(1 / 2)
    assert Rouge2(measure="precision").score([C], [[S1]]).segment["rouge2"][0] == pytest.approx(
        3 / 5
    )


def test_rouge_w_prefers_consecutive_matches_where_rouge_l_ties() -> None:
    x = "A B C D E F G"
    y1 = "A B C D H I K"
    y2 = "A H B K C I D"
    l_scores = RougeL().score([y1, y2], [[x], [x]]).segment["rougeL"]
    assert l_scores[0] == l_scores[1] == pytest.approx(4 / 7)
    # the paper's f(k) = k^2: WLCS(X, Y1) = 4^2 = 16, WLCS(X, Y2) = 4 * 1^2 = 4
    w2 = RougeW(weight=2.0).score([y1, y2], [[x], [x]]).segment["rougeW"]
    assert w2[0] == pytest.approx(np.sqrt(16 / 49)) and w2[1] == pytest.approx(np.sqrt(4 / 49))
    w12 = RougeW().score([y1, y2], [[x], [x]]).segment["rougeW"]
    assert w12[0] == pytest.approx((4**1.2 / 7**1.2) ** (1 / 1.2))
    assert w12[0] > w12[1]


def test_rouge_s_zero_for_reversed_reference_but_su_not() -> None:
    ref = "police killed the gunman"
    rev = "gunman the killed police"
    assert RougeS().score([rev], [[ref]]).segment["rougeS"][0] == 0.0
    su = RougeSU().score([rev], [[ref]]).segment["rougeSU"][0]
    # ROUGE-1.5.5 counts the unigrams of all tokens but the last: candidate {gunman, the,
    # killed}, reference {police, killed, the}: 2 hits; units 6 skip-bigrams + 3 unigrams each
    assert su == pytest.approx(2 / 9)


def test_rouge_s_skip_distance_worked_example() -> None:
    # Lin's S1/S2: "police killed the gunman" vs "police kill the gunman": skip-bigrams in common
    # with any distance: (police,the), (police,gunman), (the,gunman) = 3 of 6
    s = RougeS(measure="recall").score(["police kill the gunman"], [["police killed the gunman"]])
    assert s.segment["rougeS"][0] == pytest.approx(3 / 6)
    # skip distance 0 = plain bigrams: only (the, gunman) of 3
    s0 = RougeS(skip_distance=0, measure="recall").score(
        ["police kill the gunman"], [["police killed the gunman"]]
    )
    assert s0.segment["rougeS"][0] == pytest.approx(1 / 3)


def test_deviation_rouge155_rouge_w_recall_below_one_for_identical_text() -> None:
    """ROUGE-1.5.5.pl (and rouge-metric) weight the reference length twice, so an identical
    candidate of n words gets recall n^(-0.2) at w = 1.2; the default (Lin 2004) gives 1."""
    text = "one two three four five six seven eight"
    lin = RougeW(measure="recall").score([text], [[text]]).segment["rougeW"][0]
    old = RougeW(formula="rouge155", measure="recall").score([text], [[text]]).segment["rougeW"][0]
    theirs = PyRouge(rouge_n=(), rouge_l=False, rouge_w=True).evaluate_tokenized(
        [[text.split()]], [[[text.split()]]]
    )["rouge-w-1.2"]["r"]
    assert lin == pytest.approx(1.0)
    assert old == pytest.approx(8 ** (-0.2)) and abs(old - theirs) <= TOL


def test_deviation_su_ignores_last_token_as_rouge155() -> None:
    """With ROUGE-1.5.5's counting a two-word reversal shares no unit at all."""
    assert RougeSU().score(["b a"], [["a b"]]).segment["rougeSU"][0] == 0.0
    res = PyRouge(rouge_n=(), rouge_l=False, rouge_su=True).evaluate_tokenized(
        [[["b", "a"]]], [[[["a", "b"]]]]
    )
    assert res["rouge-su*"]["f"] == 0.0


def test_multiline_rouge_lsum_differs_from_rouge_l() -> None:
    cand = "the cat sat\non the mat"
    ref = "on the mat\nthe cat sat"
    lsum = RougeLsum().score([cand], [[ref]]).segment["rougeLsum"][0]
    lcs = RougeL().score([cand], [[ref]]).segment["rougeL"][0]
    assert lsum == pytest.approx(1.0) and lcs == pytest.approx(3 / 6)


def test_settings_are_validated_and_signed() -> None:
    with pytest.raises(MetricConfigError):
        RougeW(weight=0.5)
    with pytest.raises(MetricConfigError):
        RougeW(formula="other")
    with pytest.raises(MetricConfigError):
        Rouge1(measure="f1")
    with pytest.raises(MetricConfigError):
        RougeS(skip_distance=-1)
    sig = RougeS(skip_distance=4).signature()
    assert "skip:4" in sig and "tok:rouge-score" in sig
    assert "w:1.2" in RougeW().signature() and "formula:lin2004" in RougeW().signature()
