"""cosine equals sentence-transformers' embeddings + cosine on the packaged model."""

from __future__ import annotations

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from paraeval.metrics.cosine import Cosine
from paraeval.metrics.encoder_model import resolve_model_path
from tests.metrics._semantic_texts import pairs

MODEL_PATH, _ = resolve_model_path("default")
CANDS, REFS = pairs(120, seed=11)
# a sentence past sentence-transformers' 256-token limit gets its own truncated pass
CANDS[3] = " ".join(["paraphrase evaluation"] * 140)
CANDS[4] = "  surrounded by spaces  "


@pytest.fixture(scope="module")
def st_model() -> SentenceTransformer:
    return SentenceTransformer(MODEL_PATH, device="cpu")


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.mark.slow
def test_equals_sentence_transformers(st_model: SentenceTransformer) -> None:
    first_refs = [r[0] for r in REFS]
    expected = _cos(st_model.encode(CANDS), st_model.encode(first_refs))
    got = Cosine().score(CANDS, [[r] for r in first_refs])
    np.testing.assert_allclose(got.segment["cosine"], expected, atol=1e-6)
    assert got.corpus["cosine"] == pytest.approx(float(expected.mean()), abs=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["max", "mean"])
def test_multi_reference_rules(st_model: SentenceTransformer, rule: str) -> None:
    cands, refs = CANDS[:40], REFS[:40]
    c = st_model.encode(cands)
    flat = st_model.encode([r for group in refs for r in group])
    owner = np.repeat(np.arange(len(cands)), [len(g) for g in refs])
    sims = _cos(c[owner], flat)
    reduce = np.max if rule == "max" else np.mean
    expected = [reduce(sims[owner == i]) for i in range(len(cands))]
    got = Cosine(multi_ref=rule).score(cands, refs)
    np.testing.assert_allclose(got.segment["cosine"], expected, atol=1e-6)
    assert f"refs:{rule}" in got.signature


def test_signature_names_model_digest_and_pooling() -> None:
    sig = Cosine().signature()
    assert "model:all-MiniLM-L6-v2@" in sig and "pool:mean" in sig
