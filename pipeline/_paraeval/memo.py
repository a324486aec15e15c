"""One bounded in-process memo for the work a process repeats across jobs of a sweep.

Shared by the libraries (sacrebleu statistics, Williams inputs) and the pipeline (tables, score
arrays, correlation rows, figures), so it lives at the package root.

A Hydra multirun (or a notebook calling :func:`paraeval.evaluate` in a loop) runs many jobs in one
process; loaded tables, cached score arrays, correlation rows and drawn figures repeat between
them. Each such reuse is a named :class:`Memo`: keyed by a content digest, bounded by entry count
and optionally by bytes, least recently used first out. Every memo registers itself, so
:func:`clear_all` empties them together (tests, or a long-lived process that wants its memory
back) and :func:`memo_sizes` tells what they hold.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
T = TypeVar("T")

_REGISTRY: dict[str, Memo[object, object]] = {}  # type: ignore[type-var]


class Memo(Generic[K, V]):
    """Least-recently-used memo with a bound on entries and (optionally) on bytes.

    ``size`` gives an entry's size in bytes when ``max_bytes`` is set; an entry larger than the
    whole budget is not kept. Safe to share between threads (the correlation's workers read and
    fill memos at once): each operation holds the memo's lock, a computation does not.
    """

    def __init__(
        self,
        name: str,
        max_entries: int,
        *,
        max_bytes: int | None = None,
        size: Callable[[V], int] | None = None,
    ) -> None:
        if max_bytes is not None and size is None:
            raise ValueError("a memo bounded by bytes needs a size function")
        self.name = name
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._size = size
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        _REGISTRY[name] = self  # type: ignore[assignment]

    def get(self, key: K) -> V | None:
        with self._lock:
            hit = self._entries.get(key)
            if hit is None:
                return None
            self._entries.move_to_end(key)
            return hit[0]

    def put(self, key: K, value: V) -> V:
        nbytes = self._size(value) if self._size is not None else 0
        with self._lock:
            self._discard(key)
            if self.max_bytes is not None and nbytes > self.max_bytes:
                return value
            self._entries[key] = (value, nbytes)
            self._bytes += nbytes
            while len(self._entries) > self.max_entries or (
                self.max_bytes is not None and self._bytes > self.max_bytes
            ):
                _, (_, old) = self._entries.popitem(last=False)
                self._bytes -= old
        return value

    def get_or_compute(self, key: K, compute: Callable[[], V]) -> V:
        hit = self.get(key)
        return hit if hit is not None else self.put(key, compute())

    def discard(self, key: K) -> None:
        with self._lock:
            self._discard(key)

    def _discard(self, key: K) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old[1]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    @property
    def nbytes(self) -> int:
        return self._bytes


def clear_all() -> None:
    """Empty every memo of this process."""
    for memo in _REGISTRY.values():
        memo.clear()


def memo_sizes() -> dict[str, tuple[int, int]]:
    """Entries and bytes held by each memo, by name."""
    return {name: (len(m), m.nbytes) for name, m in _REGISTRY.items()}


def array_key(*arrays: object) -> str:
    """An in-process key of numpy arrays by content: each one's dtype, shape and every byte
    (xxh3 reads them where they lie, at memory speed)."""
    import numpy as np
    import xxhash

    h = xxhash.xxh3_128()
    for a in arrays:
        c = np.ascontiguousarray(a)
        h.update(f"{c.dtype.str}{c.shape}|".encode())
        h.update(c.data)
    return h.hexdigest()


def nbytes_of(value: object) -> int:
    """A memo entry's size: the ``nbytes`` of an array (or of anything that tells it), or the
    sum over a tuple of such parts."""
    parts = value if isinstance(value, tuple) else (value,)
    return sum(int(part.nbytes) for part in parts)  # type: ignore[attr-defined]


def frozen(a: T) -> T:
    """``a`` (a numpy array) made read-only: a memo's value is shared by every later caller."""
    a.setflags(write=False)  # type: ignore[attr-defined]
    return a


def arrow_key(*columns: object) -> str:
    """An in-process key of Arrow data by content: each column's type, its chunks' offsets and
    lengths, and every byte of their buffers (validity, offsets, values, children's), read where
    they lie. Equal keys mean equal contents; equal contents laid out differently (chunked or
    sliced otherwise) only miss. A pandas column backed by Arrow (pandas' ``str`` dtype) is read
    through ``__arrow_array__``, without a copy; a ``pyarrow.Table`` is its schema and columns."""
    import pyarrow as pa
    import xxhash

    h = xxhash.xxh3_128()
    for column in columns:
        if isinstance(column, pa.Table):
            h.update(repr(column.schema).encode())
            parts: list[object] = list(column.columns)
        else:
            parts = [column]
        for part in parts:
            arrow = getattr(getattr(part, "array", None), "__arrow_array__", None)
            data = arrow() if arrow is not None else part
            if isinstance(data, pa.Array):
                data = pa.chunked_array([data])
            if not isinstance(data, pa.ChunkedArray):
                raise TypeError(f"not Arrow data: {type(part).__name__}")
            layout = [(chunk.offset, len(chunk)) for chunk in data.chunks]
            h.update(repr((str(data.type), layout)).encode())
            for chunk in data.chunks:
                for buf in chunk.buffers():
                    if buf is None:
                        h.update(b"\x00none")
                        continue
                    h.update(len(buf).to_bytes(8, "little"))
                    h.update(memoryview(buf))
    return h.hexdigest()
