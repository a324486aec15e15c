"""WMD equals gensim's KeyedVectors.wmdistance (exact EMD via POT) on a tiny vector file."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import ot
import pytest

from paraeval.metrics.base import MissingResourceError
from paraeval.metrics.encoder import Encoder
from paraeval.metrics.wmd import WMD, load_word_vectors

WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "lay",
    "on",
    "mat",
    "rug",
    "big",
    "small",
    "red",
    "blue",
    "house",
    "Zürich",
]
CANDS = [
    "the cat sat on the mat",
    "a big red dog lay on the rug",
    "the house in Zürich",
    "cat cat",
    "the dog",
    "words nobody knows",
]
REFS = [
    ["the dog sat on the rug"],
    ["the small blue cat sat", "a red dog lay on a mat"],
    ["a blue house"],
    ["cat"],
    ["dog the", "cat"],
    ["the cat"],
]


def _write_text(path: Path, vectors: np.ndarray) -> None:
    with path.open("w", encoding="utf-8") as fh:
        fh.write(f"{len(WORDS)} {vectors.shape[1]}\n")
        for w, v in zip(WORDS, vectors, strict=True):
            fh.write(w + " " + " ".join(repr(float(x)) for x in v) + "\n")


def _write_binary(path: Path, vectors: np.ndarray) -> None:
    with path.open("wb") as fh:
        fh.write(f"{len(WORDS)} {vectors.shape[1]}\n".encode())
        for w, v in zip(WORDS, vectors, strict=True):
            fh.write(w.encode() + b" " + struct.pack(f"<{len(v)}f", *v) + b"\n")


@pytest.fixture()
def vectors(tmp_path: Path) -> tuple[Path, np.ndarray]:
    vecs = np.random.default_rng(0).normal(size=(len(WORDS), 6)).astype(np.float32)
    path = tmp_path / "tiny.txt"
    _write_text(path, vecs)
    return path, vecs


def test_hand_computed_example(tmp_path: Path) -> None:
    # 1-d vectors x=0, y=1, z=3: all of x's mass moves half to y (cost 1) and half to z (cost 3)
    path = tmp_path / "line.txt"
    path.write_text("3 1\nx 0\ny 1\nz 3\n", encoding="utf-8")
    metric = WMD(vectors=str(path), normalize=False)
    res = metric.score(["x", "x x", "y z"], [["y z"], ["z"], ["z y"]])
    np.testing.assert_allclose(res.segment["wmd"], [2.0, 3.0, 0.0], atol=1e-12)
    assert not metric.higher_is_better


@pytest.mark.parametrize("normalize", [True, False])
def test_equals_gensim_wmdistance(vectors: tuple[Path, np.ndarray], normalize: bool) -> None:
    gensim_models = pytest.importorskip("gensim.models")
    path, _ = vectors
    kv = gensim_models.KeyedVectors.load_word2vec_format(str(path))
    res = WMD(vectors=str(path), normalize=normalize).score(CANDS, REFS)
    expected = []
    for cand, refs in zip(CANDS, REFS, strict=True):
        d = min(kv.wmdistance(cand.split(), r.split(), norm=normalize) for r in refs)
        expected.append(np.nan if np.isinf(d) else d)  # no known word: NaN here, inf in gensim
    np.testing.assert_allclose(res.segment["wmd"], expected, atol=1e-9)
    assert np.isnan(res.segment["wmd"][-1])
    assert res.corpus["wmd"] == pytest.approx(float(np.nanmean(expected)))


def test_second_system_sharing_candidates_equals_gensim(vectors: tuple[Path, np.ndarray]) -> None:
    # one metric scores two systems in turn, the second sharing some (candidate, reference)
    # pairs with the first, repeating one, and bringing new ones: both equal gensim
    gensim_models = pytest.importorskip("gensim.models")
    path, _ = vectors
    kv = gensim_models.KeyedVectors.load_word2vec_format(str(path))
    metric = WMD(vectors=str(path))
    order = [[0, 1, 2, 3], [4, 1, 1, 0, 5, 2]]
    for rows in order:
        cands = [CANDS[i] for i in rows]
        refs = [REFS[i] for i in rows]
        got = metric.score(cands, refs).segment["wmd"]
        want = [
            min(kv.wmdistance(c.split(), r.split()) for r in rs)
            for c, rs in zip(cands, refs, strict=True)
        ]
        np.testing.assert_allclose(got, [np.nan if np.isinf(d) else d for d in want], atol=1e-9)


def test_binary_and_keyedvectors_files_load_the_same(
    vectors: tuple[Path, np.ndarray], tmp_path: Path
) -> None:
    path, vecs = vectors
    binary = tmp_path / "tiny.bin"
    _write_binary(binary, vecs)
    vocab_t, m_t = load_word_vectors(path)
    vocab_b, m_b = load_word_vectors(binary)
    assert vocab_t == vocab_b == {w: i for i, w in enumerate(WORDS)}
    np.testing.assert_allclose(m_t, vecs, atol=1e-6)
    np.testing.assert_array_equal(m_b, vecs)
    gensim_models = pytest.importorskip("gensim.models")
    kv = gensim_models.KeyedVectors.load_word2vec_format(str(path))
    kv_path = tmp_path / "tiny.kv"
    kv.save(str(kv_path))
    a = WMD(vectors=str(kv_path)).score(CANDS, REFS).segment["wmd"]
    b = WMD(vectors=str(binary)).score(CANDS, REFS).segment["wmd"]
    np.testing.assert_allclose(a, b, atol=1e-6, equal_nan=True)


def test_multi_reference_mean_and_missing_file(vectors: tuple[Path, np.ndarray]) -> None:
    path, _ = vectors
    best = WMD(vectors=str(path)).score(CANDS[:2], REFS[:2]).segment["wmd"]
    mean = WMD(vectors=str(path), multi_ref="mean").score(CANDS[:2], REFS[:2]).segment["wmd"]
    assert mean[1] > best[1] and mean[0] == pytest.approx(best[0])
    with pytest.raises(MissingResourceError, match=r"nope\.txt"):
        WMD(vectors=str(path.parent / "nope.txt"))


def test_static_wordpiece_variant_by_hand() -> None:
    metric = WMD()
    enc = Encoder()
    matrix = enc.input_embeddings().astype(np.float64)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    tok = enc.tokenizer
    got = metric.score(CANDS[:3], [r[:1] for r in REFS[:3]]).segment["wmd"]
    for i in range(3):
        a = tok.tokenize(CANDS[i])
        b = tok.tokenize(REFS[i][0])
        ua, ub = sorted(set(a)), sorted(set(b))
        wa = np.array([a.count(t) / len(a) for t in ua])
        wb = np.array([b.count(t) / len(b) for t in ub])
        va = matrix[tok.convert_tokens_to_ids(ua)]
        vb = matrix[tok.convert_tokens_to_ids(ub)]
        cost = np.linalg.norm(va[:, None] - vb[None], axis=-1)
        assert got[i] == pytest.approx(ot.emd2(wa, wb, cost), abs=1e-6)
    assert "static-wordpiece:all-MiniLM-L6-v2@" in metric.signature()


def test_contextual_variant_shares_the_encoder_pass() -> None:
    metric = WMD(embedding="contextual")
    texts = CANDS + [r for refs in REFS for r in refs]
    metric.prepare(texts)
    assert metric.encoder is not None
    res = metric.score(CANDS, REFS)
    n = metric.encoder.forward_sentences
    assert n == len(set(texts))
    metric.score(CANDS, REFS)
    assert metric.encoder.forward_sentences == n
    assert np.all(res.segment["wmd"] >= 0)
    # identical texts are at distance 0
    same = metric.score(["the cat sat"], [["the cat sat"]]).segment["wmd"][0]
    assert same == pytest.approx(0.0, abs=1e-6)
    assert "contextual:" in metric.signature() and ":L6" in metric.signature()
