"""The encoder's disk cache: one SQLite file per model signature under ``<cache_dir>/embeddings/``.
It keeps token ids and sentence embeddings only (token embeddings take 20 times the room and cost
more to store and read than to encode again), one row per chunk of texts because the encoder's
outputs are packed, plus one row per text pointing into its chunk. Values are raw little-endian
array bytes (nothing is unpickled), writes single transactions, processes may share the file
(WAL), and deleting it only means the next run encodes again.
"""

from __future__ import annotations

import hashlib
import sqlite3
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from paraeval.metrics.encoder_store import gather_index, starts_of

DISK_BYTES = 4 << 30
_VERSION = "packed-1"  # another value, or none, means an older layout: the file is rebuilt
_SCHEMA = (
    "CREATE TABLE chunk (id INTEGER PRIMARY KEY, nbytes INTEGER, lengths BLOB, ids BLOB,"
    " dim INTEGER, sent BLOB NULL)",
    "CREATE TABLE text (k TEXT PRIMARY KEY, chunk INTEGER, row INTEGER)",
    "CREATE INDEX text_chunk ON text (chunk)",  # eviction deletes by chunk
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)",
)
_MAX_PARAMS = 500  # below SQLite's bound on host parameters per statement


@dataclass
class Stored:
    """Rows of texts as the disk cache keeps them, packed."""

    texts: list[str]
    ids: np.ndarray  # int32, the token ids of all texts concatenated in text order
    lengths: np.ndarray  # int64 (n,), tokens per text
    sent: np.ndarray | None  # float32 (n, dim) sentence embeddings, or None when not stored


def content_key(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=20).hexdigest()


def _empty(sentence: bool) -> Stored:
    sent = np.zeros((0, 0), np.float32) if sentence else None
    return Stored([], np.zeros(0, np.int32), np.zeros(0, np.int64), sent)


def _gather(hits: list[tuple[str, int, int]], chunks: dict[int, Any], sentence: bool) -> Stored:
    """The rows of the found (text, chunk, row), each chunk's arrays laid end to end as one pool."""
    if not hits:
        return _empty(sentence)
    order = sorted(chunks)
    which = np.searchsorted(order, [c for _, c, _ in hits])  # the hit's chunk, in `order`
    local = np.array([r for _, _, r in hits], np.int64)
    lengths = [np.frombuffer(chunks[c][0], "<i8") for c in order]
    pooled = np.concatenate(lengths)
    rows = starts_of(np.array([len(a) for a in lengths]))[which] + local
    out = pooled[rows]
    at = gather_index(starts_of(pooled)[rows], out)
    ids = np.concatenate([np.frombuffer(chunks[c][1], "<i4") for c in order])[at]
    sent = None
    if sentence:  # chunk by chunk: a few rows of many chunks are not first copied whole
        sent = np.empty((len(hits), chunks[order[0]][2]), np.float32)
        for i, c in enumerate(order):
            mine = np.flatnonzero(which == i)
            sent[mine] = np.frombuffer(chunks[c][3], "<f4").reshape(-1, chunks[c][2])[local[mine]]
    texts = [t for t, _, _ in hits]
    return Stored(texts, ids.astype(np.int32, copy=False), out.astype(np.int64, copy=False), sent)


class EmbeddingCache:
    """Packed rows by text for one model signature, at most ``max_bytes`` of chunks (oldest out
    first); a broken or unwritable cache is reported once on stderr and then bypassed."""

    def __init__(self, directory: str | Path, namespace: str, max_bytes: int = DISK_BYTES) -> None:
        self.path = Path(directory).expanduser() / "embeddings" / f"{namespace}.sqlite"
        self.max_bytes = int(max_bytes)
        self._conn: sqlite3.Connection | None = None
        self._broken = False

    def _connect(self) -> sqlite3.Connection | None:
        if self._conn is None and not self._broken:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._conn = sqlite3.connect(str(self.path), timeout=120, isolation_level=None)
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._migrate(self._conn)
            except (sqlite3.Error, OSError) as exc:
                self._disable(exc)
        return self._conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        """Create the schema, dropping an older layout's tables (checked inside the write
        transaction, so that two processes opening a new file do not drop each other's)."""
        conn.execute("BEGIN IMMEDIATE")  # a failure closes the connection: rolled back
        sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'"
        tables = [r[0] for r in conn.execute(sql)]
        if "meta" not in tables or conn.execute(
            "SELECT value FROM meta WHERE key = 'schema'"
        ).fetchone() != (_VERSION,):
            if tables:
                print(f"paraeval: embedding cache {self.path} rebuilt", file=sys.stderr)
            for name in tables:
                conn.execute(f'DROP TABLE IF EXISTS "{name}"')
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute("INSERT INTO meta VALUES ('schema', ?)", (_VERSION,))
        conn.execute("COMMIT")

    def _disable(self, exc: Exception) -> None:
        print(f"paraeval: embedding cache {self.path} disabled ({exc})", file=sys.stderr)
        self._broken = True
        self.close()

    def get(self, texts: Sequence[str], sentence: bool) -> Stored:
        """The stored subset of the unique ``texts``, in their order; with ``sentence`` only
        those stored with a sentence embedding."""
        conn = self._connect()
        if conn is None or not texts:
            return _empty(sentence)
        keys = [content_key(t) for t in texts]
        try:
            conn.execute("BEGIN")  # one snapshot: a concurrent eviction cannot split a lookup
            where: dict[str, tuple[int, int]] = {}
            for start in range(0, len(keys), _MAX_PARAMS):
                part = keys[start : start + _MAX_PARAMS]
                sql = f"SELECT k, chunk, row FROM text WHERE k IN ({','.join('?' * len(part))})"
                where.update((k, (c, r)) for k, c, r in conn.execute(sql, part))
            sql = f"SELECT lengths, ids, dim, {'sent' if sentence else 0} FROM chunk WHERE id = ?"
            chunks = {c: conn.execute(sql, (c,)).fetchone() for c in {c for c, _ in where.values()}}
            conn.execute("COMMIT")
            chunks = {c: row for c, row in chunks.items() if row is not None and row[3] is not None}
            found = [(t, *where[k]) for t, k in zip(texts, keys, strict=True) if k in where]
            return _gather([h for h in found if h[1] in chunks], chunks, sentence)
        except (sqlite3.Error, ValueError, TypeError) as exc:
            self._disable(exc)  # closing the connection rolls an open transaction back
            return _empty(sentence)

    def put(self, stored: Stored) -> None:
        """Store a chunk in one transaction; its texts point to it from now on, and the oldest
        chunks go while the file's chunks exceed ``max_bytes``."""
        if not stored.texts or (conn := self._connect()) is None:
            return
        lengths = np.asarray(stored.lengths, "<i8").tobytes()
        ids = np.asarray(stored.ids, "<i4").tobytes()
        dim = 0 if stored.sent is None else int(stored.sent.shape[1])
        blob = None if stored.sent is None else np.asarray(stored.sent, "<f4").tobytes()
        row = (len(lengths) + len(ids) + len(blob or b""), lengths, ids, dim, blob)
        try:
            conn.execute("BEGIN IMMEDIATE")
            sql = "INSERT INTO chunk (nbytes, lengths, ids, dim, sent) VALUES (?, ?, ?, ?, ?)"
            chunk = conn.execute(sql, row).lastrowid
            rows = [(content_key(t), chunk, r) for r, t in enumerate(stored.texts)]
            conn.executemany("INSERT OR REPLACE INTO text VALUES (?, ?, ?)", rows)
            self._evict(conn)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._disable(exc)

    def _evict(self, conn: sqlite3.Connection) -> None:
        sizes = conn.execute("SELECT id, nbytes FROM chunk ORDER BY id").fetchall()
        total = np.cumsum([n for _, n in sizes])
        if total[-1] <= self.max_bytes:
            return
        last = sizes[int(np.searchsorted(total, total[-1] - self.max_bytes))][0]
        conn.execute("DELETE FROM text WHERE chunk <= ?", (last,))
        conn.execute("DELETE FROM chunk WHERE id <= ?", (last,))

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
