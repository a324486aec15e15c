"""On-disk, content-addressed store for encoder outputs.

One SQLite file per model signature under ``<cache_dir>/embeddings/``, rows keyed by a hash of
(kind, sentence), kind ``ids`` or ``sent`` (the encoder keeps no token embeddings here: at about
20 times a sentence embedding's size they cost more room and reading than encoding them again
saves, and the score cache serves repeated runs); values are raw array bytes with dtype and shape
(nothing is unpickled). Writes are single transactions, processes may share the file (WAL),
and deleting the folder only means the next run encodes again.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS emb ("
    "k TEXT PRIMARY KEY, dtype TEXT NOT NULL, shape TEXT NOT NULL, data BLOB NOT NULL)"
)
_MAX_PARAMS = 500  # below SQLite's bound on host parameters per statement


def content_key(kind: str, text: str) -> str:
    h = hashlib.blake2b(digest_size=20)
    h.update(kind.encode("utf-8"))
    h.update(b"\x1f")
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


class EmbeddingCache:
    """Arrays by (kind, text) for one model signature; a broken or unwritable cache is reported
    once on stderr and then bypassed, never fatal."""

    def __init__(self, directory: str | Path, namespace: str) -> None:
        self.path = Path(directory).expanduser() / "embeddings" / f"{namespace}.sqlite"
        self._conn: sqlite3.Connection | None = None
        self._broken = False

    def _connect(self) -> sqlite3.Connection | None:
        if self._broken:
            return None
        if self._conn is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(str(self.path), timeout=120, isolation_level=None)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(_SCHEMA)
                self._conn = conn
            except (sqlite3.Error, OSError) as exc:
                self._disable(exc)
        return self._conn

    def _disable(self, exc: Exception) -> None:
        print(f"paraeval: embedding cache {self.path} disabled ({exc})", file=sys.stderr)
        self._broken = True
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def get_many(self, kind: str, texts: Iterable[str]) -> dict[str, np.ndarray]:
        conn = self._connect()
        if conn is None:
            return {}
        by_key = {content_key(kind, t): t for t in texts}
        keys = list(by_key)
        found: dict[str, np.ndarray] = {}
        try:
            for start in range(0, len(keys), _MAX_PARAMS):
                chunk = keys[start : start + _MAX_PARAMS]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT k, dtype, shape, data FROM emb WHERE k IN ({marks})", chunk
                ).fetchall()
                for key, dtype, shape, data in rows:
                    dims = tuple(int(x) for x in shape.split(",") if x != "")
                    arr = np.frombuffer(data, dtype=np.dtype(dtype)).reshape(dims)
                    found[by_key[key]] = arr.copy()  # writable, like freshly encoded arrays
        except (sqlite3.Error, ValueError, TypeError) as exc:
            self._disable(exc)
            return {}
        return found

    def put_many(self, kind: str, items: Mapping[str, np.ndarray]) -> None:
        if not items:
            return
        conn = self._connect()
        if conn is None:
            return
        rows = []
        for text, arr in items.items():
            a = np.ascontiguousarray(arr)
            rows.append(
                (
                    content_key(kind, text),
                    a.dtype.str,
                    ",".join(str(d) for d in a.shape),
                    a.tobytes(),
                )
            )
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT OR IGNORE INTO emb VALUES (?, ?, ?, ?)", rows)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            self._disable(exc)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
