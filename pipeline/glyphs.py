"""Glyph bitmaps kept between drawings, for matplotlib's Agg renderer.

Agg draws text glyph by glyph: FreeType loads each glyph, moves it to its place (in 1/64 pixel)
and renders it to a bitmap that is blended onto the canvas. A figure redrawn with new values
(every job of an α sweep redraws its scatter plots, its ranking panels and its heatmap) renders
the same few hundred glyphs again: tick labels, titles, legends, cell values. A glyph's bitmap
depends on its font, size, resolution, transform, hinting, antialiasing and the fraction of a
pixel at which it is placed; a whole-pixel move moves the bitmap and changes none of its values
(FreeType works in exact 1/64-pixel integers). The bitmap is kept under those keys and placed
where the renderer would have placed a new one, so the canvas gets the same pixels
(``tests/pipeline/test_glyphs.py`` compares whole figures and glyphs at every subpixel phase).

Installed only over the method of the matplotlib versions it reproduces; any other version draws
as it always does.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

# the Agg method replaced here is that of these matplotlib versions
_VERSIONS = ("3.11.",)
_MAX_GLYPHS = 50_000

_INSTALLED: list[Any] = []  # the original method, once installed


def install() -> bool:
    """Keep glyph bitmaps in this process's Agg renderer; False where matplotlib's text drawing
    is not the one reproduced here."""
    if _INSTALLED:
        return True
    import matplotlib
    from matplotlib.backends import backend_agg

    renderer = backend_agg.RendererAgg
    original = getattr(renderer, "_draw_text_glyphs_and_boxes", None)
    if original is None or not matplotlib.__version__.startswith(_VERSIONS):
        return False
    _INSTALLED.append(original)
    renderer._draw_text_glyphs_and_boxes = _draw_text_glyphs_and_boxes  # type: ignore[method-assign]
    return True


def uninstall() -> None:
    """Back to matplotlib's own drawing (for tests that compare the two)."""
    from matplotlib.backends import backend_agg

    if _INSTALLED:
        backend_agg.RendererAgg._draw_text_glyphs_and_boxes = _INSTALLED.pop()  # type: ignore[method-assign]
    _GLYPHS.clear()


# (font, size, dpi, glyph, transform, x and y phase in 1/64 pixel, load flags, render mode) ->
# (bitmap, its left and top edge less the whole pixels of the glyph's place)
_GLYPHS: dict[tuple[Any, ...], tuple[np.ndarray, int, int]] = {}
_MATRICES: dict[tuple[float, float, float], tuple[np.ndarray, tuple[int, ...]]] = {}


def _matrix(angle: float, slant: float, extend: float) -> tuple[np.ndarray, tuple[int, ...]]:
    """FreeType's transform for a glyph, computed exactly as the renderer computes it."""
    key = (angle, slant, extend)
    found = _MATRICES.get(key)
    if found is None:
        cos = math.cos(math.radians(angle))
        sin = math.sin(math.radians(angle))
        matrix = (
            (0x10000 * np.array([[cos, -sin], [sin, cos]]) @ [[extend, extend * slant], [0, 1]])
            .round()
            .astype(int)
        )
        if len(_MATRICES) > 1000:
            _MATRICES.clear()
        found = _MATRICES[key] = (matrix, tuple(int(v) for v in matrix.ravel()))
    return found


def _draw_text_glyphs_and_boxes(
    self: Any, gc: Any, x: float, y: float, angle: float, glyphs: Any, boxes: Any
) -> None:
    # matplotlib 3.11's RendererAgg._draw_text_glyphs_and_boxes, with the glyph bitmaps kept.
    # A font is left with another glyph's size and transform than after matplotlib's loop: every
    # user of a font sets its size first, which sets its transform anew.
    from matplotlib.backends.backend_agg import get_hinting_flag
    from matplotlib.ft2font import RenderMode

    # y is downwards.
    cos = math.cos(math.radians(angle))
    sin = math.sin(math.radians(angle))
    load_flags = get_hinting_flag()
    antialiased = gc.get_antialiased()
    mode = RenderMode.NORMAL if antialiased else RenderMode.MONO
    height = self.height
    dpi = self.dpi
    for font, size, glyph_index, slant, extend, dx, dy in glyphs:  # dy is upwards.
        matrix, matrix_key = _matrix(angle, slant, extend)
        delta = [
            round(0x40 * (x + dx * cos - dy * sin)),
            # FreeType's y is upwards.
            round(0x40 * (height - y + dx * sin + dy * cos)),
        ]
        key = (
            font,
            size,
            dpi,
            glyph_index,
            matrix_key,
            delta[0] & 0x3F,
            delta[1] & 0x3F,
            load_flags,
            mode,
        )
        found = _GLYPHS.get(key)
        if found is None:
            font.set_size(size, dpi)
            font._set_transform(matrix, delta)
            bitmap = font._render_glyph(glyph_index, load_flags, mode)
            buffer = np.array(bitmap.buffer, copy=True)
            if not antialiased:
                buffer *= 0xFF
            found = (buffer, bitmap.left - (delta[0] >> 6), bitmap.top - (delta[1] >> 6))
            if len(_GLYPHS) >= _MAX_GLYPHS:
                _GLYPHS.clear()
            _GLYPHS[key] = found
        buffer, left, top = found
        # draw_text_image's y is downwards & the bitmap bottom side.
        self._renderer.draw_text_image(
            buffer,
            left + (delta[0] >> 6),
            int(height) - (top + (delta[1] >> 6)) + buffer.shape[0],
            0,
            gc,
        )
    if boxes:  # mathtext's rules: matplotlib's own method draws them, with no glyph left to draw
        _INSTALLED[0](self, gc, x, y, angle, (), boxes)
