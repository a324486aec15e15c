"""The comparison's paired bootstrap and approximate randomization a block of rows at a time:
the draws of :func:`~correlation.paired.bootstrap_indices` and :func:`~correlation.paired.ar_masks`
made block by block (the same numbers, the generator ending in the same state), so that memory
does not grow with the number of resamples or trials, and the bytes a block takes (the estimates
the config check uses)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from paraeval.correlation.paired import ArMasks, resample_counts

# The comparison handles its resamples and trials in blocks of rows, so that its memory does not
# grow with n_bootstrap or n_ar: a block is a whole multiple of BLOCK_ALIGN rows (OpenBLAS's
# kernels take rows in groups, so products over aligned blocks equal the rows of one product over
# every row, bit for bit; an aligned block is also a multiple of 32 rows, which continues
# numpy's stream of booleans exactly, see ar_mask_bits) and holds about BLOCK_BYTES.
BLOCK_ALIGN = 256
BLOCK_BYTES = 2**26
# bytes per (resample, item) of a bootstrap block: an int32 index and a float64 multiplicity
BOOTSTRAP_CELL_BYTES = 12
# bytes per (trial, item) of a randomization block: the booleans drawn, their bits, their float64
# copies (keep and swap), the transposed booleans a compiled loop reads and the booleans unpacked
# for a corpus function (19 and a bit, rounded up)
AR_CELL_BYTES = 20


def block_rows(n_items: int, cell_bytes: int) -> int:
    """Rows of a block: as many aligned rows as fit BLOCK_BYTES, at least BLOCK_ALIGN."""
    rows = BLOCK_BYTES // max(1, cell_bytes * max(1, n_items))
    return max(BLOCK_ALIGN, rows // BLOCK_ALIGN * BLOCK_ALIGN)


def row_blocks(n_rows: int, size: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` blocks of ``size`` rows; a last block under half the alignment joins the one
    before it (a product of very few rows takes another kernel)."""
    bounds = [(lo, min(lo + size, n_rows)) for lo in range(0, n_rows, size)]
    if len(bounds) > 1 and bounds[-1][1] - bounds[-1][0] < BLOCK_ALIGN // 2:
        bounds[-2:] = [(bounds[-2][0], n_rows)]
    return bounds


def _largest_block(n_rows: int, size: int) -> int:
    return max((hi - lo for lo, hi in row_blocks(n_rows, size)), default=0)


def bootstrap_blocks(
    n_items: int, n_samples: int, seed: int | None
) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
    """:func:`bootstrap_indices` and their :func:`resample_counts`, a block of resamples at a
    time: ``(rows, indices, counts)``. The blocks continue one generator's stream (bounded
    32-bit draws), so they are the rows of the one call, and the generator ends in its state."""
    rng = np.random.default_rng(seed)
    for lo, hi in row_blocks(n_samples, block_rows(n_items, BOOTSTRAP_CELL_BYTES)):
        if n_items <= np.iinfo(np.int32).max:
            idx: np.ndarray = rng.integers(0, n_items, size=(hi - lo, n_items), dtype=np.int32)
        else:  # pragma: no cover - over two billion items
            idx = rng.choice(n_items, size=(hi - lo, n_items), replace=True)
        yield slice(lo, hi), idx, resample_counts(idx)
        del idx  # not alive while the next block is drawn


def bootstrap_block_nbytes(n_items: int, n_samples: int) -> int:
    """Peak bytes of :func:`bootstrap_blocks`: its largest block of indices and counts, and
    the few scores per resample a column computes from a block."""
    rows = _largest_block(n_samples, block_rows(n_items, BOOTSTRAP_CELL_BYTES))
    return rows * (n_items * BOOTSTRAP_CELL_BYTES + 256)


def ar_blocks(n_items: int, n_trials: int, seed: int | None) -> Iterator[tuple[slice, ArMasks]]:
    """The masks of :func:`ar_masks`, a block of trials at a time: ``(rows, masks)``, the block's
    float copies made once for every column that uses it."""
    rng = np.random.default_rng(seed)
    for lo, hi in row_blocks(n_trials, block_rows(n_items, AR_CELL_BYTES)):
        yield slice(lo, hi), ArMasks(rng.integers(2, size=(hi - lo, n_items), dtype=bool))


def ar_block_nbytes(n_items: int, n_trials: int) -> int:
    """Peak bytes of :func:`ar_blocks` and the tests that read a block: its largest block's
    booleans, bits, float copies and transposed booleans."""
    rows = _largest_block(n_trials, block_rows(n_items, AR_CELL_BYTES))
    return rows * n_items * AR_CELL_BYTES
