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
    _INSTALLED.extend((original, renderer.draw_text))
    renderer._draw_text_glyphs_and_boxes = _draw_text_glyphs_and_boxes  # type: ignore[method-assign]
    renderer.draw_text = _draw_text  # type: ignore[method-assign]
    if not hasattr(renderer, "_get_font_height_metrics"):
        renderer._get_font_height_metrics = _font_height_metrics  # type: ignore[attr-defined]
    return True


def uninstall() -> None:
    """Back to matplotlib's own drawing (for tests that compare the two)."""
    from matplotlib.backends import backend_agg

    if _INSTALLED:
        renderer = backend_agg.RendererAgg
        renderer._draw_text_glyphs_and_boxes, renderer.draw_text = _INSTALLED  # type: ignore[method-assign]
        if getattr(renderer, "_get_font_height_metrics", None) is _font_height_metrics:
            del renderer._get_font_height_metrics
        _INSTALLED.clear()
    _GLYPHS.clear()
    _LAYOUTS.clear()
    _HEIGHTS.clear()


# (font properties, the font families of rcParams, size, dpi) -> a text's line metrics
_HEIGHTS: dict[tuple[Any, ...], tuple[float | None, float | None, float | None]] = {}
_FAMILIES = ("font.family", "font.sans-serif", "font.serif", "font.monospace", "font.cursive")


def _font_height_metrics(self: Any, prop: Any) -> tuple[float | None, float | None, float | None]:
    """matplotlib 3.11's ``Text._get_layout`` asks a renderer that has this method for the
    font's ascent, descent and line gap, and otherwise finds the font and reads its tables for
    every text it lays out (a tenth of a scatter plot's redrawing). The same computation at
    the renderer's resolution, kept per font; None for the metrics that Text measures itself
    (a font without these tables)."""
    from matplotlib import rcParams
    from matplotlib.font_manager import fontManager, get_font

    # what FontProperties hashes, as values (a properties object may change after it is used)
    key = (
        tuple(prop.get_family()),
        prop.get_style(),
        prop.get_variant(),
        prop.get_weight(),
        prop.get_stretch(),
        prop.get_file(),
        prop.get_math_fontfamily(),
        *(tuple(rcParams[k]) for k in _FAMILIES),
        prop.get_size_in_points(),
        self.dpi,
    )
    found = _HEIGHTS.get(key)
    if found is None:
        found = (None, None, None)
        font = get_font(fontManager._find_fonts_by_props(prop))
        for table_name, gap_key, ascent_key, descent_key in (
            ("OS/2", "sTypoLineGap", "sTypoAscender", "sTypoDescender"),
            ("hhea", "lineGap", "ascent", "descent"),
        ):
            table = font.get_sfnt_table(table_name)
            if table is None:
                continue
            scale = 1 / font.get_sfnt_table("head")["unitsPerEm"] * key[-2] * self.dpi / 72
            found = (table[ascent_key] * scale, -table[descent_key] * scale, table[gap_key] * scale)
            break
        if len(_HEIGHTS) > 1000:
            _HEIGHTS.clear()
        _HEIGHTS[key] = found
    return found


# (font, size, dpi, glyph, transform, x and y phase in 1/64 pixel, load flags, render mode) ->
# (bitmap, its left and top edge less the whole pixels of the glyph's place)
_GLYPHS: dict[tuple[Any, ...], tuple[np.ndarray, int, int]] = {}
_MATRICES: dict[tuple[float, float, float], tuple[np.ndarray, tuple[int, ...]]] = {}
# (font, size, dpi, string, load flags, font features, language) -> (the font, its glyphs as
# (font object, glyph index, x, y)); the font is kept to tell a reused id from the same font
_LAYOUTS: dict[tuple[Any, ...], tuple[Any, tuple[tuple[Any, int, float, float], ...]]] = {}
_MAX_LAYOUTS = 20_000


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


def _draw_text(
    self: Any,
    gc: Any,
    x: float,
    y: float,
    s: str,
    prop: Any,
    angle: float,
    ismath: Any = False,
    mtext: Any = None,
) -> None:
    # matplotlib 3.11's RendererAgg.draw_text, with the string's layout kept: FreeType's layout
    # of a string (glyphs, kerning, their offsets) depends only on the font, its size, the
    # resolution, the load flags, the font features and the language, and took a quarter of a
    # millisecond a text, every tick label of every drawing
    from matplotlib.backends.backend_agg import get_hinting_flag

    if ismath:
        return self.draw_mathtext(gc, x, y, s, prop, angle)  # type: ignore[no-any-return]
    font = self._prepare_font(prop)
    flags = get_hinting_flag()
    features = mtext.get_fontfeatures() if mtext is not None else None
    language = mtext.get_language() if mtext is not None else None
    size = prop.get_size_in_points()
    key: tuple[Any, ...] | None = (id(font), size, self.dpi, s, flags, features, language)
    try:
        found = _LAYOUTS.get(key)  # type: ignore[arg-type]
    except TypeError:  # features or language given as a list: not kept
        found, key = None, None
    if found is None or found[0] is not font:
        items = font._layout(s, flags=flags, features=features, language=language)
        laid = tuple((item.ft_object, item.glyph_index, item.x, item.y) for item in items)
        if key is not None:
            if len(_LAYOUTS) >= _MAX_LAYOUTS:
                _LAYOUTS.clear()
            _LAYOUTS[key] = (font, laid)
    else:
        laid = found[1]
    self._draw_text_glyphs_and_boxes(
        gc, x, y, angle, ((ft, size, index, 0, 1, gx, gy) for ft, index, gx, gy in laid), []
    )
    return None
