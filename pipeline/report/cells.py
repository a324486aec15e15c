"""Figures made of equal cells on a grid under a header strip, each cell drawn on a figure of its
own and the PNG put together from their pixels.

The system ranking of a large comparison is one such figure: a panel per column, thirty of
them, two of which move in each job of an α sweep. Drawn as one matplotlib figure, every job
would pay for the whole canvas (clearing and filling 35 million pixels, checking them, comparing
them) to redraw two panels. Here the PNG *is* its cells' pixels laid side by side, whether
drawn from scratch or after a change: a process keeps the last picture it put together and the
content digest of each cell, and the next picture of the same frame draws only the cells whose
content changed, each on a small figure of the cell's size. The same inputs give the same pixels
either way, by construction.

A cell's ink must stay inside its cell (a tick label reaching into the neighbour's, say): where
one does not, the figure is drawn whole by matplotlib instead, with the same geometry, as are the
vector formats (PDF, SVG).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from paraeval.memo import Memo
from paraeval.pipeline.report import figure_files


@dataclass(frozen=True)
class CellGrid:
    """The frame of a cell figure, in whole pixels at ``dpi``: ``cell`` (width, height), the
    ``header`` strip's height above the cells, and the ``axes`` of each cell as (left, bottom,
    width, height) from the cell's lower left corner."""

    cell: tuple[int, int]
    rows: int
    cols: int
    header: int
    axes: tuple[int, int, int, int]
    dpi: int = figure_files.PNG_DPI

    @property
    def width(self) -> int:
        return self.cols * self.cell[0]

    @property
    def height(self) -> int:
        return self.header + self.rows * self.cell[1]

    def origin(self, index: int) -> tuple[int, int]:
        """The top row and left column of cell ``index`` (row by row) in the whole figure."""
        row, col = divmod(index, self.cols)
        return self.header + row * self.cell[1], col * self.cell[0]


@dataclass(frozen=True)
class Cell:
    """``draw(ax)`` draws the cell's content on its axes; ``inputs`` is everything it depends
    on (its digest tells whether the cell changed)."""

    draw: Callable[[Any], None]
    inputs: tuple[Any, ...]


@dataclass(frozen=True)
class Header:
    """``draw(fig, bottom, inch)`` draws the strip's content (titles, legends) on ``fig``, the
    strip starting at ``bottom`` (a fraction of the figure's height) and one inch being ``inch``
    of that height; ``inputs`` as for :class:`Cell`."""

    draw: Callable[[Any, float, float], None]
    inputs: tuple[Any, ...]


def _figure(width: int, height: int, dpi: int) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure_files._plt()  # the Agg backend and the glyph cache
    fig = Figure(figsize=(width / dpi, height / dpi), dpi=dpi)
    FigureCanvasAgg(fig)
    return fig


def whole_figure(grid: CellGrid, cells: Sequence[Cell], header: Header) -> Any:
    """The figure drawn as one matplotlib figure: each cell's axes where the cell puts them."""
    fig = _figure(grid.width, grid.height, grid.dpi)
    left, bottom, width, height = grid.axes
    for index, cell in enumerate(cells):
        top, col = grid.origin(index)
        y0 = grid.height - top - grid.cell[1] + bottom
        ax = fig.add_axes(
            (
                (col + left) / grid.width,
                y0 / grid.height,
                width / grid.width,
                height / grid.height,
            )
        )
        cell.draw(ax)
    header.draw(fig, 1 - grid.header / grid.height, grid.dpi / grid.height)
    return fig


def _inside(pixels: np.ndarray | None, height: int, width: int) -> np.ndarray | None:
    """The figure's own area of ``margin_pixels``, where all of its ink lies there (none in
    the margin around it); None otherwise."""
    from paraeval.pipeline.report.pixel_scan import ink_extent

    if pixels is None:
        return None
    margin = (pixels.shape[0] - height) // 2
    if pixels.shape[:2] != (height + 2 * margin, width + 2 * margin):
        return None
    flat = pixels.view(np.uint32)[..., 0]
    first_row, last_row, first_col, last_col = ink_extent(flat, flat[0, 0])
    if first_row >= 0 and (
        first_row < margin
        or first_col < margin
        or last_row >= margin + height
        or last_col >= margin + width
    ):
        return None
    return pixels[margin : margin + height, margin : margin + width]


def _cell_pixels(grid: CellGrid, cell: Cell) -> np.ndarray | None:
    width, height = grid.cell
    fig = _figure(width, height, grid.dpi)
    left, bottom, ax_width, ax_height = grid.axes
    ax = fig.add_axes((left / width, bottom / height, ax_width / width, ax_height / height))
    cell.draw(ax)
    return _inside(figure_files.margin_pixels(fig, grid.dpi), height, width)


def _header_pixels(grid: CellGrid, header: Header) -> np.ndarray | None:
    fig = _figure(grid.width, grid.header, grid.dpi)
    header.draw(fig, 0.0, grid.dpi / grid.header)
    return _inside(figure_files.margin_pixels(fig, grid.dpi), grid.header, grid.width)


def _edge(dpi: int) -> int:
    """Background around the cells of the picture: the crop (figure_files.crop_pixels) needs a
    blank edge beyond its padding."""
    return round(figure_files.PAD_INCHES * dpi) + 2


@dataclass
class _Picture:
    pixels: np.ndarray  # the whole figure with _edge(dpi) pixels of background around it
    keys: list[str]  # the cells' digests, then the header's


_PICTURES: Memo[str, _Picture] = Memo(
    "cells.pictures", max_entries=2, max_bytes=320 << 20, size=lambda p: p.pixels.nbytes
)


def _paint(picture: _Picture, grid: CellGrid, index: int, pixels: np.ndarray) -> None:
    top, left = grid.origin(index) if index >= 0 else (0, 0)
    edge = _edge(grid.dpi)
    top, left = top + edge, left + edge
    picture.pixels[top : top + pixels.shape[0], left : left + pixels.shape[1]] = pixels


def _picture(
    grid: CellGrid, cells: Sequence[Cell], header: Header, keys: list[str], frame: str
) -> _Picture | None:
    """The kept picture of ``frame`` with the changed parts drawn again, or a new one; None
    where a part's ink leaves its cell."""
    kept = _PICTURES.get(frame)
    if kept is None:
        todo = list(range(len(cells) + 1))
    else:
        todo = [i for i, (old, new) in enumerate(zip(kept.keys, keys, strict=True)) if old != new]
    picture = kept
    for i in todo:
        header_part = i == len(cells)
        pixels = _header_pixels(grid, header) if header_part else _cell_pixels(grid, cells[i])
        if pixels is None:
            _PICTURES.discard(frame)  # a kept picture may be part redrawn
            return None
        if picture is None:
            # the background is the colour of a drawn part's corner: the figure's face colour
            edge = _edge(grid.dpi)
            full = np.empty((grid.height + 2 * edge, grid.width + 2 * edge, 4), dtype=np.uint8)
            full[...] = pixels[0, 0]
            picture = _Picture(full, list(keys))
        # laid in at once: each part's pixels are its own drawing's buffer, a cell's figure
        # with its margin, and a first drawing has thirty of them
        _paint(picture, grid, -1 if header_part else i, pixels)
    assert picture is not None  # kept, or made by the first of all the parts drawn
    picture.keys = list(keys)
    if kept is None:
        _PICTURES.put(frame, picture)
    return picture


def save_cells(path: Path, grid: CellGrid, cells: Sequence[Cell], header: Header) -> None:
    """The figure of ``cells`` on ``grid`` under ``header`` to ``path``, cropped to its ink as
    ``save_figure`` crops. A PNG is put together from its cells' pixels (a frame this process
    drew before: the changed cells only); other formats, and a PNG whose cell ink overflows,
    are drawn whole."""
    if path.suffix == ".png":
        frame = figure_files.content_key(figure_files._code_digest(), grid, len(cells))
        keys = [figure_files.content_key(part.inputs) for part in [*cells, header]]
        picture = _picture(grid, cells, header, keys, frame)
        if picture is not None and figure_files.write_pixels(picture.pixels, path, grid.dpi):
            return
        _PICTURES.discard(frame)
    fig = whole_figure(grid, cells, header)
    figure_files.save_figure(fig, path, grid.dpi)
