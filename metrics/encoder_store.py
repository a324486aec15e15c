"""The encoder's outputs packed (:class:`Packed`): an array per sentence and layer costs a Python
object and a copy each, which on a GPU take longer than the forward pass. The memo holds recent
chunks within a byte bound, so a run's memory does not grow with its pool; it only saves passes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# what the memo may hold: ParaBank-Eval's 5,620 sentences with their last-layer token embeddings
# (about 260 MB for all-MiniLM-L6-v2) fit, a larger pool streams through it
DEFAULT_MEMO_BYTES = 512 << 20


def starts_of(lengths: np.ndarray) -> np.ndarray:
    """Where each row starts when rows of ``lengths`` lie end to end."""
    return np.cumsum(lengths) - lengths


def gather_index(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Positions of the tokens of rows that start at ``starts`` with ``lengths`` tokens, row after
    row: what packs them contiguously."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    shift = np.asarray(starts, dtype=np.int64) - starts_of(lengths)
    return np.arange(total, dtype=np.int64) + np.repeat(shift, lengths)


def pad_positions(starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions in a packed array of the rows that start at ``starts`` with ``lengths`` tokens,
    padded to the longest (0 where a row has ended), and the mask of real tokens."""
    width = int(lengths.max()) if len(lengths) else 0
    mask = np.arange(width) < lengths[:, None]
    return np.where(mask, starts[:, None] + np.arange(width), 0), mask


@dataclass
class Packed:
    """Text ``i``'s tokens are ``starts[i] : starts[i] + lengths[i]`` of ``ids`` (on the host,
    where weights are looked up) and of each layer's ``tok``; ``sent`` has a row per text. The
    embeddings are torch tensors on the encoder's device, where the metrics use them."""

    texts: list[str]
    ids: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    tok: dict[int, Any] = field(default_factory=dict)
    sent: Any = None
    row: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.row = {text: i for i, text in enumerate(self.texts)}

    def has(self, layers: Iterable[int], sentence: bool) -> bool:
        return (self.sent is not None or not sentence) and all(k in self.tok for k in layers)

    @property
    def nbytes(self) -> int:
        arrays = [t for t in (*self.tok.values(), self.sent) if t is not None]
        return 116 * len(self.texts) + self.ids.nbytes + sum(int(t.nbytes) for t in arrays)

    def rows(self, texts: Sequence[str]) -> np.ndarray:
        return np.fromiter((self.row[t] for t in texts), dtype=np.int64, count=len(texts))

    def span(self, text: str) -> slice:
        """Where ``text``'s tokens are in ``ids`` and each layer's array."""
        i = self.row[text]
        return slice(int(self.starts[i]), int(self.starts[i] + self.lengths[i]))

    def sent_of(self, texts: Sequence[str]) -> Any:
        """The sentence embeddings of ``texts``, a row each, where they are."""
        import torch

        return self.sent[torch.from_numpy(self.rows(texts)).to(self.sent.device)]

    def take(self, rows: np.ndarray) -> Packed:
        """The rows ``rows``, packed contiguously in that order."""
        import torch

        if len(rows) == len(self.texts) and (rows == np.arange(len(rows))).all():
            return self
        index = gather_index(self.starts[rows], self.lengths[rows])
        lengths = self.lengths[rows]
        on_device = torch.from_numpy(index)
        tok = {k: t[on_device.to(t.device)] for k, t in self.tok.items()}
        sent = None if self.sent is None else self.sent[torch.from_numpy(rows).to(self.sent.device)]
        starts = starts_of(lengths)
        return Packed([self.texts[i] for i in rows], self.ids[index], starts, lengths, tok, sent)


def concat(parts: Sequence[Packed]) -> Packed:
    """One :class:`Packed` of several (the layers and sentence embeddings all of them have)."""
    if len(parts) == 1:
        return parts[0]
    import torch

    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return Packed([], np.zeros(0, dtype=np.int32), empty, empty)
    shifts = np.cumsum([0, *(len(p.ids) for p in parts)])[:-1]
    layers = set.intersection(*(set(p.tok) for p in parts))
    sents = [p.sent for p in parts]
    return Packed(
        [t for p in parts for t in p.texts],
        np.concatenate([p.ids for p in parts]),
        np.concatenate([p.starts + s for p, s in zip(parts, shifts, strict=True)]),
        np.concatenate([p.lengths for p in parts]),
        {k: torch.cat([p.tok[k] for p in parts]) for k in sorted(layers)},
        None if any(s is None for s in sents) else torch.cat(sents),
    )


class Memo:
    """Chunks of recent passes, least recently used first out once ``max_bytes`` is exceeded; a
    text is served from the newest chunk that holds it."""

    def __init__(self, max_bytes: int = DEFAULT_MEMO_BYTES) -> None:
        self.max_bytes = max(0, int(max_bytes))
        self._chunks: OrderedDict[int, Packed] = OrderedDict()
        self._where: dict[str, int] = {}  # text -> key of the newest chunk holding it
        self._next = 0
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, text: object) -> bool:
        return text in self._where

    def find(
        self, texts: Iterable[str], layers: Iterable[int], sentence: bool
    ) -> tuple[list[Packed], list[str]]:
        """The held unique ``texts`` that have ``layers`` and (with ``sentence``) a sentence
        embedding, one part per chunk; and the texts left over."""
        layers = list(layers)
        by_chunk: dict[int, list[str]] = {}
        missing: list[str] = []
        for text in dict.fromkeys(texts):
            key = self._where.get(text)
            if key is not None and self._chunks[key].has(layers, sentence):
                by_chunk.setdefault(key, []).append(text)
            else:
                missing.append(text)
        parts = []
        for key, held in by_chunk.items():
            self._chunks.move_to_end(key)
            chunk = self._chunks[key]
            parts.append(chunk.take(chunk.rows(held)))
        return parts, missing

    def put(self, packed: Packed) -> None:
        """Add a chunk (its texts are served from it from now on)."""
        if not packed.texts:
            return
        key, self._next = self._next, self._next + 1
        self._chunks[key] = packed
        self._where.update(dict.fromkeys(packed.texts, key))
        self.nbytes += packed.nbytes
        while self.nbytes > self.max_bytes and self._chunks:
            old, chunk = self._chunks.popitem(last=False)
            self.nbytes -= chunk.nbytes
            for text in chunk.texts:
                if self._where.get(text) == old:
                    del self._where[text]
