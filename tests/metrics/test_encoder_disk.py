"""The encoder's disk cache of packed chunks: round trips, replacement, rebuilding an older file,
the byte bound and a broken file, on small random arrays (no model)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from paraeval.metrics.encoder_disk import EmbeddingCache, Stored

DIM = 4


def packed(texts: list[str], seed: int, sentence: bool = True) -> Stored:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 6, len(texts)).astype(np.int64)
    ids = rng.integers(0, 30_000, int(lengths.sum())).astype(np.int32)
    sent = rng.standard_normal((len(texts), DIM)).astype(np.float32) if sentence else None
    return Stored(list(texts), ids, lengths, sent)


def rows(stored: Stored) -> dict[str, tuple[list[int], list[float] | None]]:
    """Each text's ids and sentence embedding, unpacked."""
    ends = np.cumsum(stored.lengths)
    out = {}
    for i, text in enumerate(stored.texts):
        ids = stored.ids[ends[i] - stored.lengths[i] : ends[i]].tolist()
        out[text] = (ids, None if stored.sent is None else stored.sent[i].tolist())
    return out


def test_round_trip_in_requested_order_with_partial_hits(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, "m")
    first, second = packed(["a", "b", "c"], 1), packed(["d", "e"], 2)
    cache.put(first)
    cache.put(second)
    want = rows(first) | rows(second)
    got = cache.get(["e", "missing", "a", "c", "d"], sentence=True)
    assert got.texts == ["e", "a", "c", "d"]
    assert got.ids.dtype == np.int32 and got.lengths.dtype == np.int64
    assert got.sent is not None and got.sent.dtype == np.float32 and got.sent.shape == (4, DIM)
    assert rows(got) == {t: want[t] for t in got.texts}
    ids_only = cache.get(["c", "b"], sentence=False)
    assert ids_only.texts == ["c", "b"]
    assert {t: v[0] for t, v in rows(ids_only).items()} == {t: want[t][0] for t in ("c", "b")}


def test_texts_without_sentence_embedding_miss_when_one_is_asked(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, "m")
    cache.put(packed(["a", "b"], 1, sentence=False))
    cache.put(packed(["c"], 2))
    assert cache.get(["a", "b", "c"], sentence=True).texts == ["c"]
    assert cache.get(["a", "b", "c"], sentence=False).texts == ["a", "b", "c"]


def test_a_text_stored_again_reads_the_newer_values(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, "m")
    cache.put(packed(["a", "b"], 1, sentence=False))
    newer = packed(["b", "z"], 7)
    cache.put(newer)
    got = cache.get(["a", "b"], sentence=True)
    assert got.texts == ["b"] and rows(got)["b"] == rows(newer)["b"]


def test_another_cache_object_on_the_file_reads_it(tmp_path: Path) -> None:
    stored = packed([f"t{i}" for i in range(1200)], 3)  # more keys than one statement takes
    writer = EmbeddingCache(tmp_path, "m")
    writer.put(stored)
    writer.close()
    reader = EmbeddingCache(tmp_path, "m")
    got = reader.get(stored.texts[::-1], sentence=True)
    assert got.texts == stored.texts[::-1] and rows(got) == rows(stored)
    assert EmbeddingCache(tmp_path, "other").get(stored.texts, sentence=False).texts == []


def test_an_old_format_file_is_rebuilt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "embeddings" / "m.sqlite"
    path.parent.mkdir()
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE emb (k TEXT PRIMARY KEY, dtype TEXT NOT NULL, shape TEXT NOT NULL,"
            " data BLOB NOT NULL)"
        )
        conn.execute("INSERT INTO emb VALUES ('k', '<f4', '2', ?)", (b"\0" * 8,))
    conn.close()
    cache = EmbeddingCache(tmp_path, "m")
    stored = packed(["a"], 1)
    cache.put(stored)
    assert rows(cache.get(["a"], sentence=True)) == rows(stored)
    err = capsys.readouterr().err
    assert "rebuilt" in err and "disabled" not in err
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()
    assert tables == {"chunk", "text", "meta"}
    EmbeddingCache(tmp_path, "m").get(["a"], sentence=False)  # the new layout is kept
    assert "rebuilt" not in capsys.readouterr().err


def test_the_byte_bound_evicts_the_oldest_chunks(tmp_path: Path) -> None:
    one = packed(["a", "b"], 1)
    size = one.ids.nbytes + one.lengths.nbytes + (one.sent.nbytes if one.sent is not None else 0)
    cache = EmbeddingCache(tmp_path, "m", max_bytes=2 * size + size // 2)
    cache.put(one)
    cache.put(packed(["c", "d"], 1))  # same sizes
    assert cache.get(["a", "b", "c", "d"], sentence=True).texts == ["a", "b", "c", "d"]
    cache.put(packed(["e", "f"], 1))
    assert cache.get(["a", "b", "c", "d", "e", "f"], sentence=True).texts == ["c", "d", "e", "f"]
    conn = sqlite3.connect(cache.path)
    assert conn.execute("SELECT COUNT(*), SUM(nbytes) FROM chunk").fetchone() == (2, 2 * size)
    assert conn.execute("SELECT COUNT(*) FROM text").fetchone() == (4,)
    conn.close()


def test_a_corrupt_file_is_bypassed_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "embeddings" / "m.sqlite"
    path.parent.mkdir()
    path.write_bytes(np.random.default_rng(0).bytes(8192))
    cache = EmbeddingCache(tmp_path, "m")
    assert cache.get(["a"], sentence=True).texts == []
    cache.put(packed(["a"], 1))
    assert cache.get(["a"], sentence=False).texts == []
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"paraeval: embedding cache {path} disabled (file is not a database)"]


def test_empty_inputs(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, "m")
    cache.put(Stored([], np.zeros(0, np.int32), np.zeros(0, np.int64), None))
    got = cache.get([], sentence=True)
    assert got.texts == [] and got.ids.shape == (0,) and got.sent is not None
    assert got.sent.shape[0] == 0
    assert cache.get(["a"], sentence=False).sent is None
    cache.put(packed(["", "a"], 4))  # the empty text, and texts of no tokens, are stored too
    zero = Stored(["z"], np.zeros(0, np.int32), np.zeros(1, np.int64), None)
    cache.put(zero)
    got = cache.get(["z", "", "a"], sentence=False)
    assert got.texts == ["z", "", "a"] and got.lengths[0] == 0
