"""Signatures of the sacrebleu metrics equal sacrebleu's own ``get_signature()``.

For every combination of the settings that work offline (tokenizers that need a downloaded model
or another package are left out) and for one, two and a varying number of references: the corpus
score's signature is ``<name>|`` and sacrebleu's signature of the corpus computation, and the
segment scores' signature is sacrebleu's of what ``sentence_bleu`` uses. The metrics built on
BLEU carry the same strings in brackets.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from sacrebleu.metrics import BLEU as SacreBLEU
from sacrebleu.metrics import CHRF as SacreCHRF
from sacrebleu.metrics import TER as SacreTER

from paraeval.metrics.diversity import InterBLEU
from paraeval.metrics.paraphrase import BERTiBLEU
from paraeval.metrics.sacre import BLEU, CHRF, IBLEU, TER, SelfBLEU

HYPS = ["the cat sat on the mat", "a dog barked loudly at night"]
# references per hypothesis for each reference count (None: a varying number)
REFS: dict[int | None, list[list[str]]] = {
    1: [["the cat is on the mat"], ["a dog barked at night"]],
    2: [["the cat is on the mat", "a cat sat on a mat"], ["a dog barked", "the dog barks"]],
    None: [["the cat is on the mat", "a cat sat on a mat"], ["a dog barked at night"]],
}
OFFLINE_TOKENIZERS = ("none", "zh", "13a", "intl", "char")
SMOOTHING = [("none", None), ("floor", None), ("floor", 0.2), ("add-k", None), ("add-k", 2.0)]
SMOOTHING += [("exp", None)]


def _streams(refs: list[list[str]]) -> list[list[str | None]]:
    """Per-hypothesis reference lists as sacrebleu's reference streams (None: no reference)."""
    width = max(len(r) for r in refs)
    return [[r[k] if k < len(r) else None for r in refs] for k in range(width)]


def _corpus_signature(metric: Any, nrefs: int | None) -> str:
    metric.corpus_score(HYPS, _streams(REFS[nrefs]))
    return str(metric.get_signature().format())


def _sentence_signature(metric: Any, nrefs: int | None) -> str:
    """What sentence_bleu's BLEU signs: its count is the sentence's references."""
    if nrefs is None:  # a sentence has a count; a varying count exists over a corpus only
        return _corpus_signature(metric, nrefs)
    metric.sentence_score(HYPS[0], REFS[nrefs][0])
    return str(metric.get_signature().format())


BLEU_SETTINGS = [
    {
        "tokenize": tok,
        "lowercase": lc,
        "smooth_method": method,
        "smooth_value": value,
        "effective_order": eff,
    }
    for tok, lc, (method, value), eff in itertools.product(
        OFFLINE_TOKENIZERS, (False, True), SMOOTHING, (True, False)
    )
]


@pytest.mark.parametrize("nrefs", [1, 2, None])
def test_bleu_signatures_are_sacrebleus(nrefs: int | None) -> None:
    for settings in BLEU_SETTINGS:
        ours = BLEU(**settings)
        plain = {k: v for k, v in settings.items() if k != "effective_order"}
        corpus = _corpus_signature(SacreBLEU(**plain, effective_order=False), nrefs)
        segment = _sentence_signature(SacreBLEU(**settings), nrefs)
        assert ours.signature(nrefs, segment=False) == f"bleu|{corpus}", settings
        assert ours.signature(nrefs, segment=True) == f"bleu|{segment}", settings
        # the corpus score is always computed without effective order, as corpus_bleu does
        assert "|eff:no|" in corpus
        # the pinning signature (the cache's) tells the two effective orders apart
        eff = "yes" if settings["effective_order"] else "no"
        assert ours.signature().endswith(f"|segment_eff:{eff}")


@pytest.mark.parametrize("nrefs", [1, 2, None])
def test_chrf_signatures_are_sacrebleus(nrefs: int | None) -> None:
    grid = itertools.product((6, 4), (0, 2), (2, 3), (False, True), (False, True), (False, True))
    for nc, nw, beta, lc, space, eps in grid:
        settings = {
            "char_order": nc,
            "word_order": nw,
            "beta": beta,
            "lowercase": lc,
            "whitespace": space,
            "eps_smoothing": eps,
        }
        ours = CHRF(**settings)
        theirs = _corpus_signature(SacreCHRF(**settings), nrefs)
        # sacrebleu signs eff:yes when eps_smoothing is off (effective order, its default)
        assert (f"|eff:{'no' if eps else 'yes'}|") in theirs
        # sacrebleu names beta in the score's name (chrF2), not in the signature
        expected = f"chrf|{theirs}" + ("" if beta == 2 else f"|beta:{beta}")
        assert ours.signature(nrefs, segment=False) == expected, settings
        assert ours.signature(nrefs, segment=True) == expected, settings


@pytest.mark.parametrize("nrefs", [1, 2, None])
def test_ter_signatures_are_sacrebleus(nrefs: int | None) -> None:
    for norm, no_punct, asian, case in itertools.product((False, True), repeat=4):
        settings = {
            "normalized": norm,
            "no_punct": no_punct,
            "asian_support": asian,
            "case_sensitive": case,
        }
        theirs = _corpus_signature(SacreTER(**settings), nrefs)
        assert TER(**settings).signature(nrefs, segment=False) == f"ter|{theirs}", settings


@pytest.mark.parametrize("settings", BLEU_SETTINGS[::7])
def test_the_metrics_built_on_bleu_carry_sacrebleus_signatures(settings: dict[str, Any]) -> None:
    plain = {k: v for k, v in settings.items() if k != "effective_order"}
    corpus = {n: _corpus_signature(SacreBLEU(**plain, effective_order=False), n) for n in (1, 2)}
    sentence = {n: _sentence_signature(SacreBLEU(**settings), n) for n in (1, 2)}
    # self-BLEU: one reference, the source, whatever the data's reference count
    self_bleu = SelfBLEU(**settings)
    assert self_bleu.signature(2, segment=False) == f"self_bleu|{corpus[1]}"
    assert self_bleu.signature(2, segment=True) == f"self_bleu|{sentence[1]}"
    # iBLEU: BLEU against the references and against the source
    ibleu = IBLEU(alpha=0.7, **settings)
    want = f"ibleu|alpha:0.7|ref:[{corpus[2]}]|src:[{corpus[1]}]"
    assert ibleu.signature(2, segment=False) == want
    assert ibleu.signature(2, segment=True) == (
        f"ibleu|alpha:0.7|ref:[{sentence[2]}]|src:[{sentence[1]}]"
    )
    # BERT-iBLEU's BLEU part: sentence BLEU against the source
    assert f"|bleu:[{sentence[1]}]|" in BERTiBLEU(**settings).signature()
    # inter-BLEU: sentence BLEU against the system's other outputs, a varying count
    inter = _sentence_signature(SacreBLEU(**settings), None)
    assert f"|sentence:[{inter}]|" in InterBLEU(**settings).signature()


def test_the_run_signs_its_columns_with_the_datas_reference_count() -> None:
    """The score stage fills in the count of the data: one reference per item gives nrefs:1,
    as sacrebleu run on the same files would sign it; a column scored against the source has
    one reference."""
    import pandas as pd

    from paraeval.pipeline.stages.score import build_metrics, score

    rows = [
        {"system": s, "item_id": i, "candidate": c, "references": [r], "source": r}
        for s in ("a", "b")
        for i, (c, r) in enumerate(zip(HYPS, [x[0] for x in REFS[1]], strict=True))
    ]
    metrics = build_metrics(
        {
            "bleu": {"_target_": "paraeval.metrics.sacre.BLEU", "against_source": True},
            "chrf": {"_target_": "paraeval.metrics.sacre.CHRF"},
        }
    )
    cols = score(pd.DataFrame(rows), metrics, progress=False).columns
    corpus = _corpus_signature(SacreBLEU(effective_order=False), 1)
    assert cols["bleu"].signature == f"bleu|{corpus}"
    assert (
        cols["bleu"].segment_signature
        == f"bleu|{_sentence_signature(SacreBLEU(effective_order=True), 1)}"
    )
    assert cols["bleu_src"].signature == f"bleu|{corpus}|vs:source"
    assert cols["chrf"].signature == f"chrf|{_corpus_signature(SacreCHRF(), 1)}"
    assert cols["chrf"].segment_signature == ""  # the same as the corpus score's
