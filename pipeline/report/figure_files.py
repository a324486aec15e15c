"""Figures to files: a figure drawn once with a margin around it, cut to its ink and written by
a small PNG encoder; and the memo of figure files a process has drawn, by what they show.

The drawing modules (``plots``, ``panels``, ``layers``, ``compare_plots``) build on this one,
which imports none of them.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xxhash

from paraeval.memo import Memo
from paraeval.pipeline.report import glyphs


def _plt():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    glyphs.install()
    return plt


PNG_DPI = 200
PAD_INCHES = 0.08
# room drawn around a PNG figure's own area, so that labels reaching past its edge are kept
MARGIN_INCHES = 1.0


def save_figure(fig: Any, path: Path, dpi: int = PNG_DPI) -> None:
    """The figure in the format of ``path``'s suffix, cropped to its contents (no label is cut
    off), through a temporary file and a rename, so a crash never leaves a truncated file under
    the final name. A PNG is drawn once with a margin and cut to its inked pixels plus the
    padding: ``bbox_inches="tight"`` draws twice (once to measure every artist, once to render),
    and the background colour tells where the contents end just as well."""
    png = (path.suffix.lstrip(".") or "png") == "png"
    save_drawn(fig, path, margin_pixels(fig, dpi) if png else None, dpi)


def save_drawn(fig: Any, path: Path, drawn: np.ndarray | None, dpi: int = PNG_DPI) -> None:
    """``save_figure`` for a figure already drawn with its margin (``margin_pixels``, None where
    it could not be): those pixels are cut and written; where they cannot tell the contents'
    extent (ink reaching the margin's edge), or there are none, matplotlib measures and draws."""
    from paraeval.pipeline.files import atomic_write

    if drawn is not None and write_pixels(drawn, path, dpi):
        return
    fmt = path.suffix.lstrip(".") or "png"
    atomic_write(
        path,
        lambda p: fig.savefig(p, dpi=dpi, format=fmt, bbox_inches="tight", pad_inches=PAD_INCHES),
    )


def write_pixels(drawn: np.ndarray, path: Path, dpi: int = PNG_DPI) -> bool:
    """``drawn`` (``margin_pixels``) cut to its contents and written as a PNG; False, writing
    nothing, where the cut cannot be told."""
    from paraeval.pipeline.files import atomic_write

    cropped = crop_pixels(drawn, dpi)
    if cropped is None:
        return False
    atomic_write(path, lambda p: _write_png(cropped, p, dpi, key=path.name))
    return True


def margin_pixels(fig: Any, dpi: int) -> np.ndarray | None:
    """RGBA pixels of the figure drawn at ``dpi`` with ``MARGIN_INCHES`` around it on every side
    (display point ``(x, y)`` lands at column ``x + MARGIN_INCHES * dpi`` from the left and row
    ``y + MARGIN_INCHES * dpi`` from the bottom); None for a background that is not opaque or
    artists beyond the margin. The pixels are the drawing's own buffer, not a copy: the figure
    keeps its renderer (``fig.canvas.renderer``) for measuring, and is not drawn again."""
    from matplotlib.colors import to_rgba

    if to_rgba(fig.get_facecolor())[3] != 1.0:
        return None
    return drawn_with_margin(fig, dpi)


def drawn_with_margin(fig: Any, dpi: int) -> np.ndarray | None:
    """``margin_pixels`` for any background, transparent included (``layers`` draws an overlay
    on one)."""
    from matplotlib.transforms import Bbox

    if getattr(fig.canvas, "get_renderer", None) is None:
        return None
    glyphs.install()
    # at the drawing's dpi, the renderer it leaves behind measures in the figure's own units
    fig.set_dpi(dpi)
    w, h = fig.get_size_inches()
    box = Bbox.from_extents(-MARGIN_INCHES, -MARGIN_INCHES, w + MARGIN_INCHES, h + MARGIN_INCHES)
    grab = _Grab()
    fig.savefig(grab, format="rgba", dpi=dpi, bbox_inches=box)
    # the drawing's own width: box.width * dpi may fall a hair short of a whole number
    width = int(fig.canvas.renderer.width)
    if grab.data is None or width == 0 or grab.data.nbytes % (4 * width):
        return None
    if not _within_margin(fig, fig.canvas.renderer):
        return None
    return np.frombuffer(grab.data, dtype=np.uint8).reshape(-1, width, 4)


class _Grab:
    """A file for ``savefig(format="rgba")`` that keeps the renderer's buffer it is given
    instead of copying it."""

    data: memoryview | None = None

    def write(self, data: Any) -> int:
        self.data = memoryview(data)
        return self.data.nbytes

    def seek(self, offset: int, whence: int = 0) -> int:  # what tells matplotlib it is a file
        return 0


def ink(rgba: np.ndarray) -> np.ndarray:
    """Where the pixels differ from the background (the colour of the top-left corner, which
    the margin leaves blank)."""
    flat = rgba.view(np.uint32)[..., 0]
    return flat != flat[0, 0]


def crop_pixels(rgba: np.ndarray, dpi: int) -> np.ndarray | None:
    """``rgba`` cut to its inked pixels plus ``PAD_INCHES``; None where the ink reaches the edge
    (something may lie beyond it) or there is none."""
    from paraeval.pipeline.report.pixel_scan import ink_extent

    flat = rgba.view(np.uint32)[..., 0]
    first_row, last_row, first_col, last_col = ink_extent(flat, flat[0, 0])
    if first_row < 0:
        return None
    height, width = flat.shape
    if first_row == 0 or first_col == 0 or last_row == height - 1 or last_col == width - 1:
        return None
    pad = round(PAD_INCHES * dpi)
    top, bottom = max(first_row - pad, 0), min(last_row + pad + 1, height)
    left, right = max(first_col - pad, 0), min(last_col + pad + 1, width)
    return rgba[top:bottom, left:right]


def _within_margin(fig: Any, renderer: Any) -> bool:
    """Whether the figure's own texts, legends and axes lie within the margin drawn around it:
    what lies wholly beyond it would leave no ink at the margin's edge to tell of it."""
    w, h = fig.get_size_inches()
    reach = MARGIN_INCHES * fig.dpi
    for artist in [*fig.texts, *fig.legends, *fig.axes]:
        if not artist.get_visible():
            continue
        box = artist.get_window_extent(renderer)
        if (
            box.x0 < -reach
            or box.y0 < -reach
            or box.x1 > w * fig.dpi + reach
            or box.y1 > h * fig.dpi + reach
        ):
            return False
    return True


def _write_png(pixels: np.ndarray, path: Path, dpi: int, key: str | None = None) -> None:
    """A PNG of the pixels: RGB where every pixel is opaque, else RGBA; each row filtered as its
    difference from the row above ("Up") and deflated at level 3. A figure is mostly flat areas
    and horizontal strokes, which that filter turns into long zero runs: a few percent larger
    than a per-row adaptive filter at level 6, at a fifth of the time.

    The image is deflated in bands of ``BAND_ROWS`` rows, each on its own (``_deflated``), so
    that the bands of a redrawn figure whose rows did not change are not deflated again:
    ``key`` names the figure (its file name) whose last bands this process keeps."""
    import matplotlib

    ppm = round(dpi / 0.0254)
    idat, opaque = _deflated(pixels, key)
    software = f"Matplotlib version{matplotlib.__version__}, https://matplotlib.org/"
    chunks = [
        _png_chunk(
            b"IHDR",
            struct.pack(
                ">IIBBBBB", pixels.shape[1], pixels.shape[0], 8, 2 if opaque else 6, 0, 0, 0
            ),
        ),
        _png_chunk(b"pHYs", struct.pack(">IIB", ppm, ppm, 1)),
        _png_chunk(b"tEXt", b"Software\0" + software.encode("latin-1")),
        _png_chunk(b"IDAT", idat),
        _png_chunk(b"IEND", b""),
    ]
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.writelines(chunks)


BAND_ROWS = 64
# zlib's stream header for a 32 KiB window at levels 2 to 5
_ZLIB_HEADER = b"\x78\x5e"


@dataclass
class _Bands:
    """A written image's pixels (a copy) and, per band, its deflated bytes, the Adler-32 of its
    filtered bytes and their length."""

    pixels: np.ndarray
    opaque: bool
    parts: list[tuple[bytes, int, int]]


_BANDS: Memo[str, _Bands] = Memo(
    "figure_files.bands", max_entries=16, max_bytes=192 << 20, size=lambda b: b.pixels.nbytes
)


def _deflated(pixels: np.ndarray, key: str | None) -> tuple[bytes, bool]:
    """The zlib stream of the filtered rows, deflated band by band, and whether every pixel is
    opaque (RGB rows then, else RGBA). Each band is a raw deflate stream of its own (a fresh
    compressor, ended by a full flush, the last one finished), so that a band's bytes depend on
    its rows and the row above them only. A band of the image ``key`` last wrote with the same
    rows is taken from it; the stream is the same either way. Only the bands that changed are
    read for their transparency and copied into the kept image."""
    height = pixels.shape[0]
    starts = range(0, height, BAND_ROWS)
    kept = _BANDS.get(key) if key is not None else None
    if kept is not None and kept.pixels.shape != pixels.shape:
        kept = None
    same = [False] * len(starts)
    if kept is not None:
        from paraeval.pipeline.report.pixel_scan import equal_bands

        # a band with the row above it: the "Up" filter of its first row reads that row
        same = equal_bands(
            kept.pixels.view(np.uint32)[..., 0], pixels.view(np.uint32)[..., 0], BAND_ROWS
        ).tolist()
    changed = [start for band, start in enumerate(starts) if not same[band]]
    if kept is not None and kept.opaque:
        # the unchanged rows are the kept image's, all opaque: only the changed ones are read
        opaque = all(bool((pixels[a : a + BAND_ROWS, :, 3] == 255).all()) for a in changed)
    else:
        opaque = bool((pixels[..., 3] == 255).all())
    if kept is not None and kept.opaque != opaque:
        kept, same = None, [False] * len(starts)
    parts: list[tuple[bytes, int, int]] = []
    for band, start in enumerate(starts):
        if same[band]:
            assert kept is not None
            parts.append(kept.parts[band])
            continue
        stop = min(start + BAND_ROWS, height)
        above = max(start - 1, 0)
        block = _rgb(pixels[above:stop]) if opaque else np.ascontiguousarray(pixels[above:stop])
        rows = block.reshape(stop - above, -1)
        # uint8 arithmetic wraps modulo 256, as the filter is defined
        filtered = np.empty((stop - start, rows.shape[1] + 1), dtype=np.uint8)
        filtered[:, 0] = 2  # "Up"
        if start == 0:
            filtered[0, 0] = 0  # the first row has no row above it: unfiltered
            filtered[0, 1:] = rows[0]
            np.subtract(rows[1:], rows[:-1], out=filtered[1:, 1:])
        else:
            np.subtract(rows[1:], rows[:-1], out=filtered[:, 1:])
        deflate = zlib.compressobj(3, zlib.DEFLATED, -15)
        end = zlib.Z_FINISH if stop == height else zlib.Z_FULL_FLUSH
        parts.append(
            (deflate.compress(filtered) + deflate.flush(end), zlib.adler32(filtered), filtered.size)
        )
    if key is not None:
        if kept is None:
            _BANDS.put(key, _Bands(np.array(pixels), opaque, parts))
        else:
            # the kept copy takes the changed rows only (after every band was compared: a band
            # is compared with the row above it as it was)
            for start in changed:
                kept.pixels[start : start + BAND_ROWS] = pixels[start : start + BAND_ROWS]
            kept.parts = parts
    adler = 1
    for _, part, length in parts:
        adler = _adler32_combine(adler, part, length)
    stream = b"".join([_ZLIB_HEADER, *(part for part, _, _ in parts), struct.pack(">I", adler)])
    return stream, opaque


def _adler32_combine(first: int, second: int, second_length: int) -> int:
    """The Adler-32 of two byte strings one after the other, from theirs (zlib's
    ``adler32_combine``, which Python's zlib does not expose)."""
    base = 65521
    rem = second_length % base
    low = ((first & 0xFFFF) + (second & 0xFFFF) + base - 1) % base
    high = (rem * (first & 0xFFFF) + (first >> 16) + (second >> 16) + base - rem) % base
    return low | (high << 16)


# a pixel as its three colour bytes and its alpha byte
_RGB_A = np.dtype([("rgb", "V3"), ("a", "u1")])


def _rgb(pixels: np.ndarray) -> np.ndarray:
    """The colour bytes of RGBA pixels, contiguous: copied as one 3-byte item per pixel, about
    twice as fast as numpy's copy of the three channels of a strided view."""
    if pixels.strides[-2:] != (4, 1):  # a pixel's bytes apart: the view needs them together
        pixels = np.ascontiguousarray(pixels)
    colours = pixels.view(_RGB_A)[..., 0]["rgb"]
    return np.ascontiguousarray(colours).view(np.uint8).reshape(*pixels.shape[:-1], 3)


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


# Figure files this process has drawn, by a digest of the drawing function, the plotting code,
# the format and the plotted data. A Hydra multirun runs its jobs in one process, and most figures
# of an α sweep's jobs show data that did not change: those are written again, not drawn again.
_FILES: Memo[str, bytes] = Memo("plots.files", max_entries=128)
_CODE: str | None = None


def _code_digest() -> str:
    global _CODE
    if _CODE is None:
        import matplotlib

        h = hashlib.blake2b(matplotlib.__version__.encode(), digest_size=16)
        for name in (
            "figure_files.py",
            "plots.py",
            "panels.py",
            "cells.py",
            "layers.py",
            "compare_plots.py",
            "sweep.py",
        ):
            h.update((Path(__file__).parent / name).read_bytes())
        _CODE = h.hexdigest()
    return _CODE


def _feed(h: Any, part: Any) -> None:
    if isinstance(part, pd.DataFrame | pd.Series):
        frame = part.to_frame() if isinstance(part, pd.Series) else part
        h.update(repr([list(map(str, frame.columns)), list(map(str, frame.dtypes))]).encode())
        _feed_values(h, frame.index)
        for k in range(frame.shape[1]):
            _feed_values(h, frame.iloc[:, k])
    elif isinstance(part, np.ndarray):
        h.update(repr((part.shape, part.dtype.str)).encode() + part.tobytes())
    elif isinstance(part, list | tuple):
        h.update(b"[")
        for p in part:
            _feed(h, p)
        h.update(b"]")
    else:
        h.update(repr(part).encode())
    h.update(b"\x1f")


def _feed_values(h: Any, values: pd.Index | pd.Series) -> None:
    """A column's (or an index's) values: numbers by their bytes, anything else by its repr.
    pandas' row hashing costs a millisecond a frame whatever its size, and a sweep's job keys
    the thirty small tables of its ranking's panels."""
    if isinstance(values, pd.RangeIndex):
        h.update(repr(("range", values.start, values.stop, values.step)).encode())
        return
    array = values.to_numpy()
    if array.dtype.kind in "biufcmM":
        h.update(array.dtype.str.encode() + np.ascontiguousarray(array).tobytes())
    else:
        h.update(repr(array.tolist()).encode("utf-8", "surrogatepass"))
    h.update(b"\x1e")


def content_key(*parts: Any) -> str:
    """An in-process key of ``parts`` (tables, arrays, nested lists and tuples, anything with a
    repr): what a kept drawing was drawn from."""
    h = xxhash.xxh3_128()
    for part in parts:
        _feed(h, part)
    return h.hexdigest()


def render(path: Path, kind: str, draw: Callable[[Path], object], *inputs: Any) -> None:
    """``draw(path)``, unless this process already drew a ``kind`` figure from the same
    ``inputs`` (everything the figure depends on): then those bytes are written."""
    key = content_key(f"{_code_digest()}|{kind}|{path.suffix}", *inputs)
    drawn = _FILES.get(key)
    if drawn is not None:
        from paraeval.pipeline.files import atomic_write

        atomic_write(path, lambda p: p.write_bytes(drawn))
        return
    draw(path)
    if not path.exists():  # nothing to draw
        return
    _FILES.put(key, path.read_bytes())
