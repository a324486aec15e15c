"""The encoder's in-process memo: what one text's pass produced, kept in a least-recently-used
store bounded in bytes, so the memory of a run does not grow with its pool of sentences.

The memo only saves forward passes; a text evicted from it is read from the disk cache or encoded
again. Callers get their arrays in a dict of their own (:meth:`metrics.encoder.Encoder.fetch`),
so an eviction never takes an array from under a computation.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

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
        self._items: OrderedDict[str, Entry] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, text: object) -> bool:
        return text in self._items

    def get(self, text: str) -> Entry | None:
        entry = self._items.get(text)
        if entry is not None:
            self._items.move_to_end(text)
        return entry

    def put(self, text: str, entry: Entry) -> None:
        """Add or refresh ``text`` (its size is counted again: an entry may have grown)."""
        self.nbytes -= self._sizes.get(text, 0)
        size = entry.nbytes
        self._items[text] = entry
        self._items.move_to_end(text)
        self._sizes[text] = size
        self.nbytes += size
        while self.nbytes > self.max_bytes and self._items:
            old, _ = self._items.popitem(last=False)
            self.nbytes -= self._sizes.pop(old)

    def clear(self) -> None:
        self._items.clear()
        self._sizes.clear()
        self.nbytes = 0
