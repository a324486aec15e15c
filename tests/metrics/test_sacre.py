"""BLEU, chrF / chrF++, TER, iBLEU and self-BLEU (metrics/sacre.py) against sacrebleu called
directly, segment by segment and for the corpus, on varied sets with 1-4 (ragged) references."""

from __future__ import annotations

from typing import Any

import pytest
import sacrebleu
from sacrebleu.metrics import CHRF as SacreCHRF

from paraeval.metrics.sacre import BLEU, CHRF, IBLEU, TER, SelfBLEU
from tests.metrics.varied import unzip, varied_sets

SETS = varied_sets(130, seed=13)
CANDS, REFS, SOURCES = unzip(SETS)
TOL = 1e-9


def _streams(refs: list[list[str]]) -> list[list[Any]]:
    """sacrebleu's reference streams; a missing reference is None (sacrebleu's ragged case)."""
    width = max(len(r) for r in refs)
    return [[rs[k] if k < len(rs) else None for rs in refs] for k in range(width)]


def _close(got: float, want: float) -> None:
    assert abs(got - want) <= TOL, (got, want)


def test_sets_have_ragged_multi_references() -> None:
    assert len(SETS) >= 100
    assert {len(r) for r in REFS} == {1, 2, 3, 4}


BLEU_OPTIONS = [
    {"tokenize": "13a", "lowercase": False, "smooth_method": "exp", "smooth_value": None},
    {"tokenize": "intl", "lowercase": True, "smooth_method": "floor", "smooth_value": 0.1},
    {"tokenize": "char", "lowercase": False, "smooth_method": "add-k", "smooth_value": 1},
    {"tokenize": "none", "lowercase": True, "smooth_method": "none", "smooth_value": None},
]


@pytest.mark.parametrize(
    "opts", BLEU_OPTIONS, ids=lambda o: f"{o['tokenize']}-{o['smooth_method']}"
)
def test_bleu_equals_sacrebleu(opts: dict) -> None:
    result = BLEU(**opts).score(CANDS, REFS, SOURCES)
    for k, (c, refs) in enumerate(zip(CANDS, REFS, strict=True)):
        want = sacrebleu.sentence_bleu(c, refs, use_effective_order=True, **opts).score
        _close(result.segment["bleu"][k], want)
    want = sacrebleu.corpus_bleu(CANDS, _streams(REFS), use_effective_order=False, **opts).score
    _close(result.corpus["bleu"], want)
    assert f"tok:{opts['tokenize']}" in result.signature
    assert f"case:{'lc' if opts['lowercase'] else 'mixed'}" in result.signature
    assert f"smooth:{opts['smooth_method']}" in result.signature


def test_bleu_without_effective_order() -> None:
    result = BLEU(effective_order=False).score(CANDS, REFS)
    for k, (c, refs) in enumerate(zip(CANDS, REFS, strict=True)):
        _close(
            result.segment["bleu"][k],
            sacrebleu.sentence_bleu(c, refs, use_effective_order=False).score,
        )
    assert "eff:no" in result.signature


@pytest.mark.parametrize(
    ("word_order", "lowercase", "whitespace"),
    [(0, False, False), (2, False, False), (2, True, True)],
)
def test_chrf_and_chrf_plus_plus_equal_sacrebleu(
    word_order: int, lowercase: bool, whitespace: bool
) -> None:
    result = CHRF(word_order=word_order, lowercase=lowercase, whitespace=whitespace).score(
        CANDS, REFS
    )
    direct = SacreCHRF(word_order=word_order, lowercase=lowercase, whitespace=whitespace)
    for k, (c, refs) in enumerate(zip(CANDS, REFS, strict=True)):
        want = direct.sentence_score(c, refs).score
        _close(result.segment["chrf"][k], want)
        if not lowercase:
            fn = sacrebleu.sentence_chrf(
                c, refs, word_order=word_order, remove_whitespace=not whitespace
            ).score
            _close(result.segment["chrf"][k], fn)
    _close(result.corpus["chrf"], direct.corpus_score(CANDS, _streams(REFS)).score)
    assert f"nw:{word_order}" in result.signature


# TER's shift search is slow on the 60-150-word texts; option variants use the shorter sets
SHORT = [k for k, (c, refs) in enumerate(zip(CANDS, REFS, strict=True)) if len(c.split()) <= 40]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("opts", "subset"),
    [
        ({}, False),
        ({"normalized": True, "case_sensitive": True}, True),
        ({"no_punct": True, "asian_support": True}, True),
    ],
)
def test_ter_equals_sacrebleu(opts: dict, subset: bool) -> None:
    index = SHORT if subset else list(range(len(CANDS)))
    cands = [CANDS[k] for k in index]
    refs_all = [REFS[k] for k in index]
    result = TER(**opts).score(cands, refs_all)
    for k, (c, refs) in enumerate(zip(cands, refs_all, strict=True)):
        _close(result.segment["ter"][k], sacrebleu.sentence_ter(c, refs, **opts).score)
    _close(result.corpus["ter"], sacrebleu.corpus_ter(cands, _streams(refs_all), **opts).score)


@pytest.mark.parametrize(("alpha", "tokenize"), [(0.8, "13a"), (0.5, "intl"), (1.0, "13a")])
def test_ibleu_is_combination_of_two_sacrebleu_bleus(alpha: float, tokenize: str) -> None:
    result = IBLEU(alpha=alpha, tokenize=tokenize).score(CANDS, REFS, SOURCES)
    for k, (c, refs, s) in enumerate(zip(CANDS, REFS, SOURCES, strict=True)):
        bleu_r = sacrebleu.sentence_bleu(c, refs, tokenize=tokenize).score
        bleu_s = sacrebleu.sentence_bleu(c, [s], tokenize=tokenize).score
        _close(result.segment["ibleu"][k], alpha * bleu_r - (1 - alpha) * bleu_s)
    corp_r = sacrebleu.corpus_bleu(CANDS, _streams(REFS), tokenize=tokenize).score
    corp_s = sacrebleu.corpus_bleu(CANDS, [SOURCES], tokenize=tokenize).score
    _close(result.corpus["ibleu"], alpha * corp_r - (1 - alpha) * corp_s)
    assert f"alpha:{alpha:g}" in result.signature


@pytest.mark.parametrize("lowercase", [False, True])
def test_self_bleu_is_bleu_against_the_source(lowercase: bool) -> None:
    result = SelfBLEU(lowercase=lowercase).score(CANDS, REFS, SOURCES)
    for k, (c, s) in enumerate(zip(CANDS, SOURCES, strict=True)):
        _close(
            result.segment["self_bleu"][k],
            sacrebleu.sentence_bleu(c, [s], lowercase=lowercase).score,
        )
    _close(
        result.corpus["self_bleu"],
        sacrebleu.corpus_bleu(CANDS, [SOURCES], lowercase=lowercase).score,
    )


def test_modified_precision_worked_examples() -> None:
    """BLEU's clipped n-gram counts (sacrebleu statistics: len_h, len_r, correct 1..4,
    total 1..4) for the seeds' examples."""
    metric = BLEU()
    stats = metric._stats(["a cat is on the table"], [["there is a cat on the table"]])[0]
    correct, total = stats[2:6], stats[6:10]
    assert (correct[0], total[0]) == (6, 6)  # unigram precision 1
    assert (correct[1], total[1]) == (3, 5)  # bigram 3/5
    assert (correct[2], total[2]) == (1, 4)  # trigram 1/4
    stats = metric._stats(
        ["there there there there there there"], [["there is a cat on the table"]]
    )[0]
    assert (stats[2], stats[6]) == (1, 6)  # clipped unigram precision 1/6


def test_corpus_from_stats_equals_corpus_score() -> None:
    for metric, key in [(BLEU(), "bleu"), (CHRF(word_order=2), "chrf"), (TER(), "ter")]:
        result = metric.score(CANDS, REFS, SOURCES)
        assert result.stats is not None
        _close(metric.corpus_from_stats(result.stats)[key], result.corpus[key])


@pytest.mark.parametrize("alpha", [0.8, 0.3])
def test_ibleu_parts_and_their_combination_are_the_formula_on_sacrebleus_bleus(
    alpha: float,
) -> None:
    """combine, components/from_components and the batched corpus score all give
    α·BLEU(c, R) − (1−α)·BLEU(c, S) of sacrebleu's own BLEUs, bit for bit."""
    import numpy as np
    from sacrebleu.metrics.bleu import BLEU as SacreBLEU

    metric = IBLEU(alpha=alpha)
    result = metric.score(CANDS, REFS, SOURCES)
    corp_r = sacrebleu.corpus_bleu(CANDS, _streams(REFS)).score
    corp_s = sacrebleu.corpus_bleu(CANDS, [SOURCES]).score
    want = alpha * corp_r - (1.0 - alpha) * corp_s
    assert metric.combine(corp_r, corp_s) == want
    assert metric.combine(corp_r, corp_s, alpha=0.25) == 0.25 * corp_r - 0.75 * corp_s
    seg_r = np.array(
        [sacrebleu.sentence_bleu(c, r).score for c, r in zip(CANDS, REFS, strict=True)]
    )
    seg_s = np.array(
        [sacrebleu.sentence_bleu(c, [s]).score for c, s in zip(CANDS, SOURCES, strict=True)]
    )
    assert np.array_equal(metric.combine(seg_r, seg_s), alpha * seg_r - (1.0 - alpha) * seg_s)
    # the α-free parts, and back
    parts = metric.components(result)
    assert parts.corpus == {"bleu_ref": corp_r, "bleu_src": corp_s}
    assert np.array_equal(parts.segment["bleu_ref"], seg_r)
    assert np.array_equal(parts.segment["bleu_src"], seg_s)
    again = IBLEU(alpha=alpha).from_components(parts)
    assert again.corpus == result.corpus == {"ibleu": want}
    assert np.array_equal(again.segment["ibleu"], result.segment["ibleu"])
    # batched corpus scores of summed statistics: sacrebleu's corpus BLEU of each half
    assert result.stats is not None
    ref, src = IBLEU.split_stats(result.stats)
    rows = np.stack([result.stats.sum(axis=0), result.stats[:7].sum(axis=0)])
    corpus = SacreBLEU()
    sub_r = corpus._compute_score_from_stats([round(x) for x in ref[:7].sum(axis=0)]).score
    sub_s = corpus._compute_score_from_stats([round(x) for x in src[:7].sum(axis=0)]).score
    batched = metric.corpus_from_stats_batched(rows)
    assert batched[0] == want
    assert batched[1] == alpha * sub_r - (1.0 - alpha) * sub_s
    assert metric.corpus_from_stats(result.stats[:7]) == {"ibleu": batched[1]}


@pytest.mark.slow
@pytest.mark.parametrize("metric_cls", [BLEU, CHRF, TER])
def test_pairs_shared_between_calls_give_sacrebleus_statistics(metric_cls: type) -> None:
    # systems that share candidates: the second and third calls meet pairs of the first in
    # another order, twice within one call, and next to new ones; the statistics (and the
    # scores) of every call are those sacrebleu extracts from that call alone
    metric = metric_cls()
    first = list(range(0, 60))
    second = [5, 5, *range(59, 30, -1), *range(60, 90)]
    third = [*range(120, 90, -1), 0, 7, 7]
    for rows in (first, second, third):
        cands = [CANDS[i] for i in rows]
        refs = [REFS[i] for i in rows]
        got = metric._stats(cands, refs)
        sacre = metric._corpus_metric()
        want = sacre._extract_corpus_statistics(cands, _streams(refs))
        assert got.tolist() == [[float(x) for x in row] for row in want]
        seg = metric.score(cands, refs, None).segment[metric.name]
        for c, r, value in zip(cands, refs, seg, strict=True):
            if metric_cls is BLEU:
                expect = sacrebleu.sentence_bleu(c, r).score
            elif metric_cls is CHRF:
                expect = sacrebleu.sentence_chrf(c, r).score
            else:
                expect = sacrebleu.sentence_ter(c, r).score
            _close(value, expect)


@pytest.mark.parametrize("order", [1, 2, 3, 4, 5, 6])
def test_bleu_max_ngram_order_equals_sacrebleu(order: int) -> None:
    """sacrebleu's max_ngram_order (its tests use 1 to 6): segment, corpus and the batched
    corpus formula, BLEU and iBLEU; an order other than 4 is named in the signature."""
    ours = BLEU(max_ngram_order=order)
    result = ours.score(CANDS, REFS)
    corpus = sacrebleu.metrics.BLEU(max_ngram_order=order).corpus_score(CANDS, _streams(REFS))
    _close(result.corpus["bleu"], corpus.score)
    sentence = sacrebleu.metrics.BLEU(max_ngram_order=order, effective_order=True)
    for k, (c, refs) in enumerate(zip(CANDS, REFS, strict=True)):
        _close(result.segment["bleu"][k], sentence.sentence_score(c, refs).score)
    assert result.stats is not None and result.stats.shape[1] == 2 + 2 * order
    _close(float(ours.corpus_from_stats_batched(result.stats[None].sum(axis=1))[0]), corpus.score)
    named = f"|ngram:{order}" in ours.signature(1, segment=False)
    assert named == (order != 4) and named == (f"|ngram:{order}" in ours.signature())
    ibleu = IBLEU(alpha=0.7, max_ngram_order=order).score(CANDS, REFS, SOURCES)
    src = sacrebleu.metrics.BLEU(max_ngram_order=order).corpus_score(CANDS, [SOURCES]).score
    _close(ibleu.corpus["ibleu"], 0.7 * corpus.score - 0.3 * src)


def test_bleu_max_ngram_order_is_checked() -> None:
    from paraeval.metrics.base import MetricConfigError

    for bad in (0, 2.5, True):
        with pytest.raises(MetricConfigError, match="max_ngram_order"):
            BLEU(max_ngram_order=bad)  # type: ignore[arg-type]
