"""BLEURT loads a local regression checkpoint and scores (reference, candidate) pairs with it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

from paraeval.metrics.base import MetricConfigError, MissingResourceError
from paraeval.metrics.bleurt import BLEURT

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "on",
    "mat",
    "rug",
    "big",
    "small",
    "red",
    "blue",
    "house",
    "is",
    "was",
    "very",
    "quite",
    "and",
    ".",
    ",",
    "!",
    "?",
]
CANDS = ["the cat sat on the mat .", "a big red dog", "the house is blue !", "small", "the cat"]
REFS = [
    ["the cat sat on a mat ."],
    ["a dog", "the big red dog sat"],
    ["a blue house"],
    ["big"],
    ["the cat"],
]


def _build(tmp_path: Path, num_labels: int = 1) -> Path:
    torch.manual_seed(0)
    ckpt = tmp_path / f"tiny-bleurt-{num_labels}"
    ckpt.mkdir()
    (ckpt / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    BertTokenizer(str(ckpt / "vocab.txt")).save_pretrained(str(ckpt))
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=num_labels,
    )
    BertForSequenceClassification(config).eval().save_pretrained(str(ckpt))
    return ckpt


@pytest.fixture()
def checkpoint(tmp_path: Path) -> Path:
    return _build(tmp_path)


def _direct(ckpt: Path, refs: list[str], cands: list[str]) -> np.ndarray:
    tok = BertTokenizer.from_pretrained(str(ckpt))
    model = BertForSequenceClassification.from_pretrained(str(ckpt)).eval()
    out = []
    with torch.no_grad():
        for r, c in zip(refs, cands, strict=True):  # one pair at a time: no padding at all
            enc = tok(r, c, return_tensors="pt")
            out.append(model(**enc).logits[0, 0].item())
    return np.array(out)


def test_equals_a_direct_forward_pass(checkpoint: Path) -> None:
    metric = BLEURT(checkpoint=str(checkpoint))
    res = metric.score(CANDS, REFS)
    per_ref = [
        _direct(checkpoint, refs, [c] * len(refs)) for c, refs in zip(CANDS, REFS, strict=True)
    ]
    np.testing.assert_allclose(res.segment["bleurt"], [p.max() for p in per_ref], atol=1e-5)
    mean = BLEURT(checkpoint=str(checkpoint), multi_ref="mean").score(CANDS, REFS)
    np.testing.assert_allclose(mean.segment["bleurt"], [p.mean() for p in per_ref], atol=1e-5)
    assert res.corpus["bleurt"] == pytest.approx(float(np.mean(res.segment["bleurt"])))
    assert res.signature.startswith("bleurt|impl:paraeval~transformers|checkpoint:tiny-bleurt-1@")


def test_batch_size_and_repetition_do_not_change_scores(checkpoint: Path) -> None:
    one = BLEURT(checkpoint=str(checkpoint), batch_size=1).score(CANDS, REFS).segment["bleurt"]
    many = BLEURT(checkpoint=str(checkpoint), batch_size=7).score(CANDS, REFS).segment["bleurt"]
    again = BLEURT(checkpoint=str(checkpoint), batch_size=7).score(CANDS, REFS).segment["bleurt"]
    np.testing.assert_allclose(one, many, atol=1e-5)
    np.testing.assert_array_equal(many, again)
    assert len(set(np.round(many, 6))) > 2  # a random head still separates the pairs


def test_without_checkpoint_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(MissingResourceError) as err:
        BLEURT()
    assert "checkpoint" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(MissingResourceError, match="does not exist"):
        BLEURT(checkpoint=str(tmp_path / "absent"))


def test_a_classifier_is_not_a_bleurt_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(MetricConfigError, match="num_labels=2"):
        BLEURT(checkpoint=str(_build(tmp_path, num_labels=2)))


def test_bleurt_pytorch_layout_needs_its_package(checkpoint: Path) -> None:
    import json

    config = json.loads((checkpoint / "config.json").read_text())
    config["model_type"] = "bleurt"
    (checkpoint / "config.json").write_text(json.dumps(config))
    metric = BLEURT(checkpoint=str(checkpoint))
    assert "bleurt-pytorch" in metric.signature()
    try:
        import bleurt_pytorch  # noqa: F401
    except ImportError:
        with pytest.raises(MissingResourceError, match="bleurt-pytorch"):
            metric.score(CANDS[:1], REFS[:1])
