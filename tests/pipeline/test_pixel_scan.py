"""The compiled pixel passes against their numpy forms, on random images with sparse ink."""

from __future__ import annotations

import numpy as np
import pytest

from paraeval.pipeline.report.pixel_scan import equal_bands, ink_extent, ink_outside


def _image(rng: np.random.Generator, height: int, width: int, blots: int) -> np.ndarray:
    """RGBA pixels, white but for a few rectangles of other colours (some differing from white
    in the alpha byte only)."""
    rgba = np.full((height, width, 4), 255, dtype=np.uint8)
    for _ in range(blots):
        top, left = rng.integers(0, height), rng.integers(0, width)
        bottom = min(top + rng.integers(1, 12), height)
        right = min(left + rng.integers(1, 40), width)
        channel = rng.integers(0, 4)
        rgba[top:bottom, left:right, channel] = rng.integers(0, 255)
    return rgba


def _words(rgba: np.ndarray) -> np.ndarray:
    return rgba.view(np.uint32)[..., 0]


def _numpy_extent(flat: np.ndarray, background: np.uint32) -> tuple[int, int, int, int]:
    """The first and last inked rows and columns, from numpy's reductions of the ink mask."""
    inked = flat != background
    rows, cols = np.flatnonzero(inked.any(axis=1)), np.flatnonzero(inked.any(axis=0))
    if rows.size == 0:
        return -1, -1, -1, -1
    return int(rows[0]), int(rows[-1]), int(cols[0]), int(cols[-1])


@pytest.mark.parametrize("seed", range(40))
def test_ink_extent_is_numpys(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rgba = _image(rng, int(rng.integers(1, 90)), int(rng.integers(1, 120)), int(rng.integers(0, 5)))
    # a view cut out of a larger image, as a cropped figure is
    if seed % 2 and min(rgba.shape[:2]) > 4:
        rgba = rgba[1:-1, 2:-1]
    flat = _words(rgba)
    assert ink_extent(flat, flat[0, 0]) == _numpy_extent(flat, flat[0, 0])


@pytest.mark.parametrize("seed", range(40))
def test_ink_outside_is_numpys(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    height, width = int(rng.integers(2, 80)), int(rng.integers(2, 100))
    rgba = _image(rng, height, width, int(rng.integers(0, 6)))
    boxes = []
    for _ in range(int(rng.integers(0, 6))):
        top, left = int(rng.integers(0, height)), int(rng.integers(0, width))
        boxes.append(
            (top, int(rng.integers(top, height + 1)), left, int(rng.integers(left, width + 1)))
        )
    flat = _words(rgba)
    inked = flat != flat[0, 0]
    for top, bottom, left, right in boxes:
        inked[top:bottom, left:right] = False
    table = np.array(boxes, dtype=np.int64).reshape(-1, 4)
    assert ink_outside(flat, flat[0, 0], table) == bool(inked.any())


def test_ink_outside_both_answers() -> None:
    rgba = np.full((20, 30, 4), 255, dtype=np.uint8)
    rgba[5:8, 10:12, 0] = 0
    flat = _words(rgba)
    assert not ink_outside(flat, flat[0, 0], np.array([[5, 8, 10, 12]]))
    assert ink_outside(flat, flat[0, 0], np.array([[5, 8, 10, 11]]))  # one column left out
    assert ink_outside(flat, flat[0, 0], np.zeros((0, 4), dtype=np.int64))


@pytest.mark.parametrize("seed", range(30))
def test_equal_bands_is_numpys(seed: int) -> None:
    rng = np.random.default_rng(200 + seed)
    band_rows = int(rng.integers(1, 9))
    old = _image(rng, int(rng.integers(1, 70)), int(rng.integers(1, 50)), 4)
    new = old.copy()
    for _ in range(int(rng.integers(0, 4))):
        i, j = int(rng.integers(0, new.shape[0])), int(rng.integers(0, new.shape[1]))
        new[i, j, int(rng.integers(0, 4))] ^= 1
    height = new.shape[0]
    spans = [slice(max(start - 1, 0), start + band_rows) for start in range(0, height, band_rows)]
    expected = [np.array_equal(old[span], new[span]) for span in spans]
    assert equal_bands(_words(old), _words(new), band_rows).tolist() == expected


@pytest.mark.parametrize("seed", range(40))
def test_ink_extent_on_dense_and_edge_ink(seed: int) -> None:
    """Many blots, and single pixels at the first and last columns of middle rows: what the
    scan of the margins left and right of the extent found so far must catch."""
    rng = np.random.default_rng(300 + seed)
    height, width = int(rng.integers(1, 60)), int(rng.integers(1, 80))
    rgba = _image(rng, height, width, int(rng.integers(0, 40)))
    for _ in range(int(rng.integers(0, 4))):
        i, j = int(rng.integers(0, height)), int(rng.choice([0, width - 1, width // 2]))
        rgba[i, j, int(rng.integers(0, 4))] ^= 0xFF
    flat = _words(rgba)
    background = np.uint32(flat[int(rng.integers(0, height)), int(rng.integers(0, width))])
    assert ink_extent(flat, background) == _numpy_extent(flat, background)


def test_ink_extent_of_a_single_pixel() -> None:
    rgba = np.full((9, 7, 4), 255, dtype=np.uint8)
    rgba[4, 3, 2] = 0
    flat = _words(rgba)
    assert ink_extent(flat, flat[0, 0]) == (4, 4, 3, 3)
    rgba[6, 6, 0] = 0  # a second one, below and right of it
    assert ink_extent(flat, flat[0, 0]) == (4, 6, 3, 6)
    rgba[5, 0, 1] = 0  # and one at the first column between them
    assert ink_extent(flat, flat[0, 0]) == (4, 6, 0, 6)
