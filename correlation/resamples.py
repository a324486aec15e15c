"""Sets of bootstrap resamples: the indices drawn (:func:`draw_resamples`) and the
multiplicities they give each unit (:func:`counts`), in blocks of whole resamples so that memory
stays bounded however many items there are."""

from __future__ import annotations

import bisect
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

import numpy as np

UNITS: tuple[str, ...] = ("items", "systems", "both")
"""What a set of resamples draws: item columns, system rows, or both."""

# Largest number of float64 elements one temporary array may hold; bounds memory (~16 MB).
CHUNK_ELEMENTS = 2_000_000
# Elements of item multiplicities (float64) made at once, in whole resample rows (~32 MB); every
# consumer treats resamples independently, so block boundaries change no number.
WEIGHT_BLOCK_ELEMENTS = 4_000_000


@dataclass(frozen=True)
class Resamples:
    """Indices of one set of bootstrap resamples (``None`` for an axis not resampled), items in
    the narrowest integer type."""

    n_resamples: int
    sys_idx: np.ndarray | None  # (B, n_systems)
    item_idx: np.ndarray | DrawnRows | None  # (B, n_items)


def draw_resamples(
    rng: np.random.Generator, n_systems: int, n_items: int, n_resamples: int, unit: str
) -> Resamples:
    """Draw resampling indices: items first, then systems (the order fixes the random stream)."""
    if unit not in UNITS:
        raise ValueError(f"unknown resampling unit {unit!r}; valid units: {', '.join(UNITS)}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")
    item_idx = _draw_indices(rng, n_items, n_resamples) if unit in ("items", "both") else None
    sys_idx = None
    if unit in ("systems", "both"):
        sys_idx = rng.integers(0, n_systems, size=(n_resamples, n_systems))
    return Resamples(n_resamples, sys_idx, item_idx)


# A set whose item indices would hold more than this keeps the generator's states instead, and
# draws its rows again where they are read (:class:`DrawnRows`): memory bounded whatever
# n_resamples, at the cost of drawing again (sets this large only)
HELD_INDEX_BYTES = 2**28


class DrawnRows:
    """The item indices of a set of resamples, kept as the state of the generator before each
    block of rows: the rows read are drawn again from those states, block by block, which gives
    the same numbers (one bounded 32-bit draw after another, whatever the blocks). Reads like a
    (resamples x items) array: a row, a slice of rows, or the whole (``np.asarray``). Readers take
    rows in blocks of whole resamples (:func:`weight_blocks`), each block drawn once."""

    ndim = 2

    def __init__(
        self, states: list[tuple[int, Any]], bit_generator: type, n_rows: int, n: int
    ) -> None:
        self._states = states  # (first row, generator state) of each block
        self._bit_generator = bit_generator
        self._starts = [start for start, _ in states]
        self.shape = (n_rows, n)
        self.dtype = np.dtype(np.uint16 if n <= np.iinfo(np.uint16).max + 1 else np.int32)

    def _block(self, k: int) -> tuple[int, np.ndarray]:
        start, state = self._states[k]
        stop = self._starts[k + 1] if k + 1 < len(self._starts) else self.shape[0]
        bit_generator = self._bit_generator()
        bit_generator.state = state
        rows = np.random.Generator(bit_generator).integers(
            0, self.shape[1], size=(stop - start, self.shape[1]), dtype=np.int32
        )
        return start, rows.astype(self.dtype, copy=False)

    def _rows(self, lo: int, hi: int) -> np.ndarray:
        parts = []
        k = bisect.bisect_right(self._starts, lo) - 1
        while lo < hi:
            start, block = self._block(k)
            end = min(hi, start + len(block))
            parts.append(block[lo - start : end - start])
            lo, k = end, k + 1
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.empty((0, self.shape[1]), self.dtype)

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, int | np.integer):
            row = int(key) + (self.shape[0] if key < 0 else 0)
            if not 0 <= row < self.shape[0]:
                raise IndexError(f"row {key} of {self.shape[0]}")
            return self._rows(row, row + 1)[0]
        if isinstance(key, slice) and key.step in (None, 1):
            lo, hi, _ = key.indices(self.shape[0])
            return self._rows(lo, max(lo, hi))
        return np.asarray(self)[key]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = self._rows(0, self.shape[0])
        return whole if dtype is None else whole.astype(dtype)


def _draw_indices(rng: np.random.Generator, n: int, n_resamples: int) -> np.ndarray | DrawnRows:
    """``rng.integers(0, n, size=(n_resamples, n))`` stored in the narrowest type that holds the
    values: the same numbers, and ``rng`` ends in the same state.

    numpy draws a bound below 2**32 as bounded 32-bit numbers whatever the output type (the
    type only sets how they are stored), and one call's stream continues in the next call, so
    blocks of rows drawn as int32 are the one int64 call's numbers; at 40,000 items a set of
    1,000 resamples is 80 MB in uint16 instead of 320 MB in int64.
    """
    shape, step = (n_resamples, n), max(1, CHUNK_ELEMENTS // max(n, 1))
    if n > np.iinfo(np.int32).max:
        return rng.integers(0, n, size=shape)
    if n_resamples * n * index_itemsize(n) > HELD_INDEX_BYTES:
        # drawn once (the generator ends where it would), kept as the states between blocks
        states: list[tuple[int, Any]] = []
        for start in range(0, n_resamples, step):
            states.append((start, rng.bit_generator.state))
            rng.integers(0, n, size=(min(step, n_resamples - start), n), dtype=np.int32)
        return DrawnRows(states, type(rng.bit_generator), n_resamples, n)
    if n > np.iinfo(np.uint16).max + 1:
        return rng.integers(0, n, size=shape, dtype=np.int32)
    out = np.empty(shape, dtype=np.uint16)
    for start in range(0, n_resamples, step):
        rows = min(step, n_resamples - start)
        out[start : start + rows] = rng.integers(0, n, size=(rows, n), dtype=np.int32)
    return out


def index_itemsize(n: int) -> int:
    """Bytes of one item index as :func:`draw_resamples` stores it (:func:`_draw_indices`)."""
    return 8 if n > np.iinfo(np.int32).max else 4 if n > np.iinfo(np.uint16).max + 1 else 2


def resamples_nbytes(n_resamples: int, n_systems: int, n_items: int, unit: str) -> int:
    """Bytes one set of :func:`draw_resamples` holds: its item indices in their narrowest type
    (and the int32 block they are drawn in) and its system indices (int64)."""
    items = unit in ("items", "both")
    held = n_resamples * n_items * index_itemsize(n_items) if items else 0
    held += 4 * min(CHUNK_ELEMENTS, n_resamples * n_items) if items else 0
    if held > HELD_INDEX_BYTES:  # drawn again where read: a block per reader (DrawnRows)
        held = 4 * CHUNK_ELEMENTS * 4
    held += n_resamples * n_systems * 8 if unit in ("systems", "both") else 0
    return held


def counts(idx: np.ndarray, k: int) -> np.ndarray:
    """Multiplicity of each of ``k`` units in each resample row of ``idx``: shape (B, k), float."""
    b = idx.shape[0]
    out = np.empty((b, k))
    # a few rows at a time: the int64 offsets and bincount's int64 result of all rows at once
    # would be twice the output's size again
    step = max(1, CHUNK_ELEMENTS // max(k, 1))
    for start in range(0, b, step):
        part = idx[start : start + step]
        rows = part.shape[0]
        flat = (part + k * np.arange(rows)[:, None]).ravel()
        out[start : start + rows] = np.bincount(flat, minlength=rows * k).reshape(rows, k)
    return out


def item_blocks(
    res: Resamples,
    n_items: int,
    slices: list[slice] | None = None,
    memo: MutableMapping | None = None,
) -> Iterator[tuple[slice, np.ndarray | None, np.ndarray | None]]:
    """``(rows, item indices, item multiplicities)`` of each of ``slices`` (default: blocks of
    whole resamples, :func:`weight_blocks`) in order; None where items are not resampled. The
    index rows are read a block at a time, so rows drawn again where read (:class:`DrawnRows`)
    are drawn once; with ``memo``, those of a set that fits one block once for all its metrics."""
    blocks = weight_blocks(res.n_resamples, n_items)
    slices = blocks if slices is None else slices
    if memo is not None and res.item_idx is not None and len(blocks) == 1:
        if ("item_weights", n_items) not in memo:  # two threads at once only repeat the work
            idx = np.asarray(res.item_idx)
            memo["item_weights", n_items] = (idx, counts(idx, n_items))
        idx, w = memo["item_weights", n_items]
        yield from ((sl, idx[sl], w[sl]) for sl in slices)
        return
    step = blocks[0].stop if blocks else 1
    held, lo = np.empty((0, n_items), dtype=np.intp), 0
    for sl in slices:
        if res.item_idx is None:
            yield sl, None, None
            continue
        if sl.stop > lo + len(held):
            lo = sl.start
            held = res.item_idx[lo : max(sl.stop, lo + step)]
        idx = held[sl.start - lo : sl.stop - lo]
        yield sl, idx, counts(idx, n_items)


def cell_weights(
    item_w: np.ndarray | None, sys_w: np.ndarray | None, k: int, ci: np.ndarray, cs: np.ndarray
) -> np.ndarray:
    """Multiplicity of every pooled cell in ``k`` resamples, laid out (n_cells, k), from those
    resamples' item and system multiplicities (rows of ``item_w``, ``sys_w``)."""
    wt = np.ones((ci.size, k), dtype=np.int32)
    if item_w is not None:
        wt = item_w.T.astype(np.int32)[ci]
    if sys_w is not None:
        wt = wt * sys_w.T.astype(np.int32)[cs]
    return wt


def chunks(
    n_resamples: int, per_resample: int, elements: int | None = None, align: int = 1
) -> list[slice]:
    """Slices of whole rows holding about ``elements`` elements each, a multiple of ``align``
    rows where there is more than one."""
    elements = CHUNK_ELEMENTS if elements is None else elements
    size = max(1, min(n_resamples, elements // max(per_resample, 1)))
    if size < n_resamples:
        size = max(align, size // align * align)
    return [slice(i, min(i + size, n_resamples)) for i in range(0, n_resamples, size)]


def weight_blocks(n_resamples: int, n_items: int) -> list[slice]:
    """Blocks of whole resamples whose item multiplicities are made at once (bounded memory)."""
    return chunks(n_resamples, n_items, WEIGHT_BLOCK_ELEMENTS)


def resampled_matrices(
    m: np.ndarray, h: np.ndarray, res: Resamples
) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """``(b, metric, human)`` of every resample built explicitly, the rows of indices read a
    block at a time."""
    for sl, items, _ in item_blocks(res, m.shape[1]):
        for b in range(sl.start, sl.stop):
            mb, hb = m, h
            if items is not None:
                mb, hb = mb[:, items[b - sl.start]], hb[:, items[b - sl.start]]
            if res.sys_idx is not None:
                mb, hb = mb[res.sys_idx[b]], hb[res.sys_idx[b]]
            yield b, mb, hb
