"""Passes over a figure's pixels, compiled by numba: where its ink lies, whether ink lies outside
some boxes, which bands of rows equal those of an earlier image.

A panel figure of ParaBank-Eval's ranking is 2,652 x 13,187 pixels (140 MB of RGBA) with margin;
numpy's forms of these passes build a boolean image first and then reduce it, three to four
passes over memory and 35 MB of fresh pages each. Here each is one pass that keeps nothing and
stops where the answer is known. Pixels are compared as whole 32-bit words, as
:func:`paraeval.pipeline.report.figure_files.ink` compares them.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _differs(row: np.ndarray, lo: int, hi: int, background: np.uint32) -> bool:
    # no early exit: the loop stays one vectorised pass, faster than a test per pixel; over a
    # slice from 0, where numba knows the index is not negative (no wraparound test per pixel)
    seg = row[lo:hi]
    acc = np.uint32(0)
    for j in range(seg.shape[0]):
        acc |= seg[j] ^ background
    return acc != 0


@njit(cache=True, nogil=True)
def ink_extent(flat: np.ndarray, background: np.uint32) -> tuple[int, int, int, int]:
    """(first row, last row, first column, last column) of the pixels that differ from
    ``background``; (-1, -1, -1, -1) where none does.

    The first and last inked rows are looked for from either end; between them a row is read
    only left of the leftmost ink found so far and right of the rightmost, which is all that
    can widen the extent: in a figure whose ink spans most of its width, the margins."""
    height, width = flat.shape
    top = -1
    for i in range(height):
        if _differs(flat[i], 0, width, background):
            top = i
            break
    if top < 0:
        return -1, -1, -1, -1
    bottom = top
    for i in range(height - 1, top, -1):
        if _differs(flat[i], 0, width, background):
            bottom = i
            break
    left = width
    right = -1
    for i in range(top, bottom + 1):
        row = flat[i]
        if left > 0 and _differs(row, 0, left, background):
            for j in range(left):
                if row[j] != background:
                    left = j
                    break
        start = right + 1
        if start < width and _differs(row, start, width, background):
            for j in range(width - 1, right, -1):
                if row[j] != background:
                    right = j
                    break
    return top, bottom, left, right


@njit(cache=True, nogil=True)
def ink_outside(flat: np.ndarray, background: np.uint32, boxes: np.ndarray) -> bool:
    """Whether a pixel outside every box (rows ``top:bottom``, columns ``left:right`` of each
    row of ``boxes``) differs from ``background``."""
    height, width = flat.shape
    n = boxes.shape[0]
    lefts = np.empty(n, dtype=np.int64)
    rights = np.empty(n, dtype=np.int64)
    for i in range(height):
        # the columns the boxes over this row cover, as intervals sorted by their left end
        k = 0
        for b in range(n):
            if boxes[b, 0] <= i < boxes[b, 1] and boxes[b, 2] < boxes[b, 3]:
                at = k
                while at > 0 and lefts[at - 1] > boxes[b, 2]:
                    lefts[at] = lefts[at - 1]
                    rights[at] = rights[at - 1]
                    at -= 1
                lefts[at] = boxes[b, 2]
                rights[at] = boxes[b, 3]
                k += 1
        row = flat[i]
        j = 0  # every column left of j is covered or was looked at
        for c in range(k):
            if lefts[c] > j and _differs(row, j, min(lefts[c], width), background):
                return True
            j = max(j, rights[c])
        if j < width and _differs(row, j, width, background):
            return True
    return False


@njit(cache=True, nogil=True)
def equal_bands(old: np.ndarray, new: np.ndarray, band_rows: int) -> np.ndarray:
    """For each band of ``band_rows`` rows, whether its rows and the row above it are equal in
    ``old`` and ``new`` (two images of one shape)."""
    height, width = new.shape
    n_bands = (height + band_rows - 1) // band_rows
    same = np.ones(n_bands, dtype=np.bool_)
    for band in range(n_bands):
        start = band * band_rows
        stop = min(start + band_rows, height)
        for i in range(max(start - 1, 0), stop):
            a = old[i]
            b = new[i]
            acc = np.uint32(0)
            for j in range(width):
                acc |= a[j] ^ b[j]
            if acc != 0:
                same[band] = False
                break
    return same
