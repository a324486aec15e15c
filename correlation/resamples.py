"""Sets of bootstrap resamples: the indices drawn (:func:`draw_resamples`) and the
multiplicities they give each unit (:func:`counts`, :meth:`Resamples.item_weights`), in blocks
of whole resamples so that memory stays bounded however many items there are."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from paraeval.correlation.levels import UNITS

# Largest number of float64 elements one temporary array may hold; bounds memory (~16 MB).
CHUNK_ELEMENTS = 2_000_000
# Elements of item multiplicities (float64) made at once, in whole resample rows (~32 MB); every
# consumer treats resamples independently, so block boundaries change no number.
WEIGHT_BLOCK_ELEMENTS = 4_000_000
# Item multiplicities a set of resamples keeps for the metrics that share it, at most (~16 MB).
_KEPT_WEIGHT_ELEMENTS = 2_000_000


@dataclass(frozen=True)
class Resamples:
    """Indices of one set of bootstrap resamples (``None`` for an axis not resampled), items in
    the narrowest integer type; small item multiplicities (:meth:`item_weights`) are kept for
    every metric and coefficient that uses the set."""

    n_resamples: int
    sys_idx: np.ndarray | None  # (B, n_systems)
    item_idx: np.ndarray | None  # (B, n_items)
    _weights: dict[tuple[int, int, int], np.ndarray] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    # what a coefficient computes on the human side of each resample, once for all the metrics
    # that share the set (soft pairwise accuracy's human p-values)
    shared: dict[Hashable, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def item_weights(self, rows: slice, n_items: int) -> np.ndarray:
        """``counts(item_idx[rows], n_items)``, read-only."""
        assert self.item_idx is not None
        key = (int(rows.start or 0), int(rows.stop), n_items)
        found = self._weights.get(key)
        if found is None:
            found = counts(self.item_idx[rows], n_items)
            found.setflags(write=False)
            if self.n_resamples * n_items <= _KEPT_WEIGHT_ELEMENTS:
                # the worker threads of a table may make one block at once: the same numbers
                self._weights[key] = found
        return found


def draw_resamples(
    rng: np.random.Generator, n_systems: int, n_items: int, n_resamples: int, unit: str
) -> Resamples:
    """Draw resampling indices: items first, then systems (the order fixes the random stream)."""
    if unit not in UNITS:
        raise ValueError(f"unknown resampling unit {unit!r}; valid units: {', '.join(UNITS)}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")
    item_idx = _draw_indices(rng, n_items, n_resamples) if unit in ("items", "both") else None
    sys_idx = (
        rng.integers(0, n_systems, size=(n_resamples, n_systems))
        if unit in ("systems", "both")
        else None
    )
    return Resamples(n_resamples, sys_idx, item_idx)


def _draw_indices(rng: np.random.Generator, n: int, n_resamples: int) -> np.ndarray:
    """``rng.integers(0, n, size=(n_resamples, n))`` stored in the narrowest type that holds the
    values: the same numbers, and ``rng`` ends in the same state.

    numpy draws a bound below 2**32 as bounded 32-bit numbers whatever the output type (the
    type only sets how they are stored), and one call's stream continues in the next call, so
    blocks of rows drawn as int32 are the one int64 call's numbers; at 40,000 items a set of
    1,000 resamples is 80 MB in uint16 instead of 320 MB in int64.
    """
    shape = (n_resamples, n)
    if n > np.iinfo(np.int32).max:
        return rng.integers(0, n, size=shape)
    if n > np.iinfo(np.uint16).max + 1:
        return rng.integers(0, n, size=shape, dtype=np.int32)
    out = np.empty(shape, dtype=np.uint16)
    step = max(1, CHUNK_ELEMENTS // max(n, 1))
    for start in range(0, n_resamples, step):
        rows = min(step, n_resamples - start)
        out[start : start + rows] = rng.integers(0, n, size=(rows, n), dtype=np.int32)
    return out


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


def iter_weight_blocks(res: Resamples, k: int) -> Iterator[tuple[slice, np.ndarray]]:
    """The item multiplicities of ``res`` block by block of whole resample rows: ``(rows,
    weights)`` pairs, each block made when it is reached (or kept by ``res``), read-only."""
    assert res.item_idx is not None
    for sl in weight_blocks(res.n_resamples, k):
        yield sl, res.item_weights(sl, k)


def chunks(n_resamples: int, per_resample: int, elements: int | None = None) -> list[slice]:
    elements = CHUNK_ELEMENTS if elements is None else elements
    size = max(1, min(n_resamples, elements // max(per_resample, 1)))
    return [slice(i, min(i + size, n_resamples)) for i in range(0, n_resamples, size)]


def weight_blocks(n_resamples: int, n_items: int) -> list[slice]:
    """Blocks of whole resamples whose item multiplicities are made at once (bounded memory)."""
    return chunks(n_resamples, n_items, WEIGHT_BLOCK_ELEMENTS)
