"""BERTScore equals bert_score.score on the same model, layer and idf setting."""

from __future__ import annotations

from pathlib import Path

import bert_score
import numpy as np
import pytest
import torch

from paraeval.metrics.base import MetricConfigError, MissingResourceError
from paraeval.metrics.baseline import (
    compute_baseline,
    random_pairs,
    read_baseline,
    read_corpus,
    shipped_baseline,
    write_baseline,
)
from paraeval.metrics.bertscore import COLUMNS, BERTScore
from paraeval.metrics.encoder_model import resolve_model_path
from tests.metrics._semantic_texts import pairs

MODEL_PATH, _ = resolve_model_path("default")
CANDS, REFS = pairs(220, seed=7)


def _model_copy(tmp_path: Path, name: str) -> Path:
    """The packaged model under another directory name (file links, no 90 MB copy)."""
    local = tmp_path / name
    for f in Path(MODEL_PATH).rglob("*"):
        if f.is_file():
            target = local / f.relative_to(MODEL_PATH)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(f)
    return local


def _reference(cands, refs, layer=6, idf=False, **kw):
    p, r, f = bert_score.score(cands, refs, model_type=MODEL_PATH, num_layers=layer, idf=idf, **kw)
    return np.stack([p.numpy(), r.numpy(), f.numpy()], axis=1).astype(np.float64)


def _ours(metric: BERTScore, cands, refs) -> np.ndarray:
    res = metric.score(cands, refs)
    return np.stack([res.segment[c] for c in COLUMNS], axis=1)


@pytest.mark.slow
@pytest.mark.parametrize("idf", [False, True])
def test_equals_bert_score_with_multi_reference(idf: bool) -> None:
    assert len(CANDS) >= 200 and any(len(r) > 1 for r in REFS)
    expected = _reference(CANDS, REFS, idf=idf)
    metric = BERTScore(idf=idf)
    got = _ours(metric, CANDS, REFS)
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
    # the unrelated pairs make some token maxima negative: the padding rule is exercised
    assert got[:, 0].min() < 0.3
    res = metric.score(CANDS, REFS)
    assert res.corpus["bertscore_f1"] == pytest.approx(float(expected[:, 2].mean()), abs=1e-6)
    assert metric.corpus_from_stats(res.stats[:10])["bertscore_precision"] == pytest.approx(
        float(expected[:10, 0].mean()), abs=1e-6
    )


def test_multi_reference_rule_is_columnwise_max() -> None:
    cands = ["A young girl repaired the morning train."] * 1
    refs = [["The morning train was repaired by a girl.", "Stock prices fell sharply on Monday."]]
    single = [_reference(cands, [[r]])[0] for r in refs[0]]
    got = _ours(BERTScore(), cands, refs)[0]
    np.testing.assert_allclose(got, np.maximum(single[0], single[1]), atol=1e-6)


def test_other_layer_equals_bert_score_cut_model() -> None:
    cands, refs = CANDS[:40], REFS[:40]
    np.testing.assert_allclose(
        _ours(BERTScore(layer=3), cands, refs), _reference(cands, refs, layer=3), atol=1e-6
    )


def test_rescale_with_shipped_baseline_equals_bert_score_with_that_file() -> None:
    shipped = shipped_baseline("all-MiniLM-L6-v2")
    assert shipped is not None
    cands, refs = CANDS[:60], REFS[:60]
    expected = _reference(
        cands, refs, rescale_with_baseline=True, baseline_path=str(shipped), lang="en"
    )
    metric = BERTScore(rescale_with_baseline=True)
    np.testing.assert_allclose(_ours(metric, cands, refs), expected, atol=1e-6)
    assert "rescale:yes[paraeval]" in metric.signature()


def test_user_baseline_file(tmp_path: Path) -> None:
    values = np.array([[0.1 * k, 0.2, 0.3] for k in range(7)])
    path = tmp_path / "base.csv"
    write_baseline(values, path)
    # bert-score's own reader (row by position, drop the LAYER column) sees the same numbers
    import pandas as pd

    np.testing.assert_allclose(pd.read_csv(path).iloc[4].to_numpy()[1:], values[4])
    np.testing.assert_allclose(read_baseline(path, 4), values[4])
    raw = _ours(BERTScore(), CANDS[:5], REFS[:5])
    got = _ours(BERTScore(rescale_with_baseline=True, baseline_path=str(path)), CANDS[:5], REFS[:5])
    np.testing.assert_allclose(got, (raw - values[6]) / (1 - values[6]), atol=1e-12)


def test_rescale_without_baseline_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(MissingResourceError, match=r"nope\.csv"):
        BERTScore(rescale_with_baseline=True, baseline_path=str(tmp_path / "nope.csv"))
    # a local model that bert-score has no baseline for and the project ships none for
    local = _model_copy(tmp_path, "my-encoder")
    with pytest.raises(MissingResourceError, match="no baseline for model"):
        BERTScore(model=str(local), layer=6, rescale_with_baseline=True)


def test_unknown_model_needs_a_layer(tmp_path: Path) -> None:
    local = _model_copy(tmp_path, "enc")
    with pytest.raises(MetricConfigError, match=r"set `layer`"):
        BERTScore(model=str(local))
    with pytest.raises(MetricConfigError, match=r"0\.\.6"):
        BERTScore(layer=9)


def test_signature_pins_settings() -> None:
    sig = BERTScore(idf=True).signature()
    for part in (
        "bertscore|",
        f"bert_score-{bert_score.__version__}",
        "all-MiniLM-L6-v2@",
        "layer:6",
        "idf:yes",
        "rescale:no",
    ):
        assert part in sig


def test_signature_names_bert_scores_own_version_string() -> None:
    # read from bert-score's __init__.py without importing it; the imported module's string
    from paraeval.metrics.bertscore import BERT_SCORE_VERSION

    assert bert_score.__version__ == BERT_SCORE_VERSION
    assert f"impl:paraeval~bert_score-{bert_score.__version__}|" in BERTScore().signature()


def test_empty_candidate_scores_zero() -> None:
    # bert-score 0.3.13 cannot encode "" under transformers 5; its rule (P = R = F = 0 for a
    # sentence of only [CLS] [SEP]) is applied by hand here
    got = _ours(BERTScore(), ["", "   ", "A dog."], [["A cat sat."], ["A dog."], ["  "]])
    np.testing.assert_array_equal(got, np.zeros((3, 3)))


def test_baseline_command_is_bert_scores_method(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    lines = [c for c in CANDS[:40]] + ["x " * 40]  # one over-long line is dropped
    corpus.write_text("\n".join(lines), encoding="utf-8")
    sentences = read_corpus(str(corpus))
    assert "x " * 40 not in sentences and len(sentences) == len(set(lines)) - 1
    hyp, ref = random_pairs(sentences, rounds=2, seed=3)
    assert len(hyp) == 2 * (len(sentences) // 2)
    assert all(h != r for h, r in zip(hyp, ref, strict=True))
    values = compute_baseline("default", sentences, rounds=2, seed=3)  # one chunk: one call
    p, r, f = bert_score.score(hyp, ref, model_type=MODEL_PATH, num_layers=6, all_layers=True)
    expected = torch.stack([p, r, f]).double().mean(dim=-1).numpy().T
    np.testing.assert_allclose(values, expected, atol=1e-6)
    assert values.shape == (7, 3)


def test_shipped_baseline_is_well_formed() -> None:
    path = shipped_baseline("all-MiniLM-L6-v2")
    assert path is not None
    rows = np.stack([read_baseline(path, k) for k in range(7)])
    assert np.all((rows > -1) & (rows < 1))
    # random unrelated pairs are far from identical: the last layer's baseline F is well below 1
    assert rows[6, 2] < 0.5
