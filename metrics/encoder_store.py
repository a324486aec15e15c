"""Where the encoder keeps what its passes produced. The memo, in memory, is bounded in bytes (least
recently used out) so that a run's memory does not grow with its pool; it only saves passes, and
callers hold their arrays in dicts of their own, so an eviction never takes one from under them.
The disk cache is one SQLite file per model signature under ``<cache_dir>/embeddings/``, keyed by
a hash of (kind, sentence), kind ``ids`` or ``sent`` (token embeddings, 20 times a sentence
embedding's size, cost more to store and read than to encode again); values are raw array bytes
(nothing is unpickled), writes single transactions, processes may share the file (WAL), and
deleting it only means the next run encodes again.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import sys
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# what the memo may hold: ParaBank-Eval's 5,620 sentences with their last-layer token embeddings
# (about 260 MB for all-MiniLM-L6-v2) fit, a larger pool streams through it
DEFAULT_MEMO_BYTES = 512 << 20


@dataclass
class Entry:
    """One text's outputs: token ids, sentence embedding, token embeddings per layer."""

    ids: np.ndarray | None = None
    sent: np.ndarray | None = None
    tok: dict[int, np.ndarray] = field(default_factory=dict)

    def has(self, layers: Iterable[int], sentence: bool) -> bool:
        if self.ids is None or (sentence and self.sent is None):
            return False
        return all(layer in self.tok for layer in layers)

    @property
    def nbytes(self) -> int:
        arrays = [self.ids, self.sent, *self.tok.values()]
        return 200 + sum(a.nbytes for a in arrays if a is not None)


class Memo:
    """Entries by text, least recently used first out once ``max_bytes`` is exceeded."""

    def __init__(self, max_bytes: int = DEFAULT_MEMO_BYTES) -> None:
        self.max_bytes = max(0, int(max_bytes))
        self._items: OrderedDict[str, tuple[Entry, int]] = OrderedDict()  # with its size
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, text: object) -> bool:
        return text in self._items

    def get(self, text: str) -> Entry | None:
        if text not in self._items:
            return None
        self._items.move_to_end(text)
        return self._items[text][0]

    def put(self, text: str, entry: Entry) -> None:
        """Add or refresh ``text`` (its size is counted again: an entry may have grown)."""
        _, before = self._items.pop(text, (entry, 0))
        self._items[text] = (entry, entry.nbytes)
        self.nbytes += entry.nbytes - before
        while self.nbytes > self.max_bytes and self._items:
            _, (_, size) = self._items.popitem(last=False)
            self.nbytes -= size


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS emb ("
    "k TEXT PRIMARY KEY, dtype TEXT NOT NULL, shape TEXT NOT NULL, data BLOB NOT NULL)"
)
_MAX_PARAMS = 500  # below SQLite's bound on host parameters per statement


def content_key(kind: str, text: str) -> str:
    data = kind.encode("utf-8") + b"\x1f" + text.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=20).hexdigest()


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
            shape = ",".join(str(d) for d in a.shape)
            rows.append((content_key(kind, text), a.dtype.str, shape, a.tobytes()))
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
